import { isIP } from 'node:net';
import { z } from 'zod';
import { GatewayConfigError, loadGatewayConfig, type ResolvedGatewayConfig } from './gateway/providers/config.ts';
import { parseCorsOrigins, type CorsOrigins } from './http/cors.ts';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const positiveInt = z.coerce.number().int().positive();

const proxyNames = new Set(['loopback', 'linklocal', 'uniquelocal']);
const isProxyAddress = (entry: string) => {
  if (proxyNames.has(entry)) return true;
  const [address = '', prefix, ...rest] = entry.split('/');
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d+$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128));
};

/**
 * Whose `X-Forwarded-For` to believe: `true` the nearest proxy's alone (the address it appended;
 * believing the whole header let a client put any address first and escape the per-address
 * limit), a number that many proxies, or their addresses and CIDR ranges.
 */
const trustProxy = z.string().transform((value, ctx): boolean | number | string[] => {
  const v = value.trim().toLowerCase();
  if (['false', '0', 'no'].includes(v)) return false;
  if (['true', 'yes'].includes(v)) return true;
  if (/^\d+$/.test(v) && Number(v) <= 64) return Number(v);
  const entries = v.split(',').map((entry) => entry.trim());
  if (entries.every(isProxyAddress)) return entries;
  ctx.addIssue({
    code: 'custom',
    message: 'must be true, false, a number of proxies (1–64), or proxy addresses and CIDR ranges separated by commas',
  });
  return z.NEVER;
});

/** A configured fusion weight: 0, or from 1e-6 to 10 (as a request's, rag-search.tool.ts). */
const fusionWeightVar = z.coerce
  .number()
  .min(0)
  .max(10)
  .refine((w) => w === 0 || w >= 1e-6, 'a weight is 0 or at least 1e-6')
  .optional();

/** Fusion weights when none are configured, chosen per method on SciFact (README, Retrieval). */
const DEFAULT_FUSION_WEIGHTS = {
  score: { dense: 0.625, keyword: 0.375 },
  rrf: { dense: 1, keyword: 1 },
} as const;

/**
 * Every environment variable ragport reads, with its default. The README's configuration
 * table is checked against the keys of this object by a test, so the two cannot drift.
 */
export const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  LISTEN_ACCEPTORS: z.coerce.number().int().min(1).max(256).default(64),
  LISTEN_BACKLOG: z.coerce.number().int().min(1).max(65_535).default(4096),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/, error: 'must be a postgres:// or postgresql:// URL' }).optional(),
  DATABASE_POOL_SIZE: positiveInt.max(1_000).default(10),
  DATA_DIR_MIN_FREE_MB: z.coerce.number().int().min(0).max(1_000_000).default(128),
  REDIS_URL: z.url({ protocol: /^rediss?$/, error: 'must be a redis:// or rediss:// URL' }).optional(),
  RAGPORT_ADMIN_KEY: z.string().min(32, 'RAGPORT_ADMIN_KEY must be at least 32 characters').optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TRUST_PROXY: trustProxy.default(false),
  BODY_LIMIT_BYTES: positiveInt.default(10 * 1024 * 1024),
  // Timers take at most 2^31 - 1 ms; beyond it Node fires them at once.
  BODY_IDLE_TIMEOUT_MS: positiveInt.max(3_600_000).default(60_000),
  CORS_ORIGINS: z.string().optional(),
  RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: positiveInt.default(60),
  AUTH_CACHE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(30_000),
  RATE_LIMIT_REDIS_FAILURE: z.enum(['local', 'closed']).default('local'),
  SHUTDOWN_TIMEOUT_MS: positiveInt.max(3_600_000).default(10_000),
  METRICS_TOKEN: z.string().min(16, 'METRICS_TOKEN must be at least 16 characters').optional(),
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  MODELS_DIR: z.string().min(1).optional(),
  EMBEDDING_MODEL: z.string().min(1).default('sentence-transformers/all-MiniLM-L6-v2'),
  EMBEDDING_DTYPE: z.enum(['q8', 'fp32']).default('q8'),
  EMBEDDING_THREADS: positiveInt.max(256).optional(),
  UPLOAD_LIMIT_BYTES: positiveInt.default(50 * 1024 * 1024),
  PARSE_MAX_CHARS: z.coerce.number().int().min(1_000).max(100_000_000).default(10_000_000),
  CHUNK_TOKENS: z.coerce.number().int().min(16).max(8192).default(200),
  CHUNK_OVERLAP_TOKENS: z.coerce.number().int().min(0).max(4096).default(32),
  INGESTION_CONCURRENCY: z.coerce.number().int().min(0).max(64).default(4),
  INGESTION_LEASE_MS: z.coerce.number().int().min(500).max(3_600_000).default(30_000),
  WEBHOOK_SIGNING_KEY: z.string().min(32, 'WEBHOOK_SIGNING_KEY must be at least 32 characters').optional(),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: bool.default(false),
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  WEBHOOK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(20).default(8),
  WEBHOOK_RETRY_BASE_MS: z.coerce.number().int().min(10).max(3_600_000).default(10_000),
  INGESTION_EMBED_BATCH: z.coerce.number().int().min(1).max(1024).default(32),
  OCR_LANGUAGES: z
    .string()
    .regex(/^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$/, 'Tesseract languages joined by +, e.g. eng or eng+deu')
    .default('eng'),
  OCR_MAX_PAGES: z.coerce.number().int().min(0).max(10_000).default(100),
  OCR_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(3_600_000).default(300_000),
  PARSE_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  PARSE_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(120_000),
  PARSE_MEMORY_MB: z.coerce.number().int().min(128).max(65_536).default(1024),
  HNSW_M: z.coerce.number().int().min(2).max(100).default(16),
  HNSW_EF_CONSTRUCTION: z.coerce.number().int().min(4).max(1000).default(128),
  HNSW_EF_SEARCH: z.union([z.literal('auto'), z.coerce.number().int().min(10).max(1000)]).default('auto'),
  RETRIEVAL_FUSION: z.enum(['score', 'rrf']).default('score'),
  RETRIEVAL_RRF_K: z.coerce.number().min(1).max(1000).default(60),
  RETRIEVAL_DENSE_WEIGHT: fusionWeightVar,
  RETRIEVAL_KEYWORD_WEIGHT: fusionWeightVar,
  BM25_K1: z.coerce.number().min(0).max(10).default(0.9),
  BM25_B: z.coerce.number().min(0).max(1).default(0.4),
  BM25_TERM_POSTINGS: z.coerce.number().int().min(0).default(500),
  RETRIEVAL_EXACT_BELOW: z.coerce.number().int().min(0).default(10_000),
  RETRIEVAL_CANDIDATES: z.coerce.number().int().min(1).max(1000).default(50),
  BRAVE_SEARCH_API_KEY: z.string().min(1).optional(),
  BRAVE_SEARCH_BASE_URL: z.url().default('https://api.search.brave.com'),
  SEARXNG_URL: z.url().optional(),
  TAVILY_API_KEY: z.string().min(1).optional(),
  TAVILY_BASE_URL: z.url().default('https://api.tavily.com'),
  WEB_SEARCH_PROVIDER: z.enum(['brave', 'searxng', 'tavily']).optional(),
  WEB_SEARCH_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  WEB_SEARCH_CACHE_TTL_SECONDS: z.coerce.number().int().min(0).max(86_400).default(600),
  CODE_EXECUTION_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  CODE_EXECUTION_QUEUE_SIZE: z.coerce.number().int().min(0).max(10_000).default(16),
  CODE_EXECUTION_JS_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  CODE_EXECUTION_PER_KEY_RUNNING: z.coerce.number().int().min(1).max(64).default(1),
  CODE_EXECUTION_PER_KEY_QUEUE: z.coerce.number().int().min(0).max(10_000).default(4),
  CODE_EXECUTION_MEMORY_MB: z.coerce.number().int().min(32).max(16_384).default(256),
  CODE_EXECUTION_OUTPUT_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(16 * 1024 * 1024)
    .default(64 * 1024),
  CODE_EXECUTION_PYTHON: z.string().startsWith('/usr/').default('/usr/bin/python3'),
  CODE_EXECUTION_SANDBOX_UID_BASE: z.coerce
    .number()
    .int()
    .min(1000)
    .max(2 ** 31 - 100_000)
    .default(61_000),
  RAGPORT_CONFIG: z.string().min(1).optional(),
  OPENAI_API_KEY: z.string().min(1).optional(),
  OPENAI_BASE_URL: z.url().optional(),
  USAGE_FLUSH_INTERVAL_MS: positiveInt.max(3_600_000).default(1_000),
  USAGE_FLUSH_MAX_ROWS: positiveInt.max(1_000_000).default(1_000),
  CHATBOT_CONTEXT_WINDOW: z.coerce.number().int().min(256).max(100_000_000).default(8_192),
});

export type Env = z.infer<typeof envSchema>;

/** Makes each of `fields` optional in the inferred type: a setting that may be absent. */
const mayBeAbsent = <T extends object>(fields: T): Partial<T> => fields;

/**
 * The environment read into the settings the code uses, grouped by the module that uses them.
 * This mapping is the only description of `Config`: its type is inferred from it. `env` is the
 * whole environment, for the API keys the RAGPORT_CONFIG file names by variable.
 */
const configSchema = (env: NodeJS.ProcessEnv) =>
  envSchema.transform((e, ctx) => {
    const chosen = e.WEB_SEARCH_PROVIDER;
    const configured = { brave: e.BRAVE_SEARCH_API_KEY, searxng: e.SEARXNG_URL, tavily: e.TAVILY_API_KEY };
    if (e.METRICS_PORT !== undefined && e.METRICS_PORT !== 0 && e.METRICS_PORT === e.PORT) {
      ctx.addIssue({
        code: 'custom',
        path: ['METRICS_PORT'],
        message: `is PORT (${e.PORT}): metrics get a port of their own, or leave it unset to serve /metrics on PORT`,
      });
      return z.NEVER;
    }
    if (chosen && !configured[chosen]) {
      ctx.addIssue({
        code: 'custom',
        path: ['WEB_SEARCH_PROVIDER'],
        message: `${chosen} is selected but not configured`,
      });
      return z.NEVER;
    }
    let corsOrigins: CorsOrigins;
    try {
      corsOrigins = parseCorsOrigins(e.CORS_ORIGINS);
    } catch (error) {
      ctx.addIssue({ code: 'custom', path: ['CORS_ORIGINS'], message: (error as Error).message });
      return z.NEVER;
    }
    let gateway: ResolvedGatewayConfig;
    try {
      gateway = loadGatewayConfig({
        configPath: e.RAGPORT_CONFIG,
        openaiApiKey: e.OPENAI_API_KEY,
        openaiBaseUrl: e.OPENAI_BASE_URL,
        env,
      });
    } catch (error) {
      if (!(error instanceof GatewayConfigError)) throw error;
      ctx.addIssue({ code: 'custom', path: [], message: error.message });
      return z.NEVER;
    }
    return {
      port: e.PORT,
      host: e.HOST,
      /** Listening sockets on the port (SO_REUSEPORT when more than one) and each one's queue. */
      listen: { acceptors: e.LISTEN_ACCEPTORS, backlog: e.LISTEN_BACKLOG },
      dataDir: e.DATA_DIR,
      databaseUrl: e.DATABASE_URL,
      databasePoolSize: e.DATABASE_POOL_SIZE,
      dataDirMinFreeMb: e.DATA_DIR_MIN_FREE_MB,
      redisUrl: e.REDIS_URL,
      adminKey: e.RAGPORT_ADMIN_KEY,
      logLevel: e.LOG_LEVEL,
      trustProxy: e.TRUST_PROXY,
      bodyLimitBytes: e.BODY_LIMIT_BYTES,
      /** How long a request body may go without a byte arriving before it is answered 408 (`src/http/stalled-body.ts`). */
      bodyIdleMs: e.BODY_IDLE_TIMEOUT_MS,
      /** Browser origins whose scripts may call the API (`src/http/cors.ts`); off by default. */
      corsOrigins,
      unauthenticatedPerMinute: e.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE,
      /**
       * Longest an API key is served from memory without a database read. Changes made through
       * ragport apply at once regardless; this bounds only edits made to the table by hand.
       */
      authCacheTtlMs: e.AUTH_CACHE_TTL_MS,
      redisFailureMode: e.RATE_LIMIT_REDIS_FAILURE,
      shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
      /** Prometheus scrape: off without a token; on its own port (with /healthz) when `port` is set. */
      metrics: { token: e.METRICS_TOKEN, port: e.METRICS_PORT },
      modelsDir: e.MODELS_DIR,
      embeddingModel: e.EMBEDDING_MODEL,
      embeddingDtype: e.EMBEDDING_DTYPE,
      embeddingThreads: e.EMBEDDING_THREADS,
      uploadLimitBytes: e.UPLOAD_LIMIT_BYTES,
      /** Characters of text kept from one document; the rest is cut and the document says so (`warning`). */
      maxDocumentChars: e.PARSE_MAX_CHARS,
      chunking: { maxTokens: e.CHUNK_TOKENS, overlapTokens: e.CHUNK_OVERLAP_TOKENS },
      ingestionConcurrency: e.INGESTION_CONCURRENCY,
      ingestionLeaseMs: e.INGESTION_LEASE_MS,
      webhooks: {
        /** Seals endpoint signing secrets at rest; without it no endpoint can be registered. */
        signingKey: e.WEBHOOK_SIGNING_KEY,
        allowPrivateTargets: e.WEBHOOK_ALLOW_PRIVATE_TARGETS,
        timeoutMs: e.WEBHOOK_TIMEOUT_MS,
        maxAttempts: e.WEBHOOK_MAX_ATTEMPTS,
        retryBaseMs: e.WEBHOOK_RETRY_BASE_MS,
      },
      /** Chunks embedded between two progress reports (and cancellation checks) of a job. */
      ingestionEmbedBatch: e.INGESTION_EMBED_BATCH,
      /** Documents are parsed in child processes, each bounded in time and memory. */
      parsing: {
        /** Parser processes at most (never more than the worker's concurrency). */
        concurrency: e.PARSE_CONCURRENCY,
        timeoutMs: e.PARSE_TIMEOUT_MS,
        memoryMb: e.PARSE_MEMORY_MB,
        ...mayBeAbsent({
          /**
           * Tesseract for PDF pages without a text layer, on when the binary is installed; absent:
           * no OCR. Languages are traineddata names joined by `+`; `maxPages` 0 turns OCR off;
           * `timeoutMs` is for all of a document's OCR and raises the parse's own limit when OCR runs.
           */
          ocr: { languages: e.OCR_LANGUAGES, maxPages: e.OCR_MAX_PAGES, timeoutMs: e.OCR_TIMEOUT_MS },
        }),
      },
      hnsw: { m: e.HNSW_M, efConstruction: e.HNSW_EF_CONSTRUCTION },
      retrieval: {
        /** `score`: weighted sum of each leg's score over its best; `rrf`: reciprocal-rank fusion. */
        fusion: e.RETRIEVAL_FUSION,
        rrfK: e.RETRIEVAL_RRF_K,
        // Defaults measured on SciFact (bench/retrieval/scifact.ts), per fusion method.
        weights: {
          dense: e.RETRIEVAL_DENSE_WEIGHT ?? DEFAULT_FUSION_WEIGHTS[e.RETRIEVAL_FUSION].dense,
          keyword: e.RETRIEVAL_KEYWORD_WEIGHT ?? DEFAULT_FUSION_WEIGHTS[e.RETRIEVAL_FUSION].keyword,
        },
        bm25: { k1: e.BM25_K1, b: e.BM25_B, termPostings: e.BM25_TERM_POSTINGS },
        exactBelow: e.RETRIEVAL_EXACT_BELOW,
        candidates: e.RETRIEVAL_CANDIDATES,
        efSearch: e.HNSW_EF_SEARCH,
      },
      /** Providers, aliases and reliability settings from RAGPORT_CONFIG and OPENAI_*. */
      gateway,
      usageFlushIntervalMs: e.USAGE_FLUSH_INTERVAL_MS,
      usageFlushMaxRows: e.USAGE_FLUSH_MAX_ROWS,
      webSearch: {
        /** Which configured provider answers; unset: the first configured of brave, tavily, searxng. */
        provider: e.WEB_SEARCH_PROVIDER,
        brave: e.BRAVE_SEARCH_API_KEY
          ? { apiKey: e.BRAVE_SEARCH_API_KEY, baseUrl: e.BRAVE_SEARCH_BASE_URL }
          : undefined,
        searxng: e.SEARXNG_URL ? { baseUrl: e.SEARXNG_URL } : undefined,
        tavily: e.TAVILY_API_KEY ? { apiKey: e.TAVILY_API_KEY, baseUrl: e.TAVILY_BASE_URL } : undefined,
        timeoutMs: e.WEB_SEARCH_TIMEOUT_MS,
        cacheTtlMs: e.WEB_SEARCH_CACHE_TTL_SECONDS * 1000,
      },
      codeExecution: {
        /** Python runs at once (each in a slot with its own uid). */
        concurrency: e.CODE_EXECUTION_CONCURRENCY,
        /** JavaScript runs at once: a capacity of its own, so Python never starves it. */
        jsConcurrency: e.CODE_EXECUTION_JS_CONCURRENCY,
        /** Calls waiting, per language. */
        queueSize: e.CODE_EXECUTION_QUEUE_SIZE,
        /** One key's share: runs at once and calls waiting, per language. */
        perKeyRunning: e.CODE_EXECUTION_PER_KEY_RUNNING,
        perKeyQueue: e.CODE_EXECUTION_PER_KEY_QUEUE,
        memoryMb: e.CODE_EXECUTION_MEMORY_MB,
        outputLimitBytes: e.CODE_EXECUTION_OUTPUT_LIMIT_BYTES,
        /** The interpreter inside the sandbox, which sees only /usr of the host. */
        python: e.CODE_EXECUTION_PYTHON,
        /** Sandboxed jobs run as uids uidBase … uidBase + concurrency (one per slot, plus the probe). */
        uidBase: e.CODE_EXECUTION_SANDBOX_UID_BASE,
      },
      chatbots: {
        /** Context window of models that `context_windows` in RAGPORT_CONFIG does not list. */
        defaultContextWindow: e.CHATBOT_CONTEXT_WINDOW,
      },
    };
  });

export type Config = z.output<ReturnType<typeof configSchema>>;
export type WebhookConfig = Config['webhooks'];
export type ParsingConfig = Config['parsing'];
export type OcrConfig = NonNullable<ParsingConfig['ocr']>;
export type WebSearchConfig = Config['webSearch'];
export type CodeExecutionConfig = Config['codeExecution'];
export type ChatbotsConfig = Config['chatbots'];

export class ConfigError extends Error {}

/** Parses the environment once at start-up; a bad value stops start-up with a clear message. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const relevant = Object.fromEntries(
    Object.keys(envSchema.shape)
      // Unset, empty or only spaces: the default (a space read as a number is 0).
      .filter((name) => (env[name] ?? '').trim() !== '')
      .map((name) => [name, env[name]]),
  );
  const parsed = configSchema(env).safeParse(relevant);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `  ${i.path.length ? `${i.path.join('.')}: ` : ''}${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${problems.join('\n')}`);
  }
  return parsed.data;
}
