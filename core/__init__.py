"""openab.core: the protocol engine, sessions, tunnels, agent runtime and browser access of the pod."""

from typing import Any


def __getattr__(name: str) -> Any:
    # Looked up on first use, not at import: `openab browser-bridge` imports this package once per agent
    # session and must start fast, and reading package metadata costs about 20 ms.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("openab")
        except PackageNotFoundError:  # a source tree that was never installed
            return "0.0.0"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
