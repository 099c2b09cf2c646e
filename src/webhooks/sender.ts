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
const BATCH = 10;
const POLL_MS = 500;
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
  return new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(chunks).subarray(0, RESPONSE_BODY_BYTES));
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
  const target = await checkTarget(url, config.allowPrivateTargets);
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
      signal: AbortSignal.timeout(config.timeoutMs),
      headers: {
        'content-type': 'application/json',
        'user-agent': 'ragport-webhooks',
        'webhook-id': delivery.id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': sign(secret, delivery.id, timestamp, body),
      },
    });
    const head = await readHead(response.body).finally(() => response.body.destroy());
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
 * each under a lease so two workers never send the same one at once.
 */
export function startWebhookSender({ repo, sealer, config, logger }: WebhookSenderDeps) {
  const workerId = `whs_${randomBase62(12)}`;
  const leaseMs = config.timeoutMs * 3 + 5_000;
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;

  const deliver = async (d: ClaimedDelivery) => {
    let outcome: AttemptOutcome;
    if (sealer === undefined) {
      outcome = { ok: false, status: null, error: 'WEBHOOK_SIGNING_KEY is not set on this worker', body: null };
    } else {
      outcome = await attempt(d, sealer.open(d.secret_sealed), config);
    }
    await runInBackground(() =>
      repo.finish(d.id, workerId, outcome, {
        maxAttempts: config.maxAttempts,
        delayMs: retryDelayMs(config, d.attempts),
      }),
    );
    if (!outcome.ok)
      logger.debug({ delivery: d.id, attempt: d.attempts, error: outcome.error }, 'webhook attempt failed');
  };

  const tick = async () => {
    for (;;) {
      if (stopped) return;
      // Background work for the embedded database: requests go first, and a poll that finds
      // nothing does not make it busy (its maintenance waits for an idle moment: db/maintenance.ts).
      const due = await runInBackground(() => repo.claim(workerId, leaseMs, BATCH), 'polling');
      if (due.length === 0) return;
      await Promise.all(
        due.map((d) => deliver(d).catch((error: unknown) => logger.warn({ err: error }, 'webhook delivery failed'))),
      );
    }
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = tick()
        .catch((error: unknown) => logger.warn({ err: error }, 'webhook sender: claiming failed'))
        .finally(schedule);
    }, POLL_MS);
    timer.unref();
  };
  schedule();

  return {
    async stop(): Promise<void> {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

export type WebhookSender = ReturnType<typeof startWebhookSender>;
