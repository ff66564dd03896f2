"""The `openab` command: each subcommand lives in the module of the hop it belongs to.

Every module named here registers its subcommands with ``register(commands)`` and must import nothing
heavy at module level: `openab browser-bridge` is spawned by agent CLIs once per session, and some give
their MCP servers only a few seconds to start.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

# (module, what it adds): run/demo (the pod), browser-bridge (the stdio relay), config (MCP config files),
# audit (the audit log of tool calls), doctor (what to fix in an installation), extension (the side panel's files),
# key (a new /acp key for a pod that keeps its own).
SUBCOMMAND_MODULES = (
    "openab.gateway.run_command",
    "openab.gateway.demo_command",
    "openab.bridge.relay_command",
    "openab.gateway.config_command",
    "openab.gateway.audit_command",
    "openab.gateway.doctor_command",
    "openab.gateway.extension_command",
    "openab.gateway.key_command",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openab", description="Let an agent in this pod operate a person's own Chrome, safely."
    )
    parser.add_argument("--version", action=_Version, help="print openab's version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(commands)
    return parser


class _Version(argparse.Action):
    """``--version``, read only when asked: package metadata costs ~20 ms that every relay start would pay."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help=str(kwargs.get("help", "")))

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        from openab.core import package_version

        print(f"openab {package_version()}")
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
