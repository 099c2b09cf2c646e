import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Per-run budgets of the Python sandbox. With cgroups (the service runs as root and the host
 * delegates the memory and pids controllers), each slot has a cgroup whose memory and process
 * limits bound the whole run, however many processes it starts. Without them, the per-process
 * rlimits are lowered so that their product fits the same memory budget.
 */
export interface RunBudget {
  /** `cgroup.procs` files a run's launcher joins, per slot; empty without cgroups. */
  cgroupProcs(slot: number): string[];
  /** rlimits per process: address space (bytes) and processes of the sandbox uid. */
  addressSpaceBytes: number;
  processes: number;
  /** How the budget is enforced, for logs and /readyz. */
  mode: 'cgroup v2' | 'cgroup v1' | 'rlimits';
}

/** Processes (and threads) of one run when a cgroup bounds it. */
export const RUN_PROCESSES = 64;
/** Without cgroups: python, bwrap and this many more processes of the run's uid. */
const FALLBACK_EXTRA_PROCESSES = 4;

const write = (file: string, value: string) => writeFileSync(file, value);

function cgroupV2(root: string, group: string, slots: number, memoryBytes: number): string[][] | undefined {
  const controllers = join(root, 'cgroup.controllers');
  if (!existsSync(controllers)) return undefined;
  const available = readFileSync(controllers, 'utf8').split(/\s+/);
  if (!available.includes('memory') || !available.includes('pids')) return undefined;
  write(join(root, 'cgroup.subtree_control'), '+memory +pids');
  const parent = join(root, group);
  mkdirSync(parent, { recursive: true });
  write(join(parent, 'cgroup.subtree_control'), '+memory +pids');
  return Array.from({ length: slots }, (_v, slot) => {
    const dir = join(parent, `slot-${slot}`);
    mkdirSync(dir, { recursive: true });
    write(join(dir, 'memory.max'), String(memoryBytes));
    if (existsSync(join(dir, 'memory.swap.max'))) write(join(dir, 'memory.swap.max'), '0');
    write(join(dir, 'pids.max'), String(RUN_PROCESSES));
    return [join(dir, 'cgroup.procs')];
  });
}

function cgroupV1(root: string, group: string, slots: number, memoryBytes: number): string[][] | undefined {
  const memory = join(root, 'memory');
  const pids = join(root, 'pids');
  if (!existsSync(join(memory, 'memory.limit_in_bytes')) || !existsSync(join(pids, 'cgroup.procs'))) return undefined;
  return Array.from({ length: slots }, (_v, slot) => {
    const mem = join(memory, group, `slot-${slot}`);
    const pid = join(pids, group, `slot-${slot}`);
    mkdirSync(mem, { recursive: true });
    mkdirSync(pid, { recursive: true });
    write(join(mem, 'memory.limit_in_bytes'), String(memoryBytes));
    // Swap counts too where the kernel accounts it, so the limit cannot be paged around.
    if (existsSync(join(mem, 'memory.memsw.limit_in_bytes'))) {
      write(join(mem, 'memory.memsw.limit_in_bytes'), String(memoryBytes));
    }
    write(join(pid, 'pids.max'), String(RUN_PROCESSES));
    return [join(mem, 'cgroup.procs'), join(pid, 'cgroup.procs')];
  });
}

export function createRunBudget(options: {
  memoryMb: number;
  /** Slots plus the start-up probe's. */
  slots: number;
  uidBase: number;
  cgroupRoot?: string;
}): RunBudget {
  const memoryBytes = options.memoryMb * 1024 * 1024;
  const root = options.cgroupRoot ?? '/sys/fs/cgroup';
  const group = `ragport-sandbox-${options.uidBase}`;
  if (process.getuid?.() === 0) {
    for (const [mode, setup] of [
      ['cgroup v2', () => cgroupV2(root, group, options.slots, memoryBytes)],
      ['cgroup v1', () => cgroupV1(root, group, options.slots, memoryBytes)],
    ] as const) {
      try {
        const procs = setup();
        if (procs) {
          return {
            mode,
            cgroupProcs: (slot) => procs[slot] ?? [],
            // Each process may still use the whole budget; the cgroup bounds their sum.
            addressSpaceBytes: memoryBytes,
            processes: RUN_PROCESSES,
          };
        }
      } catch {
        // Not delegated here (read-only cgroupfs, controllers taken): try the next way.
      }
    }
  }
  return {
    mode: 'rlimits',
    cgroupProcs: () => [],
    addressSpaceBytes: Math.floor(memoryBytes / FALLBACK_EXTRA_PROCESSES),
    processes: FALLBACK_EXTRA_PROCESSES + 2,
  };
}
