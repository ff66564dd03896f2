"""The scripted browser's one tool in the fuzz runs: ``browser_echo`` answers with its arguments as JSON text,
so hostile arguments cross the tunnel both ways and a known-good call can check what came back."""

from __future__ import annotations

from typing import Any

import orjson
from fake_extension import FakeExtension, text_result

ECHO = "browser_echo"


async def echo(arguments: dict[str, Any]) -> dict[str, Any]:
    return text_result(orjson.dumps(arguments).decode())


def serve_echo(ext: FakeExtension) -> None:
    ext.add_tool(ECHO, echo)
