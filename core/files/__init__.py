"""Files across the gap (docs/files.md): paths inside a session's working folder (:mod:`.paths`), the pod's open
transfers and their caps (:mod:`.transfers`), and a file tool call as the MCP server runs it (:mod:`.calls`)."""

from .calls import DOWNLOAD_TOOL, FILE_TOOLS, UPLOAD_TOOL, FileCall
from .transfers import CHUNK, FRAME_VERSION, WINDOW, Direction, FileLimits, Placed, Transfer, Transfers

__all__ = [
    "CHUNK",
    "DOWNLOAD_TOOL",
    "FILE_TOOLS",
    "FRAME_VERSION",
    "UPLOAD_TOOL",
    "WINDOW",
    "Direction",
    "FileCall",
    "FileLimits",
    "Placed",
    "Transfer",
    "Transfers",
]
