import type { FastifyInstance } from 'fastify';

export interface ReadinessCheck {
  name: string;
  /** A failing critical check makes the instance unready; others only mark it degraded. */
  critical: boolean;
  /** Resolves with a detail when healthy, rejects or reports not ok otherwise. */
  check: () => Promise<{ ok: boolean; detail: string }>;
}

const CHECK_TIMEOUT_MS = 2_000;

/**
 * What went wrong, without the statement: drizzle's `Failed query: <sql> params: …` wraps the
 * database's own error, whose message says it (and the SQL is no business of a health probe).
 */
function reasonOf(error: unknown): string {
  let e = error;
  for (let depth = 0; depth < 5 && e instanceof Error && e.cause instanceof Error; depth++) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}

async function runCheck(check: ReadinessCheck) {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ ok: boolean; detail: string }>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, detail: 'timed out' }), CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([check.check().catch((e: unknown) => ({ ok: false, detail: reasonOf(e) })), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `/healthz`: the process serves. `/readyz`: its dependencies answer; 503 when one is down, with
 * the state of each, so a load balancer can take the instance out and an operator can see why.
 */
export function healthRoutes(checks: ReadinessCheck[], isShuttingDown: () => boolean) {
  return async (app: FastifyInstance) => {
    app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
    app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
      const results = await Promise.all(checks.map(async (c) => [c.name, await runCheck(c)] as const));
      const failing = checks.filter((_c, i) => results[i]?.[1].ok === false);
      const ready = !isShuttingDown() && failing.every((c) => !c.critical);
      const status = isShuttingDown()
        ? 'shutting_down'
        : !ready
          ? 'unavailable'
          : failing.length > 0
            ? 'degraded'
            : 'ready';
      return reply.code(ready ? 200 : 503).send({
        status,
        checks: Object.fromEntries(results),
      });
    });
  };
}
