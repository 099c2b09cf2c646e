/*
 * Writes the seccomp BPF program used by ragport's Python sandbox to stdout (bwrap --seccomp FD).
 * Built by src/tools/code-execution/seccomp.ts with `cc filter.c -lseccomp`; see docs/sandbox.md.
 *
 * Default allow, explicit denies: the namespaces, uid drop and rlimits are the primary walls;
 * this filter removes the kernel interfaces that have repeatedly turned "an unprivileged process"
 * into a host compromise, and the ones that let a process escape or inspect its siblings.
 * Non-native architectures (i386 via int 0x80, x32) hit libseccomp's bad-arch action: kill.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static scmp_filter_ctx ctx;

static void check(int rc, const char *what) {
  if (rc < 0) {
    fprintf(stderr, "seccomp: %s: %d\n", what, rc);
    exit(1);
  }
}

/* Missing syscalls on this architecture or libseccomp version are not an error. */
static void deny(const char *name, int err) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) return;
  check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 0), name);
}

int main(void) {
  ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return 1;

  static const char *const denied[] = {
      "ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter",
      "io_uring_register", "perf_event_open", "keyctl", "add_key", "request_key", "unshare",
      "setns", "mount", "umount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
      "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "bpf", "userfaultfd",
      "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
      "acct", "swapon", "swapoff", "reboot", "syslog", "lookup_dcookie", "name_to_handle_at",
      "open_by_handle_at", "quotactl", "personality", "vhangup", "fanotify_init",
      NULL,
  };
  for (const char *const *name = denied; *name; name++) deny(*name, EPERM);

  /* clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to clone. */
  deny("clone3", ENOSYS);
  static const unsigned long ns_flags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,   CLONE_NEWNET,
                                           CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME};
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++)
    check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i])),
          "clone");

  /* The kernel reads ioctl's request as 32 bits: compare the low half so high bits do not evade. */
  check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFul, TIOCSTI)),
        "TIOCSTI");
  check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFul, TIOCLINUX)),
        "TIOCLINUX");

  /* Only AF_UNIX, AF_INET and AF_INET6 sockets (no netlink, packet, vsock, ...). */
  check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                         SCMP_A0(SCMP_CMP_GT, AF_INET6)),
        "socket");
  for (int family = 0; family < AF_INET6; family++) {
    if (family == AF_UNIX || family == AF_INET) continue;
    check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                           SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)family)),
          "socket");
  }
  check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
                         SCMP_A0(SCMP_CMP_NE, AF_UNIX)),
        "socketpair");

  check(seccomp_export_bpf(ctx, STDOUT_FILENO), "export");
  seccomp_release(ctx);
  return 0;
}
