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

# (module, what it adds): run/demo (the pod), browser-bridge (the stdio relay), config (MCP config files).
SUBCOMMAND_MODULES = (
    "openab.gateway.run_command",
    "openab.gateway.demo_command",
    "openab.bridge.relay_command",
    "openab.gateway.config_command",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openab", description="Let an agent in this pod operate a person's own Chrome, safely."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
