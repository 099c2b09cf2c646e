import { z } from 'zod';
import { GatewayConfigError, loadGatewayConfig, type ResolvedGatewayConfig } from './gateway/providers/config.ts';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const positiveInt = z.coerce.number().int().positive();

/**
 * Every environment variable ragport reads, with its default. The README's configuration
 * table is checked against the keys of this object by a test, so the two cannot drift.
 */
export const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z.url().optional(),
  DATABASE_POOL_SIZE: positiveInt.default(10),
  REDIS_URL: z.url().optional(),
  RAGPORT_ADMIN_KEY: z.string().min(32, 'RAGPORT_ADMIN_KEY must be at least 32 characters').optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TRUST_PROXY: bool.default(false),
  BODY_LIMIT_BYTES: positiveInt.default(10 * 1024 * 1024),
  RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: positiveInt.default(60),
  RATE_LIMIT_REDIS_FAILURE: z.enum(['local', 'closed']).default('local'),
  SHUTDOWN_TIMEOUT_MS: positiveInt.default(10_000),
  RAGPORT_CONFIG: z.string().min(1).optional(),
  OPENAI_API_KEY: z.string().min(1).optional(),
  OPENAI_BASE_URL: z.url().optional(),
  USAGE_FLUSH_INTERVAL_MS: positiveInt.default(1_000),
  USAGE_FLUSH_MAX_ROWS: positiveInt.default(1_000),
});

export type Env = z.infer<typeof envSchema>;

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  databasePoolSize: number;
  redisUrl: string | undefined;
  adminKey: string | undefined;
  logLevel: Env['LOG_LEVEL'];
  trustProxy: boolean;
  bodyLimitBytes: number;
  unauthenticatedPerMinute: number;
  redisFailureMode: Env['RATE_LIMIT_REDIS_FAILURE'];
  shutdownTimeoutMs: number;
  /** Providers, aliases and reliability settings from RAGPORT_CONFIG and OPENAI_*. */
  gateway: ResolvedGatewayConfig;
  usageFlushIntervalMs: number;
  usageFlushMaxRows: number;
}

export class ConfigError extends Error {}

/** Parses the environment once at start-up; a bad value stops start-up with a clear message. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const relevant = Object.fromEntries(
    Object.keys(envSchema.shape)
      .filter((name) => env[name] !== undefined && env[name] !== '')
      .map((name) => [name, env[name]]),
  );
  const parsed = envSchema.safeParse(relevant);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${problems.join('\n')}`);
  }
  const e = parsed.data;
  let gateway: ResolvedGatewayConfig;
  try {
    gateway = loadGatewayConfig({
      configPath: e.RAGPORT_CONFIG,
      openaiApiKey: e.OPENAI_API_KEY,
      openaiBaseUrl: e.OPENAI_BASE_URL,
      env,
    });
  } catch (error) {
    if (error instanceof GatewayConfigError) throw new ConfigError(`Invalid configuration:\n  ${error.message}`);
    throw error;
  }
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: e.DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    redisUrl: e.REDIS_URL,
    adminKey: e.RAGPORT_ADMIN_KEY,
    logLevel: e.LOG_LEVEL,
    trustProxy: e.TRUST_PROXY,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    unauthenticatedPerMinute: e.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE,
    redisFailureMode: e.RATE_LIMIT_REDIS_FAILURE,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    gateway,
    usageFlushIntervalMs: e.USAGE_FLUSH_INTERVAL_MS,
    usageFlushMaxRows: e.USAGE_FLUSH_MAX_ROWS,
  };
}
