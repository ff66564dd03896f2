"""The launcher that confines an agent: applies a Landlock policy to itself, then execs the agent in its place.

``python -I -S confine.py --policy JSON -- PROGRAM ARGS...`` (or ``python -m openab_browser.core.agents.confine``): the
policy is what :mod:`openab_browser.core.agents.confinement` decided. It sets ``no_new_privs``, makes the folders the
policy says to make, builds the ruleset (one rule per folder that exists, opened ``O_PATH``), restricts itself and
execs PROGRAM: the agent and everything it starts run inside that domain, which nothing in it can leave.

An exec'd launcher, not a ``preexec_fn``: the pod is a threaded asyncio program, where running Python between
fork and exec can deadlock on a lock another thread held, and a ``preexec_fn`` makes Python ``fork()`` the whole
pod instead of ``vfork()``. Run as a script it imports only the standard library (no site, no openab), so it
costs a Python start-up of a few milliseconds and nothing more.

It fails closed: if the kernel refuses any step, it says which on stderr and exits 126 without running the
agent. ``--probe`` prints the kernel's Landlock ABI (0: none) and why, for the pod and ``openab doctor``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import signal
import stat
import sys
from typing import Final

# Landlock's system calls share their numbers on every architecture but alpha, mips and ia64 (asm-generic).
SYS_CREATE_RULESET: Final = 444
SYS_ADD_RULE: Final = 445
SYS_RESTRICT_SELF: Final = 446
CREATE_RULESET_VERSION: Final = 1 << 0
RULE_PATH_BENEATH: Final = 1
PR_SET_NO_NEW_PRIVS: Final = 38
PR_CAPBSET_DROP: Final = 24
PR_CAP_AMBIENT: Final = 47
PR_CAP_AMBIENT_CLEAR_ALL: Final = 4
_CAPABILITY_VERSION_3: Final = 0x20080522
# The rights a rule on a file (not a folder) may carry: execute, write, read, truncate, ioctl.
FILE_RIGHTS: Final = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
EXIT_REFUSED: Final = 126
CLONE_NEWNS: Final = 0x00020000
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWPID: Final = 0x20000000
MS_NOSUID: Final = 2
MS_NODEV: Final = 4
MS_NOEXEC: Final = 8
MS_REC: Final = 0x4000
MS_PRIVATE: Final = 1 << 18  # as a shell says "found but cannot be run"
_UNSUPPORTED_MACHINES: Final = ("alpha", "mips", "ia64")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def probe() -> tuple[int, str]:
    """The kernel's Landlock ABI and, when 0, why (the errno's words)."""
    if sys.platform != "linux":
        return 0, f"{sys.platform} is not Linux"
    if platform.machine().startswith(_UNSUPPORTED_MACHINES):
        return 0, f"{platform.machine()} numbers its system calls differently"
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    if abi < 0:
        err = ctypes.get_errno()
        why = {errno.ENOSYS: "the kernel has no Landlock system calls (too old, or a sandbox such as gVisor)",
               errno.EOPNOTSUPP: "Landlock is built in but off (add landlock to the lsm= boot parameter)",
               errno.EPERM: "a seccomp filter refuses the Landlock system calls"}.get(err, os.strerror(err))
        return 0, why
    return int(abi), ""


class Refused(Exception):
    """The kernel refused a step: the agent must not run."""


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise Refused(f"{what}: {os.strerror(err)}")
    return result


def drop_capabilities() -> None:
    """Drop every capability, for good: a pod run as root would otherwise hand them to its agents, and
    CAP_SYS_PTRACE lets a Landlocked process read the pod's ``/proc/<pid>/environ`` and ``maps`` all the same
    (measured on Linux 6.18). Emptying the bounding set first is what keeps an exec as uid 0 from getting them
    back."""
    libc = _libc()
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        # EINVAL: a capability this kernel has not; EPERM: we hold no CAP_SETPCAP, so nothing to drop here.
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset (dropping every capability)")


def restrict(policy: dict[str, object]) -> None:
    """Confine this process (and what it execs) to ``policy`` (:meth:`Policy.to_json`'s fields)."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled, scoped = int(policy["handled"]), int(policy["scoped"])  # type: ignore[call-overload]
    rules = policy["rules"]
    assert isinstance(rules, list)
    # Without it the kernel refuses restrict_self to an unprivileged process, and a setuid program run inside
    # could gain what the domain denies.
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    attr = _RulesetAttr(handled, 0, scoped)  # the network stays as it was: handled_access_net 0
    size = ctypes.sizeof(_RulesetAttr) if scoped else 16  # a kernel before ABI 6 refuses the longer struct
    ruleset = _check(libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                                  ctypes.c_uint32(0)), "landlock_create_ruleset")
    opened: list[tuple[str, int, int]] = []
    try:
        # Folders are made and opened with the launcher's own rights, before it drops its capabilities.
        for path, access, make in rules:
            if make:
                try:
                    os.makedirs(path, mode=0o700, exist_ok=True)
                except OSError:
                    continue  # a read-only HOME: the CLI meets it as it would unconfined, and nothing is allowed
            try:
                opened.append((path, access, os.open(path, os.O_PATH | os.O_CLOEXEC)))
            except (FileNotFoundError, NotADirectoryError):
                continue  # a system folder this machine has not (/lib32): nothing to allow
            except PermissionError:
                # Out of this user's reach (another user's ~/.cargo/bin on an inherited PATH, under a 0700 home):
                # the agent could not reach it either, and a rule only ever allows, so leaving it out denies nothing
                # the user has.
                continue
        drop_capabilities()
        for path, access, fd in opened:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= FILE_RIGHTS  # the kernel refuses a folder's rights on a file
            rule = _PathBeneathAttr(access, fd)
            _check(libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)), f"landlock_add_rule({path})")
        _check(libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        for _, _, fd in opened:
            os.close(fd)
        os.close(ruleset)


# -- a PID view of its own ----------------------------------------------------------------------------------


def private_pids() -> str:
    """Move this process's future children into a PID and mount namespace of their own (a user namespace too when
    we are not root, or root without CAP_SYS_ADMIN); ``""`` when done, else why not (then nothing changed)."""
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    attempts = ([CLONE_NEWNS | CLONE_NEWPID] if uid == 0 else []) + [CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID]
    why = ""
    for flags in attempts:
        if libc.unshare(flags) == 0:
            if flags & CLONE_NEWUSER:
                # Only our own ids are mapped: files of other users read as nobody's, with the same access.
                for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                    with open(f"/proc/self/{name}", "w") as f:
                        f.write(text)
            return ""
        why = os.strerror(ctypes.get_errno())
    return f"unshare: {why}"


def probe_private_pids() -> str:
    """Whether the launcher could give an agent a PID view of its own here: ``""``, else why not (tried in a child
    that exits at once, so this process is left as it was)."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        os.write(write, private_pids().encode()[:512])
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as said:
        why = said.read().decode()
    os.waitpid(child, 0)
    return why


def _mount_proc() -> None:
    """As the namespace's first process: a /proc that shows its own processes only, private to it."""
    libc = _libc()
    _check(libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "mount / private")
    _check(libc.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None),
           "mount /proc")


def _forward_signals(to: int) -> None:
    # The pod stops an agent by its process group, which reaches every process here; a signal sent to the launcher
    # alone (the pid the pod knows) goes on to the agent too.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, lambda number, frame: _kill(to, number))


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _wait_for(pid: int, *, reap_all: bool) -> int:
    """``pid``'s wait status; as a namespace's first process, every orphan is reaped on the way."""
    while True:
        done, status = os.waitpid(-1 if reap_all else pid, 0)
        if done == pid:
            return status


def _mirror(status: int) -> int:
    """End as the agent ended: the same exit code, or killed by the same signal (the pod reports which)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig  # a signal a process cannot take from itself (never, outside a namespace's first process)
    return os.WEXITSTATUS(status)


def _run_agent(policy: dict[str, object], program: list[str]) -> int:
    try:
        restrict(policy)
    except (Refused, OSError, ValueError, KeyError) as exc:
        print(f"openab: the agent was not started: it could not be confined ({exc}). Run the pod with "
              "--unconfined-agents to run agents unconfined, or see docs/deploy.md", file=sys.stderr)
        return EXIT_REFUSED
    try:
        os.execv(program[0], program)  # noqa: S606 (the agent's own command, resolved by the pod: no shell)
    except OSError as exc:
        print(f"openab: cannot run {program[0]}: {exc.strerror}", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_REFUSED  # not reached: execv returns only by raising


def _in_private_pids(policy: dict[str, object], program: list[str]) -> int:
    """The launcher stays (the pid the pod knows) and waits; its child is the namespace's first process, which
    mounts its /proc, starts the agent (never itself the first process: that one drops signals it has no handler
    for) and reaps what the agent orphans; when the agent ends, the kernel kills what is left in the namespace."""
    read, write = os.pipe()
    first = os.fork()
    if first == 0:
        os.close(read)
        try:
            _mount_proc()
        except Refused as exc:
            print(f"openab: the agent sees every process's pid: {exc}", file=sys.stderr)
        agent = os.fork()
        if agent == 0:
            os.close(write)
            os._exit(_run_agent(policy, program))
        _forward_signals(agent)
        status = _wait_for(agent, reap_all=True)
        os.write(write, str(status).encode())  # the agent's own status, which a first process cannot mirror
        os._exit(0)
    os.close(write)
    _forward_signals(first)
    _wait_for(first, reap_all=False)
    said = os.read(read, 32)
    return _mirror(int(said)) if said else EXIT_REFUSED


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        abi, why = probe()
        print(json.dumps({"abi": abi, "why": why, "private_pids": probe_private_pids() or "yes"}))
        return 0
    if len(argv) < 4 or argv[0] != "--policy" or argv[2] != "--":
        print("usage: confine.py --policy JSON -- PROGRAM [ARGS...] | --probe", file=sys.stderr)
        return 2
    program = argv[3:]
    try:
        policy = json.loads(argv[1])
    except ValueError as exc:
        print(f"openab: the agent was not started: its policy is not JSON ({exc})", file=sys.stderr)
        return EXIT_REFUSED
    if policy.get("private_pids"):
        why = private_pids()
        if not why:
            return _in_private_pids(policy, program)
        print(f"openab: the agent sees every process's pid ({why}); its confinement holds all the same",
              file=sys.stderr)
    return _run_agent(policy, program)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
