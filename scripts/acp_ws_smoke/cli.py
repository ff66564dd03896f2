"""The command line: the flags, the key from the environment, the exit codes."""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import sys
from urllib.parse import urlsplit

from .client import Target
from .sections import SECTIONS
from .suite import Suite

EXIT_FAILED = 2
EXIT_USAGE = 3


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Smoke-test a deployed openab gateway's /acp endpoint. The key comes from OPENAB_ACP_TOKEN "
                    "(never a flag: it would show in `ps`).")
    parser.add_argument("url", nargs="?", default=os.environ.get("ACP_URL", "ws://localhost:8080/acp"),
                        help="the gateway's /acp URL, ws:// or wss:// (default $ACP_URL, else ws://localhost:8080/acp)")
    parser.add_argument("--ca-file", help="trust this CA bundle (PEM) for wss://, e.g. the pod's self-signed CA")
    parser.add_argument("--skip-model-checks", action="store_true",
                        help="skip the checks that need an agent that follows instructions (no model behind the pod)")
    parser.add_argument("--prompt-timeout", type=float, default=90.0, help="seconds a short prompt may take")
    parser.add_argument("--long-timeout", type=float, default=180.0, help="seconds a long prompt may take")
    parser.add_argument("--only", action="append", metavar="SECTION",
                        help="run only the sections whose name contains this (repeatable), e.g. --only tunnel")
    return parser.parse_args(argv)


async def main_async(args: argparse.Namespace, token: str) -> int:
    context: ssl.SSLContext | None = None
    if args.url.startswith("wss://"):
        context = ssl.create_default_context(cafile=args.ca_file)
    target = Target(args.url, token, context, args.prompt_timeout, args.long_timeout)
    suite = Suite(target, skip_model=args.skip_model_checks, check_timeout=30.0)
    print(f"acp-ws-smoke: {args.url}", flush=True)
    for section, checks in SECTIONS:
        if args.only and not any(word.lower() in section.lower() for word in args.only):
            continue
        for name, check, model in checks:
            await suite.run(section, name, check, model=model)
    return 0 if suite.summary() else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    token = os.environ.get("OPENAB_ACP_TOKEN", "")
    if not token:
        print("acp-ws-smoke: set OPENAB_ACP_TOKEN to the gateway's key (the checks need a key to compare "
              "refusals against)", file=sys.stderr)
        return EXIT_USAGE
    if urlsplit(args.url).scheme not in ("ws", "wss"):
        print(f"acp-ws-smoke: {args.url!r} is not a ws:// or wss:// URL", file=sys.stderr)
        return EXIT_USAGE
    if args.ca_file and not os.path.isfile(args.ca_file):
        print(f"acp-ws-smoke: --ca-file {args.ca_file} does not exist", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(main_async(args, token))
    except KeyboardInterrupt:
        return EXIT_FAILED
