import { Pool } from 'undici';

export interface LoadOptions {
  origin: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  concurrency: number;
  durationMs: number;
  /** Stop after this many requests per worker (the held-open streams test sends exactly one each). */
  perWorker?: number;
}

export interface LoadResult {
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  /** Milliseconds: whole response, and first body byte. */
  p50: number;
  p99: number;
  ttft50: number;
  ttft99: number;
}

const percentile = (sorted: Float64Array, p: number): number =>
  sorted.length === 0 ? NaN : (sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] as number);

/**
 * A closed-loop load generator on undici's pool: `concurrency` workers, each sending its next
 * request when the previous one has been read to the end. Cheap enough to share the machine.
 */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const pool = new Pool(options.origin, {
    connections: options.concurrency,
    pipelining: 1,
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  const headers = { 'content-type': 'application/json', ...options.headers };
  const total: number[] = [];
  const first: number[] = [];
  let errors = 0;
  const started = performance.now();
  const deadline = started + options.durationMs;
  const worker = async () => {
    for (let n = 0; performance.now() < deadline && (options.perWorker === undefined || n < options.perWorker); n++) {
      const t0 = performance.now();
      try {
        const response = await pool.request({ path: options.path, method: 'POST', headers, body: options.body });
        let firstAt = 0;
        for await (const chunk of response.body as AsyncIterable<Buffer>) {
          if (firstAt === 0 && chunk.length > 0) firstAt = performance.now();
        }
        const end = performance.now();
        if (response.statusCode !== 200) errors++;
        else {
          total.push(end - t0);
          first.push((firstAt || end) - t0);
        }
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  const sortedTotal = Float64Array.from(total).sort();
  const sortedFirst = Float64Array.from(first).sort();
  return {
    requests: total.length,
    errors,
    seconds,
    rps: total.length / seconds,
    p50: percentile(sortedTotal, 0.5),
    p99: percentile(sortedTotal, 0.99),
    ttft50: percentile(sortedFirst, 0.5),
    ttft99: percentile(sortedFirst, 0.99),
  };
}
