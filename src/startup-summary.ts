import path from 'node:path';
import type { Config } from './config.ts';
import { modelSource } from './embeddings/load.ts';
import type { EmbeddingRegistry } from './embeddings/registry.ts';

export interface ToolState {
  name: string;
  enabled: boolean;
  /** Why it is off, when it is. */
  reason: string | undefined;
}

export interface StartupFacts {
  config: Config;
  database: 'pglite' | 'postgres';
  embeddings: EmbeddingRegistry;
  tools: readonly ToolState[];
  /** Node's own options, in the order it applies them (the last of a flag wins). */
  nodeOptions?: readonly string[];
  /** glibc's version and `MALLOC_ARENA_MAX`, or null on another C library (default: this process's). */
  glibc?: { version: string; arenaMax: string | undefined } | null;
}

const SEMI_SPACE = /^--max[-_]semi[-_]space[-_]size=(\d+)$/;

/**
 * Whether V8's young generation is bounded. Without the flag V8 sizes it from the host's memory
 * (128 MB of new space on a 24 GB host) and RSS under load grows with it (docs/operations.md).
 */
function memoryLine(nodeOptions: readonly string[]): string {
  const bound = nodeOptions.map((o) => SEMI_SPACE.exec(o)?.[1]).findLast((v) => v !== undefined);
  return bound !== undefined
    ? `memory: young generation bounded (--max-semi-space-size=${bound})`
    : 'memory: young generation sized by V8 from the host; start with `npm start`, or pass --max-semi-space-size=16 to node, to bound it';
}

/**
 * glibc keeps what each thread frees in arenas of its own, up to eight per core; the server runs
 * the database, the model lanes and ONNX Runtime on threads (docs/operations.md, Sizing). glibc
 * reads MALLOC_ARENA_MAX once, before any of this code, so the summary can only report it.
 */
function allocatorLine(glibc: StartupFacts['glibc']): string[] {
  if (!glibc) return [];
  return [
    glibc.arenaMax !== undefined && glibc.arenaMax !== ''
      ? `allocator: glibc ${glibc.version}, arenas bounded (MALLOC_ARENA_MAX=${glibc.arenaMax})`
      : `allocator: glibc ${glibc.version}, arenas per thread (up to 8 per core); start with \`npm start\`, or set MALLOC_ARENA_MAX=2 in the environment, to bound them`,
  ];
}

/** glibc's version when Node runs on it (Node's diagnostic report names it), else null. */
function processGlibc(): StartupFacts['glibc'] {
  // Without the network section: it would name every open socket's peer, by DNS if need be.
  const reporter = process.report as typeof process.report & { excludeNetwork: boolean };
  const excludeNetwork = reporter.excludeNetwork;
  reporter.excludeNetwork = true;
  const report = reporter.getReport() as { header?: { glibcVersionRuntime?: string } };
  reporter.excludeNetwork = excludeNetwork;
  const version = report.header?.glibcVersionRuntime;
  return version === undefined ? null : { version, arenaMax: process.env.MALLOC_ARENA_MAX };
}

/** The options Node started with, in the order it applies them: NODE_OPTIONS, then its command line's. */
const processNodeOptions = (): string[] => [
  ...(process.env.NODE_OPTIONS ?? '').split(/\s+/).filter(Boolean),
  ...process.execArgv,
];

/** A database URL without its credentials. */
function serverOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname}${parsed.port ? `:${parsed.port}` : ''}${parsed.pathname}`;
}

/**
 * What a new operator needs to know first, one line each: where the data is, whether an admin key
 * is set, the embedding model and where it came from, the chat providers and the tools, and whether
 * Node's young generation and glibc's arenas are bounded, with what to configure for whatever is off.
 */
export function startupSummary({
  config,
  database,
  embeddings,
  tools,
  nodeOptions = processNodeOptions(),
  glibc = processGlibc(),
}: StartupFacts): string[] {
  const databaseLine =
    database === 'pglite' || config.databaseUrl === undefined
      ? `database: embedded PGlite in ${path.resolve(config.dataDir, 'pg')} (this process owns DATA_DIR)`
      : `database: PostgreSQL server ${serverOf(config.databaseUrl)}`;
  const adminLine =
    config.adminKey !== undefined
      ? 'admin key: set (RAGPORT_ADMIN_KEY)'
      : 'admin key: not set; set RAGPORT_ADMIN_KEY to manage keys over the API, or create one with `npm run keys -- create` while the server is stopped';
  const models = embeddings.status();
  const modelLines = models.map(
    (m) => `embedding model: ${m.name} from ${modelSource(config)}: ${m.ok ? 'loaded' : m.detail}`,
  );
  const providers = config.gateway.providers;
  const chatLine =
    providers.length === 0
      ? 'chat providers: none configured; set OPENAI_API_KEY (and OPENAI_BASE_URL), OPENAI_BASE_URL alone for a server that needs no key, or list providers in the RAGPORT_CONFIG file'
      : `chat providers: ${providers
          .map(
            (p) =>
              `${p.name} (${p.models === undefined ? 'models listed by the provider' : `${p.models.length} models`})`,
          )
          .join(', ')}`;
  const toolLine = `tools: ${tools
    .map((t) => (t.enabled ? `${t.name} on` : `${t.name} off (${t.reason ?? 'disabled'})`))
    .join('; ')}`;
  const embedded = database === 'pglite' || config.databaseUrl === undefined;
  const ingestionLine =
    config.ingestionConcurrency > 0
      ? `ingestion: ${config.ingestionConcurrency} documents at once in this process`
      : embedded
        ? 'ingestion: off (INGESTION_CONCURRENCY=0), and the embedded database takes no `npm run worker`: uploaded documents stay pending; set INGESTION_CONCURRENCY to 1 or more'
        : 'ingestion: off in this process (INGESTION_CONCURRENCY=0); documents are processed by `npm run worker` processes';
  return [
    databaseLine,
    adminLine,
    ...modelLines,
    chatLine,
    toolLine,
    ingestionLine,
    memoryLine(nodeOptions),
    ...allocatorLine(glibc),
  ];
}
