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
    "openab_browser.gateway.run_command",
    "openab_browser.gateway.demo_command",
    "openab_browser.bridge.relay_command",
    "openab_browser.gateway.config_command",
    "openab_browser.gateway.audit_command",
    "openab_browser.gateway.doctor_command",
    "openab_browser.gateway.extension_command",
    "openab_browser.gateway.key_command",
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
        from openab_browser.core import package_version

        _say_if_another_openab()
        print(f"openab {package_version()}")
        parser.exit()


def _say_if_another_openab() -> None:
    """Says on stderr when a distribution named ``openab`` is installed beside ours (``openab-browser``): the
    package index's ``openab`` is another project, and both install an ``openab`` command, so the one that runs is
    whichever was installed last. Not for ``browser-bridge``: agent CLIs spawn it, nobody reads its stderr, and the
    metadata read costs every agent start ~20 ms."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        other = distribution("openab")
    except PackageNotFoundError:
        return
    summary = " ".join(str(other.metadata["Summary"] or "").split())[:100]
    print(f"openab: a distribution named `openab` is installed in this Python environment too (openab "
          f"{other.version}{': ' + summary if summary else ''}). The package index's `openab` is another project; this "
          "command is openab-browser's. Both install an `openab` command, and the one that runs is whichever was "
          "installed last. Uninstall the other (pip uninstall openab) or keep the two in separate virtual "
          "environments; `python -m openab_browser.gateway.cli` always runs this one.", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command != "browser-bridge":
        _say_if_another_openab()
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
