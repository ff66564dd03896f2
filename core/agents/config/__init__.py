"""The agent CLIs' own MCP config files: which file each CLI reads and our entry in its format (``formats``),
merging it into what is there (``merge``, with Goose's YAML in ``goose_yaml``), writing it safely (``files``:
lock, atomic replace, 0600), the folder trust Claude and Gemini ask for first (``trust``) and `openab config
write` (``command``). Re-exported here: callers import from ``openab_browser.core.agents.config``."""

from ...errors import ConfigError
from ...mcp.access import Entry as Endpoint
from ...mcp.access import HttpEndpoint, StdioCommand
from ...mcp_vocabulary import SERVER_NAME
from .command import Written, config_write
from .files import remove_flag_file, strip, write, write_flag_file, write_private
from .formats import AGENTS, KIRO_GRANT, ConfigFile, agent_name, config_files, document, entry, expands_token
from .trust import TRUSTING_AGENTS, FolderTrust, folder_trust, trust_folder

__all__ = [
    "AGENTS", "KIRO_GRANT", "SERVER_NAME", "TRUSTING_AGENTS", "ConfigError", "ConfigFile", "Endpoint", "FolderTrust",
    "HttpEndpoint", "StdioCommand", "Written", "agent_name", "config_files", "config_write", "document", "entry",
    "expands_token", "folder_trust", "remove_flag_file", "strip", "trust_folder", "write", "write_flag_file",
    "write_private",
]
