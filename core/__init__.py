"""openab_browser.core: the protocol engine, sessions, tunnels, agent runtime and browser access of the pod."""

from functools import cache
from typing import Final

__all__ = ["DISTRIBUTION", "META_PREFIX", "METHOD_PREFIX", "package_version"]

# Our name on the package index: the index's `openab` is another project (tests/test_distribution_name.py).
DISTRIBUTION: Final = "openab-browser"

# Our keys in any ``_meta`` object, spelled as upstream openab spells them (``dev.openab/acp``).
META_PREFIX: Final = "dev.openab/"
# Our own methods on the `/acp` socket: ACP reserves names with a leading underscore for extensions.
METHOD_PREFIX: Final = "_openab/"


@cache
def package_version() -> str:
    """openab's version, read on first use, not at import: `openab browser-bridge` imports this package on
    every agent start and must start fast, and reading package metadata costs about 20 ms."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # a source tree that was never installed
        return "0.0.0"
