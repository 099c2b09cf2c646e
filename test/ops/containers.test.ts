import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { envSchema, loadConfig } from '../../src/config.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

const root = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');
const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
const variables = new Set(Object.keys(envSchema.shape));
/** What the npm scripts set before `node` (glibc's malloc arenas): the image sets it with ENV. */
const scriptEnv = { MALLOC_ARENA_MAX: '2' };
/** An npm script without the variables it sets before `node`. */
const command = (script: string | undefined) => (script ?? '').replace(/^(?:[A-Z_]+=\S+ )+/, '');

interface Instruction {
  keyword: string;
  args: string;
}

/** Dockerfile instructions by stage: continuation lines joined, comments and parser directives dropped. */
function parseDockerfile(text: string): { from: string; name: string | undefined; instructions: Instruction[] }[] {
  const logical = text
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
  const stages: ReturnType<typeof parseDockerfile> = [];
  for (const line of logical) {
    const [, keyword = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    if (keyword.toUpperCase() === 'FROM') {
      const [, image = '', name] = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args) ?? [];
      stages.push({ from: image, name, instructions: [] });
    } else {
      stages.at(-1)?.instructions.push({ keyword: keyword.toUpperCase(), args });
    }
  }
  return stages;
}

/** `KEY=value KEY2="v"` pairs of an ENV instruction. */
const envPairs = (args: string): Record<string, string> =>
  Object.fromEntries(
    [...args.matchAll(/([A-Z0-9_]+)=("[^"]*"|\S+)/g)].map((m) => [m[1] ?? '', (m[2] ?? '').replace(/"/g, '')]),
  );

/** Compose's `${VAR:?message}` and `${VAR:-default}` as an operator would fill them in. */
const substitute = (value: string) =>
  value
    .replace(/\$\{([A-Z0-9_]+):\?[^}]*\}/g, (_m, name: string) =>
      name === 'RAGPORT_ADMIN_KEY' ? 'a'.repeat(40) : `value-of-${name}`,
    )
    .replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1');

const durationMs = (value: string) => {
  const match = /^(\d+)(ms|s|m)$/.exec(value);
  if (!match) throw new Error(`unsupported duration ${value}`);
  return Number(match[1]) * { ms: 1, s: 1_000, m: 60_000 }[match[2] as 'ms' | 's' | 'm'];
};

const stages = parseDockerfile(read('Dockerfile'));
const runtime = stages.at(-1)!;
const all = (keyword: string, stage = runtime) => stage.instructions.filter((i) => i.keyword === keyword);
const dockerEnv: Record<string, string> = Object.assign({}, ...all('ENV').map((i) => envPairs(i.args)));

interface Service {
  build?: string;
  image?: string;
  command?: string[];
  ports?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: Record<string, unknown>;
  healthcheck?: { test: string[] };
  stop_grace_period?: string;
}
const compose = parse(read('docker-compose.yml'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const services = compose.services;
const ragportServices = Object.entries(services).filter(([, s]) => s.build !== undefined);
const environment = (s: Service) =>
  Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, substitute(String(v))]));

describe('Dockerfile', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it('builds on Node 24: every stage, the runtime a slim image', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage.from).toMatch(/^node:24([.-]|$)/);
    expect(runtime.from).toMatch(/slim/);
  });

  it('installs production dependencies only, with the lock file, and the runtime takes them from that stage', () => {
    const installs = stages.flatMap((s) => all('RUN', s)).filter((i) => /\bnpm (ci|install|i)\b/.test(i.args));
    expect(installs.length).toBeGreaterThan(0);
    for (const install of installs) expect(install.args).toMatch(/\bnpm ci\b.*--omit=dev/);
    const fromStage = all('COPY').find((i) => /--from=\S+ \S*node_modules/.test(i.args));
    const stageName = /--from=(\S+)/.exec(fromStage?.args ?? '')?.[1];
    expect(stages.some((s) => s.name === stageName && all('RUN', s).some((i) => /npm ci/.test(i.args)))).toBe(true);
  });

  it('copies only files that exist', () => {
    for (const copy of stages.flatMap((s) => all('COPY', s)).filter((i) => !i.args.includes('--from'))) {
      const sources = copy.args.split(/\s+/).slice(0, -1);
      for (const source of sources) expect(existsSync(path.join(root, source)), source).toBe(true);
    }
  });

  it('runs as a non-root user by default', () => {
    const user = all('USER').at(-1)?.args;
    expect(user).toBeDefined();
    expect(['root', '0']).not.toContain(user?.split(':')[0]);
  });

  it('sets only variables the configuration reads, and exposes the port it sets', () => {
    for (const name of Object.keys(dockerEnv)) if (!(name in scriptEnv)) expect(variables, name).toContain(name);
    const port = dockerEnv.PORT ?? String(loadConfig({}).port);
    expect(all('EXPOSE').map((i) => i.args)).toContain(port);
  });

  it('starts the server the way npm start does', () => {
    const cmd = JSON.parse(all('CMD').at(-1)?.args ?? '[]') as string[];
    expect(cmd.join(' ')).toBe(command(pkg.scripts.start));
    expect(dockerEnv).toMatchObject(scriptEnv);
    expect(existsSync(path.join(root, cmd.at(-1) ?? ''))).toBe(true);
  });

  it('health-checks a route that exists and answers 200, on the configured port', async () => {
    const check = all('HEALTHCHECK').at(-1)?.args ?? '';
    const [, port, route] = /process\.env\.PORT\|\|(\d+)\)\+'(\/[a-z]+)'/.exec(check) ?? [];
    expect(port).toBe(String(loadConfig({}).port));
    expect(route).toBeDefined();
    expect((await fetch(`${t.url}${route}`)).status).toBe(200);
  });
});

describe('docker-compose.yml', () => {
  it('has the API, a worker, PostgreSQL with pgvector and Redis', () => {
    expect(Object.keys(services).sort()).toEqual(['postgres', 'ragport', 'redis', 'worker']);
    expect(services.postgres?.image).toMatch(/^pgvector\/pgvector:/);
    expect(services.redis?.image).toMatch(/^redis:/);
    expect(ragportServices.map(([name]) => name).sort()).toEqual(['ragport', 'worker']);
  });

  it('sets only variables the configuration reads, with values it accepts', () => {
    for (const [name, service] of ragportServices) {
      for (const variable of Object.keys(service.environment ?? {}))
        expect(variables, `${name}: ${variable}`).toContain(variable);
      expect(() => loadConfig(environment(service)), name).not.toThrow();
    }
  });

  it('publishes the API on the port it listens on', () => {
    const ragport = services.ragport as Service;
    const port = loadConfig(environment(ragport)).port;
    expect(ragport.ports?.map((p) => p.split(':').at(-1))).toEqual([String(port)]);
    expect(String(port)).toBe(dockerEnv.PORT);
  });

  it('points both ragport services at the postgres and redis services, with their credentials', () => {
    const pg = services.postgres?.environment ?? {};
    for (const [, service] of ragportServices) {
      const config = loadConfig(environment(service));
      const db = new URL(config.databaseUrl ?? '');
      expect([db.hostname, db.username, db.password, db.pathname]).toEqual([
        'postgres',
        pg.POSTGRES_USER,
        pg.POSTGRES_PASSWORD,
        `/${pg.POSTGRES_DB}`,
      ]);
      expect(new URL(config.redisUrl ?? '').hostname).toBe('redis');
      for (const dependency of Object.keys(service.depends_on ?? {}))
        expect(Object.keys(services)).toContain(dependency);
    }
  });

  it('runs the API so the Python sandbox works: root for the per-run uid drop, the options bwrap needs, an init', () => {
    const api = compose.services.ragport as { user?: string; security_opt?: string[]; init?: boolean };
    expect(api.user).toBe('0');
    expect(api.init).toBe(true);
    expect(api.security_opt).toEqual(
      expect.arrayContaining(['seccomp=unconfined', 'apparmor=unconfined', 'systempaths=unconfined']),
    );
    const worker = compose.services.worker as { user?: string; security_opt?: string[] };
    expect(worker.user).toBeUndefined();
    expect(worker.security_opt).toBeUndefined();
  });

  it('runs ingestion in the worker (npm run worker), none in the API', () => {
    const worker = services.worker as Service;
    expect(worker.command?.join(' ')).toBe(command(pkg.scripts.worker));
    expect(existsSync(path.join(root, worker.command?.at(-1) ?? ''))).toBe(true);
    expect(loadConfig(environment(worker)).ingestionConcurrency).toBeGreaterThan(0);
    expect(loadConfig(environment(services.ragport as Service)).ingestionConcurrency).toBe(0);
  });

  it("health-checks the worker on its METRICS_PORT's /healthz", () => {
    const worker = services.worker as Service;
    const test = worker.healthcheck?.test.join(' ') ?? '';
    const [, port, route] = /127\.0\.0\.1:(\d+)(\/[a-z]+)/.exec(test) ?? [];
    expect(Number(port)).toBe(loadConfig(environment(worker)).metrics.port);
    expect(route).toBe('/healthz');
  });

  it('gives each ragport container longer than SHUTDOWN_TIMEOUT_MS to stop before SIGKILL', () => {
    for (const [name, service] of ragportServices) {
      const timeout = loadConfig(environment(service)).shutdownTimeoutMs;
      expect(durationMs(service.stop_grace_period ?? '10s'), name).toBeGreaterThan(timeout);
    }
  });

  it('declares every named volume it mounts', () => {
    for (const service of Object.values(services)) {
      for (const volume of service.volumes ?? []) {
        const source = volume.split(':')[0] ?? '';
        if (!source.startsWith('.') && !source.startsWith('/')) expect(Object.keys(compose.volumes)).toContain(source);
      }
    }
  });
});
