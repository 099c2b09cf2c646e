import type { JobsRepository } from '../../src/ingestion/jobs.repository.ts';
import { createIngestionWorker, type IngestionWorker, type IngestionWorkerDeps } from '../../src/ingestion/worker.ts';
import { createLogger } from '../../src/logging.ts';
import { testEmbeddings } from './embeddings.ts';

/**
 * An ingestion worker of the test's own, started, over `jobs` (a repository the test may wrap):
 * the real model, small chunks, one parser process, one job at a time, silent; `options` override.
 */
export async function startTestWorker(
  jobs: JobsRepository,
  options: Partial<IngestionWorkerDeps> = {},
): Promise<IngestionWorker> {
  const worker = createIngestionWorker({
    jobs,
    embeddings: await testEmbeddings(),
    chunking: { maxTokens: 200, overlapTokens: 32 },
    parsing: { concurrency: 1, timeoutMs: 60_000, memoryMb: 1024 },
    logger: createLogger('silent'),
    concurrency: 1,
    ...options,
  });
  worker.start();
  return worker;
}
