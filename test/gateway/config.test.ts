import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'ragport-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe('gateway configuration', () => {
  it('reads providers from a YAML file, keys from the named environment variables', () => {
    const config = loadConfig({
      RAGPORT_CONFIG: file(
        'gw.yaml',
        `providers:
  - name: groq
    base_url: https://api.groq.example/openai/v1
    api_key_env: GROQ_KEY
    models: [llama-3.1-8b-instant]
    timeout_ms: 20000
    priority: 1
aliases:
  fast: llama-3.1-8b-instant
retry:
  max_retries: 3
`,
      ),
      GROQ_KEY: 'gsk-secret-value',
    });
    const [groq] = config.gateway.providers;
    expect(groq).toMatchObject({ name: 'groq', models: ['llama-3.1-8b-instant'], timeout_ms: 20_000, priority: 1 });
    expect(groq?.apiKey()).toBe('gsk-secret-value');
    expect(config.gateway.aliases).toEqual({ fast: 'llama-3.1-8b-instant' });
    expect(config.gateway.retry.max_retries).toBe(3);
    // No serialisation of the configuration can carry the secret.
    expect(JSON.stringify(config)).not.toContain('gsk-secret-value');
  });

  it('reads JSON files and adds the openai provider from OPENAI_API_KEY', () => {
    const config = loadConfig({
      RAGPORT_CONFIG: file(
        'gw.json',
        JSON.stringify({ providers: [{ name: 'local', base_url: 'http://127.0.0.1:1/v1' }] }),
      ),
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: 'http://127.0.0.1:2/v1',
    });
    expect(config.gateway.providers.map((p) => [p.name, p.base_url, p.models])).toEqual([
      ['local', 'http://127.0.0.1:1/v1', undefined],
      ['openai', 'http://127.0.0.1:2/v1', undefined],
    ]);
    expect(loadConfig({ OPENAI_API_KEY: 'sk-test' }).gateway.providers[0]?.base_url).toBe('https://api.openai.com/v1');
    expect(loadConfig({}).gateway.providers).toEqual([]);
  });

  it('OPENAI_BASE_URL alone (Ollama, a local vLLM) adds the openai provider, sending no key', () => {
    const [openai, ...rest] = loadConfig({ OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1' }).gateway.providers;
    expect(rest).toEqual([]);
    expect(openai).toMatchObject({ name: 'openai', base_url: 'http://127.0.0.1:11434/v1' });
    expect(openai?.apiKey()).toBeUndefined();
  });

  it("reads models' context windows for chatbots; CHATBOT_CONTEXT_WINDOW covers the others", () => {
    const config = loadConfig({
      RAGPORT_CONFIG: file('windows.yaml', 'context_windows:\n  gpt-4o-mini: 128000\n  fast: 8192\n'),
      CHATBOT_CONTEXT_WINDOW: '32768',
    });
    expect(config.gateway.context_windows).toEqual({ 'gpt-4o-mini': 128_000, fast: 8192 });
    expect(config.chatbots.defaultContextWindow).toBe(32_768);
    expect(loadConfig({}).chatbots.defaultContextWindow).toBe(8192);
    expect(loadConfig({}).gateway.context_windows).toEqual({});
    expect(() => loadConfig({ CHATBOT_CONTEXT_WINDOW: '10' })).toThrow(/CHATBOT_CONTEXT_WINDOW/);
    expect(() => loadConfig({ RAGPORT_CONFIG: file('w2.yaml', 'context_windows:\n  m: lots\n') })).toThrow(
      /context_windows\.m/,
    );
  });

  it('a bad file stops start-up with a message saying what is wrong', () => {
    const bad =
      (text: string, env: Record<string, string> = {}) =>
      () =>
        loadConfig({ RAGPORT_CONFIG: file(`bad-${Math.random()}.yaml`, text), ...env });
    expect(bad('providers:\n  - name: x\n')).toThrow(ConfigError);
    expect(bad('providers:\n  - name: x\n')).toThrow(/providers\.0\.base_url/);
    expect(bad('providers:\n  - name: x\n    base_url: http://h/v1\n    api_key: sk-literal\n')).toThrow(/api_key/);
    expect(bad('providers:\n  - name: x\n    base_url: http://h/v1\n    api_key_env: MISSING\n')).toThrow(
      /MISSING is not set/,
    );
    expect(bad('providers: [unclosed\n')).toThrow(/not valid/);
    expect(() => loadConfig({ RAGPORT_CONFIG: path.join(dir, 'absent.yaml') })).toThrow(/cannot read/);
    expect(bad('providers:\n  - {name: a, base_url: "http://h/v1"}\n  - {name: a, base_url: "http://h/v1"}\n')).toThrow(
      /duplicate/,
    );
  });
});
