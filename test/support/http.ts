/** What a request in a test adds to fetch's options: the bearer key (none when null) and a JSON body. */
export type CallInit = RequestInit & { key?: string | null; json?: unknown };

/** One HTTP request to a ragport at `origin`, as a client sends it: the key as a bearer token, JSON as the body. */
export function call(origin: string, path: string, init: CallInit = {}): Promise<Response> {
  const { key, json, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (key !== undefined && key !== null) headers.set('authorization', `Bearer ${key}`);
  if (json !== undefined) headers.set('content-type', 'application/json');
  return fetch(origin + path, { ...rest, headers, ...(json !== undefined ? { body: JSON.stringify(json) } : {}) });
}

/** The body of a 401 for a missing, malformed, unknown, revoked or expired key. */
export const authError = (message: string) => ({
  error: { message, type: 'authentication_error', code: 'invalid_api_key' },
});
