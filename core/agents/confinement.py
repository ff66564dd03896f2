"""What a session's agent process tree may reach of the pod's machine, decided without touching it (sans-I/O).

The agent CLI runs shell commands for a model that reads web pages, so a page can make it run anything: openab's
promises (the person's key stays theirs, sessions never see each other, the journal cannot be forged) hold only
if the agent's tree reaches nothing but its own session. The kernel holds that line with Landlock: a
:class:`Policy` lists the folders the agent may read, run and write (everything else, the pod's state dir and
the other sessions' folders among it, is refused), and scopes signals and abstract Unix sockets to the agent's
own tree. Landlock's ptrace rule also keeps the agent out of ``/proc/<pid>`` of every process outside its tree
(the pod's ``environ``, ``mem``, ``fd``; another session's agent's stdin).

This module only decides: :func:`agent_policy` makes the policy from plain facts (folders, the agent's
environment, the kernel's Landlock ABI), :func:`launcher_argv` wraps the agent's command in the launcher
(:mod:`openab_browser.core.agents.confine`, the thin side that makes the system calls and then execs the agent), and
:class:`Support` says what a kernel can and cannot confine, for the pod's start, ``openab doctor`` and the
refusal to run an agent CLI unconfined.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ..errors import ConfigurationError

__all__ = [
    "ABI_FULL",
    "EXECUTE",
    "READ",
    "READ_EXEC",
    "READ_WRITE",
    "Launch",
    "Policy",
    "Rule",
    "Support",
    "agent_policy",
    "expand_folder",
    "handled_access",
    "launcher_argv",
    "scopes",
]

# Landlock's filesystem access rights (include/uapi/linux/landlock.h), and the ABI that brought each.
EXECUTE: Final = 1 << 0
WRITE_FILE: Final = 1 << 1
READ_FILE: Final = 1 << 2
READ_DIR: Final = 1 << 3
REMOVE_DIR: Final = 1 << 4
REMOVE_FILE: Final = 1 << 5
MAKE_CHAR: Final = 1 << 6
MAKE_DIR: Final = 1 << 7
MAKE_REG: Final = 1 << 8
MAKE_SOCK: Final = 1 << 9
MAKE_FIFO: Final = 1 << 10
MAKE_BLOCK: Final = 1 << 11
MAKE_SYM: Final = 1 << 12
REFER: Final = 1 << 13  # ABI 2: moving and linking across folders
TRUNCATE: Final = 1 << 14  # ABI 3: before it, truncate(2) was not governed at all
IOCTL_DEV: Final = 1 << 15  # ABI 5
_BY_ABI: Final = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}
# Scopes (ABI 6): an abstract Unix socket or a signal may only reach a process of the same domain or below.
SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0
SCOPE_SIGNAL: Final = 1 << 1
# The ABI from which every probe of issue 35 is refused: files (with truncate, 3), signals and sockets (6).
ABI_FULL: Final = 6

READ: Final = READ_FILE | READ_DIR
READ_EXEC: Final = READ | EXECUTE
READ_WRITE: Final = (
    READ | EXECUTE | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_SYM
    | REFER | TRUNCATE
)
# Devices: read and write (/dev/null, /dev/tty, /dev/urandom), truncate (a shell's `> /dev/null` opens O_TRUNC)
# and their ioctls (a terminal's); nothing can be made there.
DEVICES: Final = READ | WRITE_FILE | TRUNCATE | IOCTL_DEV

# Read and run: the system an agent CLI and its shell need. What is missing on a machine is skipped.
SYSTEM_READ_EXEC: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
# Read only: what runtimes read of the kernel (cpus, memory limits) and of their own process. Other processes'
# /proc entries stay shut by Landlock's ptrace rule, whatever this allows.
SYSTEM_READ: Final = ("/proc", "/sys")


def handled_access(abi: int) -> int:
    """The filesystem rights a kernel of Landlock ``abi`` knows, all of which the policy handles (denies unless
    allowed)."""
    return sum(bits for since, bits in _BY_ABI.items() if abi >= since)


def scopes(abi: int) -> int:
    """The scopes a kernel of Landlock ``abi`` offers: signals and abstract sockets from ABI 6."""
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0


@dataclass(frozen=True, slots=True)
class Rule:
    """``path`` and everything under it gets ``access``; ``make``: the launcher creates the folder (0700) when it
    is missing (Landlock can only allow what exists), else a missing path is skipped."""

    path: str
    access: int
    make: bool = False


@dataclass(frozen=True, slots=True)
class Policy:
    """The rules of one agent's Landlock domain, for the kernel's ``abi``: what the launcher applies."""

    abi: int
    rules: tuple[Rule, ...]
    handled: int
    scoped: int
    # A PID namespace (and /proc) of its own, where the kernel lets the launcher make one: the agent then sees no
    # other process at all, not even the command lines and fd numbers Landlock leaves readable.
    private_pids: bool = False

    def to_json(self) -> str:
        return json.dumps({"abi": self.abi, "handled": self.handled, "scoped": self.scoped,
                           "private_pids": self.private_pids,
                           "rules": [[r.path, r.access, r.make] for r in self.rules]}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Policy:
        raw = json.loads(text)
        rules = tuple(Rule(str(p), int(a), bool(m)) for p, a, m in raw["rules"])
        return cls(int(raw["abi"]), rules, int(raw["handled"]), int(raw["scoped"]), bool(raw.get("private_pids")))


@dataclass(frozen=True, slots=True)
class Support:
    """What this kernel can confine, from its Landlock ABI (0: none: no Landlock, or gVisor, or disabled)."""

    abi: int
    why_not: str = ""  # the probe's own words when it found no Landlock

    @property
    def confines(self) -> bool:
        return self.abi >= 1

    @property
    def full(self) -> bool:
        return self.abi >= ABI_FULL

    def gaps(self) -> list[str]:
        """What a confined agent could still do on this kernel, one phrase each (empty at ABI 6 and above)."""
        if not self.confines:
            return ["everything the pod's user can: read the pod's key and state, other sessions' folders, "
                    "the pod's /proc, signal it"]
        gaps = []
        if self.abi < 3:
            gaps.append("truncate files it cannot write (Landlock ABI 3, Linux 6.2)")
        if self.abi < 6:
            gaps.append("signal the pod and other sessions' agents, and reach abstract Unix sockets (Landlock ABI 6, "
                        "Linux 6.12)")
        return gaps

    def describe(self) -> str:
        if not self.confines:
            return f"no Landlock ({self.why_not or 'the kernel has none'}): agent CLIs cannot be confined"
        if self.full:
            return f"Landlock ABI {self.abi}: agent CLIs are confined to their own session"
        return f"Landlock ABI {self.abi}: agent CLIs are confined, but could still " + "; ".join(self.gaps())


def _norm(path: str) -> str:
    return posixpath.normpath(path)


def _contains(outer: str, inner: str) -> bool:
    """Whether ``inner`` is ``outer`` or beneath it (both normalised absolute paths)."""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def _node_root(program: str) -> str | None:
    """The outermost ``node_modules`` folder ``program`` (a resolved path) lives in: an npm CLI's launcher loads
    its native binary and libraries from sibling packages there."""
    parts = program.split("/")
    if "node_modules" not in parts:
        return None
    return "/".join(parts[: parts.index("node_modules") + 1]) or None


def agent_policy(
    abi: int,
    *,
    workdir: str,
    tmpdir: str,
    state_dir: str,
    home_dirs: Iterable[str] = (),
    runtimes: Iterable[str] = (),
    path: str = "",
    program: str | None = None,
    extra_read_exec: Iterable[str] = (),
    command_files: Iterable[str] = (),
    secrets: Iterable[str] = (),
    private_pids: bool = True,
    home_files: Iterable[str] = (),
) -> Policy:
    """The policy of one session's agent.

    ``workdir`` and ``tmpdir``: its own folders, read-write; ``home_dirs``: the CLI's own folders (absolute, as
    :func:`expand_folder` makes them from its recipe), read-write and made when missing; ``home_files``: files of
    its CLI it rewrites in place (``~/.claude.json``), read-write when they exist (never made: the folder they are
    in is not the agent's); ``runtimes`` (the Python that runs the launcher and openab's packages), the folders of
    ``path`` (``PATH``), the ``node_modules`` of ``program`` (its resolved path) and ``command_files`` (the files
    its command line names, such as the script an interpreter runs, outside the state dir): read and run; the
    system: read and run.

    Raises :class:`ConfigurationError` when an allowed folder holds ``state_dir`` (the pod's key and every session)
    or one of ``secrets`` (the key files the operator named), saying which, since Landlock allows a folder with
    everything under it.
    """
    state = _norm(state_dir)
    rules: list[Rule] = [Rule(p, READ_EXEC) for p in SYSTEM_READ_EXEC]
    rules += [Rule(p, READ) for p in SYSTEM_READ]
    rules.append(Rule("/dev", DEVICES))
    for entry in (*runtimes, *path.split(os.pathsep), *extra_read_exec):
        if entry and posixpath.isabs(entry):
            rules.append(Rule(_norm(entry), READ_EXEC))
    # A CLI's launcher in node_modules/.bin (on PATH, or the program itself) runs code from its sibling packages.
    for entry in (program or "", *path.split(os.pathsep)):
        if entry and posixpath.isabs(entry) and (root := _node_root(_norm(entry))):
            rules.append(Rule(root, READ_EXEC))
    rules += [Rule(_norm(f), READ_EXEC) for f in command_files if posixpath.isabs(f) and not _contains(state, _norm(f))]
    rules += [Rule(_norm(folder), READ_WRITE, make=True) for folder in home_dirs if posixpath.isabs(folder)]
    rules += [Rule(_norm(file), READ | WRITE_FILE | TRUNCATE) for file in home_files if posixpath.isabs(file)]
    for own in (workdir, tmpdir):
        rules.append(Rule(_norm(own), READ_WRITE, make=True))
    private = [(state, "the pod's state dir", "the state dir (--state-dir, OPENAB_STATE_DIR)")]
    private += [(_norm(f), "the key file", "the key file") for f in secrets if posixpath.isabs(f)]
    for rule in rules:
        if rule.path in (_norm(workdir), _norm(tmpdir)):
            continue  # the session's own folders are inside the state dir, and only they are allowed there
        for path, what, move in private:
            if _contains(rule.path, path):
                raise ConfigurationError(
                    f"{what} {path} is inside {rule.path}, which a confined agent may "
                    f"{'write' if rule.access & WRITE_FILE else 'read'}: move {move} out of it"
                )
    handled = handled_access(abi)
    unique: dict[str, Rule] = {}
    for rule in rules:  # one rule per path; a path named twice gets the union of its rights
        seen = unique.get(rule.path)
        unique[rule.path] = rule if seen is None else Rule(rule.path, seen.access | rule.access, seen.make or rule.make)
    return Policy(abi, tuple(Rule(r.path, r.access & handled, r.make) for r in unique.values()), handled, scopes(abi),
                  private_pids)


_TEMPLATE = re.compile(r"\$\{([A-Z_][A-Z0-9_]*):-([^}]*)\}|~")


def expand_folder(template: str, env: Mapping[str, str], home: str | None) -> str | None:
    """A recipe's folder for ``env``: ``~`` is HOME, ``${VAR:-default}`` is VAR when it is set (absolute), else
    ``default``; ``None`` when it needs a HOME there is none of, or ends relative."""
    missing = False

    def value(match: re.Match[str]) -> str:
        nonlocal missing
        if match.group(0) == "~":
            missing = missing or not home
            return home or ""
        chosen = env.get(match.group(1), "")
        if chosen and posixpath.isabs(chosen):
            return chosen
        return _TEMPLATE.sub(value, match.group(2))

    path = _TEMPLATE.sub(value, template)
    return _norm(path) if not missing and posixpath.isabs(path) else None


@dataclass(frozen=True, slots=True)
class Launch:
    """How the launcher runs: a Python and the launcher's own file, run as a script (``-I -S``: no site, no user
    paths, so it starts in milliseconds and imports only the standard library)."""

    python: str
    script: str


def launcher_argv(policy: Policy, argv: Sequence[str], launch: Launch) -> list[str]:
    """The command that applies ``policy`` to itself and then execs ``argv`` (its program resolved already)."""
    return [launch.python, "-I", "-S", launch.script, "--policy", policy.to_json(), "--", *argv]
