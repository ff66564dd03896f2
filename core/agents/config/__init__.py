"""The agent CLIs' own MCP config files: which file each CLI reads, our entry in its format, and writing it
safely (merge, lock, atomic replace, 0600). Re-exported here: callers import from ``openab.core.agents.config``."""

from .files import (
    AGENTS,
    KIRO_GRANT,
    SERVER_NAME,
    ConfigError,
    ConfigFile,
    Endpoint,
    HttpEndpoint,
    StdioCommand,
    Written,
    agent_name,
    config_files,
    config_write,
    entry,
    expands_token,
    strip,
    write,
    write_private,
)

__all__ = [
    "AGENTS", "KIRO_GRANT", "SERVER_NAME", "ConfigError", "ConfigFile", "Endpoint", "HttpEndpoint", "StdioCommand",
    "Written", "agent_name", "config_files", "config_write", "entry", "expands_token", "strip", "write",
    "write_private",
]
