import { chmodSync, mkdirSync, readFileSync } from 'node:fs';
import { access, constants } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Spawner } from '../../processes/spawner.ts';
import type { RunBudget } from './budget.ts';
import { createOutputCollector, pythonLimits, type ExecutionResult, type Sandbox } from './limits.ts';

const launcher = fileURLToPath(new URL('./launcher.py', import.meta.url));

export interface PythonSandboxOptions {
  /** The interpreter, under /usr: the sandbox sees nothing else of the host. */
  python: string;
  /** Job in slot n runs as uid uidBase + n (only when the service runs as root). */
  uidBase: number;
  memoryMb: number;
  outputLimitBytes: number;
  seccompPath: string;
  budget: RunBudget;
  spawner: Spawner;
}

interface HostTools {
  bwrap: string;
  prlimit: string;
  setpriv: string;
  /** The host's Python, which runs the trusted launcher (not the sandboxed interpreter). */
  python3: string;
}

const searchDirs = ['/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin'];

/** Absolute paths of the host programs the sandbox needs: it runs with an empty environment. */
export async function findHostTools(): Promise<HostTools> {
  const find = async (name: string) => {
    for (const dir of searchDirs) {
      const path = `${dir}/${name}`;
      if (
        await access(path, constants.X_OK).then(
          () => true,
          () => false,
        )
      )
        return path;
    }
    const packages: Record<string, string> = { bwrap: 'bubblewrap', python3: 'python3-minimal' };
    throw new Error(`${name} not found (install ${packages[name] ?? 'util-linux'})`);
  };
  return {
    bwrap: await find('bwrap'),
    prlimit: await find('prlimit'),
    setpriv: await find('setpriv'),
    python3: await find('python3'),
  };
}

const runningAsRoot = () => process.getuid?.() === 0;

/**
 * Whether the launcher can mount the run's tmpfs itself (with an inode cap): root with
 * CAP_SYS_ADMIN. Root in a default container has no CAP_SYS_ADMIN; bwrap's own tmpfs is used.
 */
function canMount(): boolean {
  if (!runningAsRoot()) return false;
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    const effective = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    return effective !== undefined && (BigInt(`0x${effective}`) & (1n << 21n)) !== 0n;
  } catch {
    return false;
  }
}
const mountsTmpfs = canMount();

/** The command line: limits (prlimit), then the uid drop (setpriv), then the namespaces (bwrap). */
function commandLine(
  tools: HostTools,
  options: PythonSandboxOptions,
  uid: number,
  timeoutSeconds: number,
  mounts: { tmp: string; shm: string } | undefined,
) {
  const cpu = timeoutSeconds + pythonLimits.cpuGraceSeconds;
  const limits = [
    `--cpu=${cpu}:${cpu + 1}`,
    `--as=${options.budget.addressSpaceBytes}`,
    `--nproc=${options.budget.processes}`,
    `--stack=${pythonLimits.stackBytes}:${pythonLimits.stackHardBytes}`,
    `--fsize=${pythonLimits.fileBytes}`,
    `--nofile=${pythonLimits.openFiles}`,
    '--core=0',
    '--',
  ];
  // As root, bwrap would keep root's access to every file it can see: drop to a per-slot uid
  // first, with no groups, capabilities or way to regain privileges. Not root: already dropped.
  const drop = runningAsRoot()
    ? [
        tools.setpriv,
        `--reuid=${uid}`,
        `--regid=${uid}`,
        '--clear-groups',
        '--inh-caps=-all',
        '--bounding-set=-all',
        '--no-new-privs',
        '--',
      ]
    : [];
  const tmpfs = String(pythonLimits.tmpfsBytes);
  const sandbox = [
    tools.bwrap,
    '--unshare-all',
    '--unshare-user',
    '--disable-userns',
    '--die-with-parent',
    '--new-session',
    // Python is the namespace's pid 1, bwrap's direct child: bwrap reaps it, no orphaned zombie
    // is left for the host's init, and when it exits the kernel kills all it left behind.
    '--as-pid-1',
    '--hostname',
    'sandbox',
    '--ro-bind',
    '/usr',
    '/usr',
    ...['bin', 'sbin', 'lib', 'lib64'].flatMap((d) => ['--symlink', `usr/${d}`, `/${d}`]),
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    // As root the launcher mounts both with an inode cap too (bwrap's --tmpfs has none).
    ...(mounts ? ['--bind', mounts.shm, '/dev/shm'] : ['--size', tmpfs, '--tmpfs', '/dev/shm']),
    '--remount-ro',
    '/dev',
    ...(mounts ? ['--bind', mounts.tmp, '/tmp'] : ['--size', tmpfs, '--tmpfs', '/tmp']),
    ...['--dir', '/var', '--symlink', '../tmp', '/var/tmp'],
    ...['--ro-bind-data', '4', '/etc/passwd', '--ro-bind-data', '5', '/etc/group'],
    ...['--remount-ro', '/', '--chdir', '/tmp'],
    ...['--seccomp', '3'],
    '--clearenv',
    ...['--setenv', 'PATH', '/usr/bin:/bin', '--setenv', 'HOME', '/tmp', '--setenv', 'TMPDIR', '/tmp'],
    ...['--setenv', 'LANG', 'C.UTF-8', '--setenv', 'PYTHONIOENCODING', 'utf-8'],
    // glibc gives each thread that allocates a malloc arena of its own, reserving 64 MB of the
    // run's RLIMIT_AS for it: six threads used up 256 MB while holding almost nothing. Under the
    // GIL the arenas bought nothing measurable (8 threads compressing and hashing 1 MB buffers:
    // 5.7-5.9 s of CPU with one arena, 6.2-6.6 s with the default), so every thread shares one.
    ...['--setenv', 'MALLOC_ARENA_MAX', '1'],
    '--',
    options.python,
    '-I',
    '-',
  ];
  return [tools.prlimit, ...limits, ...drop, ...sandbox];
}

/** Empty mount points for a slot's /tmp and /dev/shm (root only), reachable by the slot's uid. */
function mountPoints(uidBase: number, slot: number) {
  const base = join(tmpdir(), `ragport-sandbox-${uidBase}`, `slot-${slot}`);
  const tmp = join(base, 'tmp');
  const shm = join(base, 'shm');
  for (const dir of [tmp, shm]) mkdirSync(dir, { recursive: true });
  for (const dir of [join(tmpdir(), `ragport-sandbox-${uidBase}`), base, tmp, shm]) chmodSync(dir, 0o711);
  return { tmp, shm };
}

const signalNumbers: Record<string, number> = { SIGKILL: 9, SIGXCPU: 24, SIGXFSZ: 25, SIGSEGV: 11, SIGABRT: 6 };

/**
 * CPython in bubblewrap: every namespace unshared (no network), only /usr read-only plus
 * synthetic /etc/passwd and /etc/group, fresh size-limited tmpfs mounts as the only writable
 * places, rlimits, seccomp, and a wall clock that kills the whole process group.
 */
export function createPythonSandbox(tools: HostTools, options: PythonSandboxOptions): Sandbox {
  return {
    async run(job) {
      const started = performance.now();
      const uid = options.uidBase + job.slot;
      const mounts = mountsTmpfs ? mountPoints(options.uidBase, job.slot) : undefined;
      const chain = commandLine(tools, options, uid, Math.ceil(job.timeoutMs / 1000), mounts);
      const launch = [
        ...options.budget.cgroupProcs(job.slot).flatMap((procs) => ['--cgroup', procs]),
        ...(mounts
          ? [mounts.tmp, mounts.shm].flatMap((dir) => [
              '--tmpfs',
              dir,
              String(pythonLimits.tmpfsBytes),
              String(pythonLimits.tmpfsInodes),
              String(uid),
            ])
          : []),
      ];
      // The host's Python runs the trusted launcher (launcher.py), which starts the chain; the
      // spawner forks it, so this process's event loop never waits on a fork (processes/spawner.ts).
      const child = options.spawner.spawn({
        command: tools.python3,
        args: ['-I', '-S', launcher, ...launch, '--', ...chain],
        env: {}, // bwrap's own environment is readable from inside as /proc/1/environ
        cwd: '/',
        detached: true, // its own process group
        stdio: 6,
        outputLimit: options.outputLimitBytes,
        files: { 3: options.seccompPath },
        inputs: {
          0: job.code,
          4: `root:x:0:0::/:/usr/sbin/nologin\nsandbox:x:${uid}:${uid}::/tmp:/usr/sbin/nologin\n`,
          5: `root:x:0:\nsandbox:x:${uid}:\n`,
        },
      });
      // The launcher kills the chain and reaps every process of the run; should it not be gone
      // 2 s later, its group is killed (by the spawner, only while the launcher has not exited).
      let stopping = false;
      const killGroup = () => {
        if (!child.alive || stopping) return;
        stopping = true;
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL', { group: true }), 2_000).unref();
      };
      const output = createOutputCollector(options.outputLimitBytes, killGroup);
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup();
      }, job.timeoutMs);
      job.signal.addEventListener('abort', killGroup, { once: true });
      child.on('output', (data) => output.write(Buffer.from(data.buffer, data.byteOffset, data.byteLength)));
      const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: string }>(
        (resolve) => child.once('exit', (code, signal, error) => resolve({ code, signal, error })),
      );
      clearTimeout(timer);
      job.signal.removeEventListener('abort', killGroup);
      if (exit.error !== undefined) throw new Error(`the sandbox could not start: ${exit.error}`);
      return {
        output: output.text(),
        exit_code: exit.code ?? 128 + (signalNumbers[exit.signal ?? ''] ?? 9),
        timed_out: timedOut,
        duration_ms: Math.round(performance.now() - started),
        truncated: output.truncated,
      } satisfies ExecutionResult;
    },
  };
}
