"""The two file methods of `/acp` (docs/files.md): the extension reads an upload's file and writes a download's,
chunk by chunk, only for a transfer of a session its socket holds."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from .. import METHOD_PREFIX
from ..errors import FileRefused
from ..files import CHUNK
from ..jsonrpc import INVALID_PARAMS, JsonObject, LocalRpcError
from .schema import FileReadParams, FileWriteParams, parse_params

if TYPE_CHECKING:
    from ..files import Transfers
    from ..sessions import Session

__all__ = ["FILE_READ_METHOD", "FILE_WRITE_METHOD", "FileMethods"]

FILE_READ_METHOD: Final = METHOD_PREFIX + "file/read"
FILE_WRITE_METHOD: Final = METHOD_PREFIX + "file/write"
# The longest base64 a chunk of CHUNK bytes can be: anything longer is refused before it is decoded.
_MAX_CHUNK_BASE64: Final = 4 * -(-CHUNK // 3)


class FileMethods:
    """``_openab/file/read`` and ``_openab/file/write`` for one socket: ``owned`` refuses a session the socket
    does not hold (it raises the JSON-RPC error)."""

    def __init__(self, files: Transfers, owned: Callable[[str | None], Session]) -> None:
        self._files = files
        self._owned = owned

    def read(self, params: Any) -> JsonObject:
        """A chunk of an upload. One ``pread`` of at most 512 KiB, inline: short enough for the loop, and chunks
        keep their order."""
        parsed = parse_params(FileReadParams, params)
        self._owned(parsed.session_id)
        try:
            data, eof = self._files.read(parsed.session_id, parsed.transfer, parsed.offset)
        except FileRefused as exc:
            raise LocalRpcError(INVALID_PARAMS, str(exc)) from None
        return {"data": base64.b64encode(data).decode("ascii"), "eof": eof}

    def write(self, params: Any) -> JsonObject:
        """The next chunk of a download, written inline (at most 512 KiB): writes are sequential by contract."""
        parsed = parse_params(FileWriteParams, params)
        self._owned(parsed.session_id)
        if len(parsed.data) > _MAX_CHUNK_BASE64:
            raise LocalRpcError(INVALID_PARAMS, f"a chunk is at most {CHUNK} bytes ({_MAX_CHUNK_BASE64} characters "
                                                "of base64): send smaller chunks")
        try:
            data = base64.b64decode(parsed.data, validate=True)
        except (binascii.Error, ValueError):
            raise LocalRpcError(INVALID_PARAMS, "`data` is not valid base64") from None
        try:
            written = self._files.write(parsed.session_id, parsed.transfer, parsed.offset, data)
        except FileRefused as exc:
            raise LocalRpcError(INVALID_PARAMS, str(exc)) from None
        return {"written": written}
