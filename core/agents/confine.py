"""The launcher that confines an agent: applies a Landlock policy to itself, then execs the agent in its place.

``python -I -S confine.py --policy JSON -- PROGRAM ARGS...`` (or ``python -m openab.core.agents.confine``): the
policy is what :mod:`openab.core.agents.confinement` decided. It sets ``no_new_privs``, makes the folders the
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

import ctypes
import errno
import json
import os
import platform
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
EXIT_REFUSED: Final = 126  # as a shell says "found but cannot be run"
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
                os.makedirs(path, mode=0o700, exist_ok=True)
            try:
                opened.append((path, access, os.open(path, os.O_PATH | os.O_CLOEXEC)))
            except FileNotFoundError:
                continue  # a system folder this machine has not (/lib32): nothing to allow
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


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        abi, why = probe()
        print(json.dumps({"abi": abi, "why": why}))
        return 0
    if len(argv) < 4 or argv[0] != "--policy" or argv[2] != "--":
        print("usage: confine.py --policy JSON -- PROGRAM [ARGS...] | --probe", file=sys.stderr)
        return 2
    program = argv[3:]
    try:
        restrict(json.loads(argv[1]))
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
