import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

const providerName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'provider names are 1-64 characters of [A-Za-z0-9_.-]');
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name');
const ms = z.number().int().positive();

/** One OpenAI-compatible upstream. Its API key is named by environment variable, never written here. */
export const providerConfigSchema = z
  .object({
    name: providerName,
    base_url: z.url(),
    api_key_env: envName.optional(),
    /** Chat models served; absent means: discover them from the upstream's /models. */
    models: z.array(z.string().min(1)).optional(),
    embedding_models: z.array(z.string().min(1)).optional(),
    /** Rerank models served at {base_url}/rerank; absent: discovered models with `rerank` in their id. */
    rerank_models: z.array(z.string().min(1)).optional(),
    /** Lower is tried first; equal priorities share traffic by weight. */
    priority: z.number().int().default(0),
    weight: z.number().positive().default(1),
    timeout_ms: ms.default(60_000),
    connect_timeout_ms: ms.default(5_000),
    max_retries: z.number().int().min(0).max(10).optional(),
    embedding_batch_size: z.number().int().positive().default(2048),
    models_cache_ttl_ms: ms.default(600_000),
    max_connections: z.number().int().positive().default(512),
  })
  .strict();

export const gatewayConfigSchema = z
  .object({
    providers: z.array(providerConfigSchema).default([]),
    /** alias → model name, e.g. `fast: llama-3.1-8b-instant`. */
    aliases: z.record(z.string().min(1), z.string().min(1)).default({}),
    /** model (or alias) → its context window in tokens, for chatbots' prompt budget. */
    context_windows: z.record(z.string().min(1), z.number().int().min(256).max(100_000_000)).default({}),
    retry: z
      .object({
        max_retries: z.number().int().min(0).max(10).default(2),
        base_delay_ms: z.number().int().min(0).default(200),
        max_delay_ms: z.number().int().min(0).default(5_000),
      })
      .strict()
      .prefault({}),
    circuit_breaker: z
      .object({
        failure_threshold: z.number().int().positive().default(5),
        cooldown_ms: ms.default(30_000),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .superRefine((config, ctx) => {
    const seen = new Set<string>();
    for (const [i, p] of config.providers.entries()) {
      if (seen.has(p.name)) ctx.addIssue({ code: 'custom', path: ['providers', i, 'name'], message: 'duplicate name' });
      seen.add(p.name);
    }
  });

export type ProviderConfig = z.infer<typeof providerConfigSchema>;
export type GatewayConfig = z.infer<typeof gatewayConfigSchema>;
export type GatewayConfigInput = z.input<typeof gatewayConfigSchema>;

/**
 * A provider ready to use. Its key, read from the environment, is behind a function so that no
 * serialisation (logs, JSON) of the configuration can ever carry it.
 */
export interface ResolvedProvider extends ProviderConfig {
  apiKey: () => string | undefined;
}

export interface ResolvedGatewayConfig extends Omit<GatewayConfig, 'providers'> {
  providers: ResolvedProvider[];
}

export class GatewayConfigError extends Error {}

function problems(error: z.ZodError): string {
  return error.issues.map((i) => `  ${i.path.join('.') || '(root)'}: ${i.message}`).join('\n');
}

export interface GatewaySources {
  /** Path of the RAGPORT_CONFIG file (YAML or JSON), if any. */
  configPath: string | undefined;
  openaiApiKey: string | undefined;
  openaiBaseUrl: string | undefined;
  env: NodeJS.ProcessEnv;
}

/** Parses the configuration file and the environment once, at start-up; any problem stops it. */
export function loadGatewayConfig(sources: GatewaySources): ResolvedGatewayConfig {
  let raw: unknown = {};
  if (sources.configPath !== undefined) {
    let text: string;
    try {
      text = readFileSync(sources.configPath, 'utf8');
    } catch (error) {
      throw new GatewayConfigError(`RAGPORT_CONFIG: cannot read ${sources.configPath}: ${(error as Error).message}`);
    }
    try {
      raw = sources.configPath.endsWith('.json') ? JSON.parse(text) : (parseYaml(text) ?? {});
    } catch (error) {
      throw new GatewayConfigError(`RAGPORT_CONFIG: ${sources.configPath} is not valid: ${(error as Error).message}`);
    }
  }
  const parsed = gatewayConfigSchema.safeParse(raw);
  if (!parsed.success) {
    throw new GatewayConfigError(`RAGPORT_CONFIG: invalid ${sources.configPath ?? ''}:\n${problems(parsed.error)}`);
  }
  const config = parsed.data;
  const providers: ResolvedProvider[] = config.providers.map((p) => {
    const apiKey = p.api_key_env === undefined ? undefined : sources.env[p.api_key_env];
    if (p.api_key_env !== undefined && (apiKey === undefined || apiKey === '')) {
      throw new GatewayConfigError(
        `RAGPORT_CONFIG: provider ${p.name}: environment variable ${p.api_key_env} is not set`,
      );
    }
    return { ...p, apiKey: () => apiKey };
  });
  // A base URL alone is a server that needs no key (Ollama, a local vLLM): requests go without one.
  const fromEnvironment = sources.openaiApiKey !== undefined || sources.openaiBaseUrl !== undefined;
  if (fromEnvironment && !providers.some((p) => p.name === 'openai')) {
    providers.push({
      ...providerConfigSchema.parse({
        name: 'openai',
        base_url: sources.openaiBaseUrl ?? 'https://api.openai.com/v1',
      }),
      apiKey: () => sources.openaiApiKey,
    });
  }
  return { ...config, providers };
}

function withoutKey<T extends { apiKey?: string }>(provider: T): Omit<T, 'apiKey'> {
  const copy: Partial<T> = { ...provider };
  delete copy.apiKey;
  return copy as Omit<T, 'apiKey'>;
}

/** Builds a resolved configuration in code (tests, benchmarks): same defaults as the file. */
export function gatewayConfigFrom(
  input: Omit<GatewayConfigInput, 'providers'> & {
    providers: (z.input<typeof providerConfigSchema> & { apiKey?: string })[];
  },
): ResolvedGatewayConfig {
  const { providers, ...rest } = input;
  const config = gatewayConfigSchema.parse({ ...rest, providers: providers.map(withoutKey) });
  return {
    ...config,
    providers: config.providers.map((p, i) => {
      const apiKey = providers[i]?.apiKey;
      return { ...p, apiKey: () => apiKey };
    }),
  };
}
