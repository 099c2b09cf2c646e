import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const source = new URL('./seccomp/filter.c', import.meta.url);

/**
 * The sandbox's seccomp BPF program, built from seccomp/filter.c with the host's C compiler and
 * libseccomp and cached by the source's hash under `cacheDir`, so each start after the first
 * only reads a file. Rejects with a readable reason when the toolchain is missing.
 */
export async function ensureSeccompFilter(cacheDir: string): Promise<string> {
  const code = await readFile(source);
  const hash = createHash('sha256').update(code).digest('hex').slice(0, 16);
  const target = join(cacheDir, `seccomp-${hash}.bpf`);
  const existing = await stat(target).catch(() => undefined);
  if (existing?.isFile() && existing.size > 0) return target;

  await mkdir(cacheDir, { recursive: true, mode: 0o700 });
  await chmod(cacheDir, 0o700);
  // Concurrent starts build side by side and rename into place; the last rename wins, same bytes.
  const scratch = join(cacheDir, `build-${randomBytes(6).toString('hex')}`);
  try {
    await run('cc', ['-O2', '-o', scratch, source.pathname, '-lseccomp'], { timeout: 60_000 });
    const { stdout } = await run(scratch, [], { encoding: 'buffer', timeout: 10_000 });
    if (stdout.length === 0 || stdout.length % 8 !== 0) throw new Error('the generator wrote no BPF program');
    await writeFile(`${scratch}.bpf`, stdout, { mode: 0o644 });
    await rename(`${scratch}.bpf`, target);
    return target;
  } catch (error) {
    const stderr = (error as { stderr?: Buffer | string }).stderr?.toString().trim();
    const reason = stderr?.split('\n').slice(-1)[0] ?? (error as Error).message;
    throw new Error(`cannot build the seccomp filter (needs cc and libseccomp-dev): ${reason}`, { cause: error });
  } finally {
    await rm(scratch, { force: true });
    await rm(`${scratch}.bpf`, { force: true });
  }
}
