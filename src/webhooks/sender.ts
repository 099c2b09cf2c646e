import type { LookupFunction } from 'node:net';
import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import type { WebhookConfig } from '../config.ts';
import { randomBase62 } from '../db/ids.ts';
import { runInBackground } from '../db/priority.ts';
import { sign, type Sealer } from './signing.ts';
import { checkTarget } from './target.ts';
import type { AttemptOutcome, ClaimedDelivery, WebhooksRepository } from './webhooks.repository.ts';

/** The start of a receiver's answer kept in the delivery log. */
export const RESPONSE_BODY_BYTES = 256;
/**
 * Attempts in flight at once per worker: each slot is refilled as soon as its attempt ends. An
 * attempt waiting on a receiver that does not answer is an idle socket, so there are many: it
 * takes 16 such endpoints (4 each) to fill them.
 */
const SLOTS = 64;
/** Attempts in flight at once to one endpoint, per worker: a slow one cannot take every slot. */
const PER_ENDPOINT = 4;
const POLL_MS = 500;
/** How often deliveries out of attempts whose last outcome was never recorded are failed. */
const SWEEP_MS = 30_000;
const MAX_DELAY_MS = 3_600_000;

export interface WebhookSenderDeps {
  repo: WebhooksRepository;
  sealer: Sealer | undefined;
  config: WebhookConfig;
  logger: Logger;
}

/** Retry delay after the attempt-th failure: the base, doubling, capped at an hour. */
export const retryDelayMs = (config: WebhookConfig, attempt: number) =>
  Math.min(config.retryBaseMs * 2 ** Math.max(0, attempt - 1), MAX_DELAY_MS);

async function readHead(body: AsyncIterable<Buffer>): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= RESPONSE_BODY_BYTES) break;
  }
  // PostgreSQL text holds no NUL: a gzip answer has them, and the attempt could not be recorded.
  return new TextDecoder('utf-8', { fatal: false })
    .decode(Buffer.concat(chunks).subarray(0, RESPONSE_BODY_BYTES))
    .replaceAll('\u0000', '\ufffd');
}

/** One attempt: the target checked on its resolved address, no redirects, a timeout. */
export async function attempt(
  delivery: ClaimedDelivery,
  secret: string,
  config: WebhookConfig,
): Promise<AttemptOutcome> {
  let url: URL;
  try {
    url = new URL(delivery.url);
  } catch {
    return { ok: false, status: null, error: 'invalid URL', body: null };
  }
  // One deadline for the attempt, the address lookup included.
  const deadline = AbortSignal.timeout(config.timeoutMs);
  const target = await checkTarget(url, config.allowPrivateTargets, deadline);
  if (!target.ok) return { ok: false, status: null, error: `refused: ${target.reason}`, body: null };
  // Connect to the address just checked, whatever a second lookup would say.
  const pinned: LookupFunction = (_host, options, callback) => {
    if (options.all) callback(null, [{ address: target.address, family: target.family }]);
    else callback(null, target.address, target.family);
  };
  const dispatcher = new Agent({ connect: { lookup: pinned, timeout: config.timeoutMs } });
  const body = JSON.stringify(delivery.payload);
  const timestamp = Math.floor(Date.now() / 1000);
  try {
    const response = await request(url, {
      method: 'POST',
      dispatcher,
      body,
      headersTimeout: config.timeoutMs,
      bodyTimeout: config.timeoutMs,
      signal: deadline,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'ragport-webhooks',
        'webhook-id': delivery.id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': sign(secret, delivery.id, timestamp, body),
      },
    });
    // The status decides; an answer whose body is slow or cut is still that status (null body).
    const head = await readHead(response.body)
      .catch(() => null)
      .finally(() => response.body.destroy());
    if (response.statusCode >= 200 && response.statusCode < 300)
      return { ok: true, status: response.statusCode, body: head };
    const redirect = response.statusCode >= 300 && response.statusCode < 400;
    return {
      ok: false,
      status: response.statusCode,
      error: redirect ? `redirect not followed (${response.statusCode})` : `receiver answered ${response.statusCode}`,
      body: head,
    };
  } catch (error) {
    const e = error as Error;
    const timedOut = e.name === 'TimeoutError' || /timeout/i.test(e.name) || /timeout/i.test(e.message);
    return {
      ok: false,
      status: null,
      error: timedOut ? `timed out after ${config.timeoutMs} ms` : e.message,
      body: null,
    };
  } finally {
    void dispatcher.close().catch(() => undefined);
  }
}

/**
 * Sends due deliveries from every worker (the server's in-process worker and `npm run worker`),
 * each under a lease so two workers never send the same one at once. Up to SLOTS attempts run at
 * once, each slot refilled as soon as its attempt ends, so a receiver that hangs holds one slot
 * for its timeout rather than every delivery claimed with it. An endpoint that does not answer
 * (or answers 5xx or 429) is paused on this worker for its delivery's retry delay: its other
 * deliveries wait with it instead of each costing a timeout.
 */
export function startWebhookSender({ repo, sealer, config, logger }: WebhookSenderDeps) {
  const workerId = `whs_${randomBase62(12)}`;
  const leaseMs = config.timeoutMs * 3 + 5_000;
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  const inFlight = new Set<Promise<void>>();
  const perEndpoint = new Map<string, number>();
  /** Endpoints paused on this worker, until when (ms). */
  const paused = new Map<string, number>();
  const pausedNow = () => {
    const now = Date.now();
    for (const [id, until] of paused) if (until <= now) paused.delete(id);
    return [...paused.keys()];
  };

  const outcomeOf = async (d: ClaimedDelivery): Promise<AttemptOutcome> => {
    if (sealer === undefined) {
      return { ok: false, status: null, error: 'WEBHOOK_SIGNING_KEY is not set on this worker', body: null };
    }
    let secret: string;
    try {
      secret = sealer.open(d.secret_sealed);
    } catch {
      return {
        ok: false,
        status: null,
        error: "the endpoint's signing secret cannot be opened: WEBHOOK_SIGNING_KEY is not the key it was sealed with",
        body: null,
      };
    }
    return attempt(d, secret, config);
  };

  const deliver = async (d: ClaimedDelivery) => {
    const outcome = await outcomeOf(d);
    const delayMs = retryDelayMs(config, d.attempts);
    // No answer, or one that says later: the endpoint's other deliveries would each cost as much.
    if (!outcome.ok && (outcome.status === null || outcome.status >= 500 || outcome.status === 429)) {
      paused.set(d.endpoint_id, Math.max(paused.get(d.endpoint_id) ?? 0, Date.now() + delayMs));
    }
    await runInBackground(() => repo.finish(d.id, workerId, outcome, { maxAttempts: config.maxAttempts, delayMs }));
    if (!outcome.ok)
      logger.debug({ delivery: d.id, attempt: d.attempts, error: outcome.error }, 'webhook attempt failed');
  };

  const start = (d: ClaimedDelivery) => {
    perEndpoint.set(d.endpoint_id, (perEndpoint.get(d.endpoint_id) ?? 0) + 1);
    const task: Promise<void> = deliver(d)
      .catch((error: unknown) => logger.warn({ err: error, delivery: d.id }, 'webhook delivery failed'))
      .finally(() => {
        inFlight.delete(task);
        const left = (perEndpoint.get(d.endpoint_id) ?? 1) - 1;
        if (left > 0) perEndpoint.set(d.endpoint_id, left);
        else perEndpoint.delete(d.endpoint_id);
        // A freed slot is filled at once, not at the next poll.
        if (!stopped) void fill();
      });
    inFlight.add(task);
  };

  let sweptAt = 0;
  let filling: Promise<void> | undefined;
  /** Claims due deliveries into the free slots. */
  const fill = (): Promise<void> => {
    if (filling !== undefined) return filling;
    const run = (async () => {
      try {
        if (Date.now() - sweptAt >= SWEEP_MS) {
          sweptAt = Date.now();
          await runInBackground(() => repo.failExhausted(config.maxAttempts), 'polling');
        }
        while (!stopped && inFlight.size < SLOTS) {
          // Background work for the embedded database: requests go first, and a poll that finds
          // nothing does not make it busy (its maintenance waits for an idle moment: db/maintenance.ts).
          const due = await runInBackground(
            () =>
              repo.claim(workerId, leaseMs, {
                limit: SLOTS - inFlight.size,
                perEndpoint: PER_ENDPOINT,
                maxAttempts: config.maxAttempts,
                inFlight: perEndpoint,
                paused: pausedNow(),
              }),
            'polling',
          );
          if (due.length === 0) return;
          for (const d of due) start(d);
        }
      } catch (error) {
        logger.warn({ err: error }, 'webhook sender: claiming failed');
      }
    })();
    // Cleared once it ends, which may be before this line when there was nothing to claim.
    filling = run;
    void run.finally(() => {
      if (filling === run) filling = undefined;
    });
    return run;
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = fill().finally(schedule);
    }, POLL_MS);
    timer.unref();
  };
  schedule();

  return {
    async stop(): Promise<void> {
      stopped = true;
      clearTimeout(timer);
      await running;
      await Promise.all([...inFlight]);
    },
  };
}

export type WebhookSender = ReturnType<typeof startWebhookSender>;
