import { createKeyBody, type CreateKeyBody } from './keys.schemas.ts';

const list = (value: string | undefined) =>
  value === undefined
    ? undefined
    : value
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
const int = (value: string | undefined) => (value === undefined ? undefined : Number(value));

type Flags = Record<string, string | boolean | undefined>;
const str = (flags: Flags, name: string) => (typeof flags[name] === 'string' ? flags[name] : undefined);

/** Command-line flags mapped onto the same schema the HTTP API validates with. */
export function createKeyFromFlags(flags: Flags): CreateKeyBody {
  const rateLimits = {
    requests_per_minute: int(str(flags, 'requests-per-minute')),
    requests_per_hour: int(str(flags, 'requests-per-hour')),
    requests_per_day: int(str(flags, 'requests-per-day')),
  };
  const quota = {
    requests_per_day: int(str(flags, 'quota-requests-per-day')),
    tokens_per_month: int(str(flags, 'quota-tokens-per-month')),
  };
  const defined = (o: Record<string, number | undefined>) =>
    Object.values(o).some((v) => v !== undefined) ? o : undefined;
  const parsed = createKeyBody.safeParse({
    name: str(flags, 'name'),
    scopes: list(str(flags, 'scopes')),
    tier: str(flags, 'tier'),
    collections: list(str(flags, 'collections')),
    expires_at: str(flags, 'expires-at'),
    rate_limits: defined(rateLimits),
    quota: defined(quota),
  });
  if (!parsed.success) {
    throw new Error(
      parsed.error.issues.map((i) => `--${i.path.join('.').replaceAll('_', '-')}: ${i.message}`).join('\n'),
    );
  }
  return parsed.data;
}
