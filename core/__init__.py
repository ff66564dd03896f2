"""openab.core: the protocol engine, sessions, tunnels, agent runtime and browser access of the pod."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("openab")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
