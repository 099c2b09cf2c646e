# The trusted first process of every Python run, started by the server with the host's
# /usr/bin/python3 (python.ts). Before the sandbox chain (prlimit -> setpriv -> bwrap) runs, it:
#   - joins the run's per-slot cgroup(s), so memory and processes are bounded per run, not per
#     process (argv: --cgroup <cgroup.procs path>, repeatable);
#   - sets oom_score_adj 1000, inherited by everything the run starts: under memory pressure the
#     kernel kills the sandbox, not the server;
#   - closes every descriptor above 5 (0-2 are the pipes, 3-5 carry the seccomp filter and the
#     synthetic /etc/passwd and /etc/group): descriptors the server inherited never cross;
#   - as root, mounts the run's /tmp and /dev/shm as tmpfs with a size AND an inode cap, in a
#     mount namespace of its own (bwrap's --tmpfs has no inode cap: millions of empty files pinned
#     gigabytes of kernel memory) (argv: --tmpfs <dir> <bytes> <inodes> <uid>, repeatable);
#   - becomes a child subreaper, runs the chain as its child and reaps every process that ends up
#     with it, so a killed run leaves no zombie for the host's init. On SIGTERM (the server's
#     timeout) it kills the chain and still reaps.
# Exit status: the chain's, or 128 + the signal that killed it.
import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = 0x4000, 0x40000, 0x2, 0x4


def fail(message):
    os.write(2, f"sandbox launcher: {message}\n".encode())
    os._exit(125)


def main():
    args = sys.argv[1:]
    cgroups, mounts = [], []
    while args and args[0] != "--":
        if args[0] == "--cgroup":
            cgroups.append(args[1])
            args = args[2:]
        elif args[0] == "--tmpfs":
            mounts.append((args[1], int(args[2]), int(args[3]), int(args[4])))
            args = args[5:]
        else:
            fail(f"unknown argument {args[0]}")
    command = args[1:]
    if not command:
        fail("no command")

    for procs in cgroups:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")
    os.closerange(6, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 1 << 20)

    libc = ctypes.CDLL(None, use_errno=True)
    if mounts:
        if libc.unshare(CLONE_NEWNS) != 0:
            fail(f"unshare: {os.strerror(ctypes.get_errno())}")
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            fail(f"making / private: {os.strerror(ctypes.get_errno())}")
        for target, size, inodes, uid in mounts:
            options = f"size={size},nr_inodes={inodes},mode=0700,uid={uid},gid={uid}".encode()
            if libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
                fail(f"mounting {target}: {os.strerror(ctypes.get_errno())}")
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        fail("cannot become a subreaper")

    child = os.fork()
    if child == 0:
        try:
            os.setpgid(0, 0)
            os.execv(command[0], command)
        finally:
            os._exit(127)

    def stop(_signum, _frame):
        try:
            os.killpg(child, signal.SIGKILL)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, stop)
    status = None
    while True:
        try:
            pid, st = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == child:
            status = st
    if status is None:
        os._exit(125)
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


main()
