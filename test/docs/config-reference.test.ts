/**
 * The `RAGPORT_CONFIG` reference in docs/gateway.md against the schema: every example file there
 * loads as written, and together they name every field the schema knows, so a field added to the
 * code without its line in the docs fails here (as the README's variables table does in
 * test/config).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { gatewayConfigSchema, providerConfigSchema } from '../../src/gateway/providers/config.ts';

const page = readFileSync(new URL('../../docs/gateway.md', import.meta.url), 'utf8');
const files = [...page.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] as string);
const dir = mkdtempSync(path.join(tmpdir(), 'ragport-config-docs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The keys a YAML text names (`key:` at the start of a line or after `- `), comments aside. */
const namedKeys = (yaml: string) =>
  new Set([...yaml.matchAll(/^[\s-]*([A-Za-z_][A-Za-z0-9_]*):/gm)].map((m) => m[1] as string));

describe('the RAGPORT_CONFIG reference', () => {
  it('has example files, and each loads as written', () => {
    expect(files.length).toBeGreaterThanOrEqual(2);
    files.forEach((text, i) => {
      const file = path.join(dir, `example-${i}.yaml`);
      writeFileSync(file, text);
      // The keys the examples name by variable are set, as a deployment would set them.
      const config = loadConfig({ RAGPORT_CONFIG: file, GROQ_API_KEY: 'gsk-docs', JINA_API_KEY: 'jina-docs' });
      expect(config.gateway.providers.length).toBeGreaterThan(0);
    });
  });

  it('names every field of the schema', () => {
    const named = new Set(files.flatMap((text) => [...namedKeys(text)]));
    const defaults = gatewayConfigSchema.parse({}) as Record<string, unknown>;
    const fields = [
      ...Object.keys(providerConfigSchema.shape),
      ...Object.keys(defaults),
      ...Object.keys(defaults.retry as object),
      ...Object.keys(defaults.circuit_breaker as object),
    ];
    expect(fields.filter((f) => !named.has(f))).toEqual([]);
  });
});
