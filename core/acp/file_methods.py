"""The two file methods of `/acp` (docs/files.md): the extension reads an upload's file and writes a download's,
chunk by chunk, only for a transfer of a session its socket holds.

Each comes two ways: as JSON-RPC in a text frame (the chunk in base64), and, when the pod offered it in the call's
``file`` object, as a binary frame (:func:`parse_frame`): a version byte, the length of a JSON header, the header
(the JSON-RPC request without its bytes) and the chunk's raw bytes. :meth:`FileMethods.frame` answers a binary
frame: a read with a binary frame (the JSON-RPC response as header, the chunk after it), anything else with a
JSON-RPC response as text, the errors included.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from .. import METHOD_PREFIX
from ..errors import FileRefused
from ..files import CHUNK, FRAME_VERSION
from ..jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, JsonObject, LocalRpcError
from .schema import FileReadParams, FileWriteParams, parse_params

if TYPE_CHECKING:
    from ..files import Transfers
    from ..sessions import Session

__all__ = ["FILE_READ_METHOD", "FILE_WRITE_METHOD", "FRAME_VERSION", "MAX_FRAME_HEADER", "FileMethods", "frame",
           "parse_frame"]

FILE_READ_METHOD: Final = METHOD_PREFIX + "file/read"
FILE_WRITE_METHOD: Final = METHOD_PREFIX + "file/write"
# The longest base64 a chunk of CHUNK bytes can be: anything longer is refused before it is decoded.
_MAX_CHUNK_BASE64: Final = 4 * -(-CHUNK // 3)
MAX_FRAME_HEADER: Final = 4096
"""The longest JSON header a binary file frame may carry: a request's ids and numbers, never data."""
_PREFIX: Final = struct.Struct(">BI")
_HEX_DIGEST: Final = re.compile(r"[0-9a-f]{64}")


class FrameError(ValueError):
    """A binary frame that is not one: too short, another version, a header that is not a JSON object."""


def parse_frame(data: bytes) -> tuple[dict[str, Any], memoryview]:
    """A binary file frame's header (a JSON object) and its payload (a view, not a copy); :class:`FrameError` says
    what is wrong with one that is not well made."""
    if len(data) < _PREFIX.size:
        raise FrameError(f"a binary frame starts with {_PREFIX.size} bytes (version, header length): this one has "
                         f"{len(data)}")
    version, length = _PREFIX.unpack_from(data)
    if version != FRAME_VERSION:
        raise FrameError(f"binary frames of version {version} are not understood: this pod reads version "
                         f"{FRAME_VERSION}")
    if length > MAX_FRAME_HEADER:
        raise FrameError(f"a binary frame's header is at most {MAX_FRAME_HEADER} bytes, not {length}")
    end = _PREFIX.size + length
    if end > len(data):
        raise FrameError(f"the binary frame is truncated: its header says {length} bytes, {len(data) - _PREFIX.size} "
                         "came")
    try:
        header = json.loads(bytes(data[_PREFIX.size:end]))
    except (ValueError, UnicodeDecodeError):
        raise FrameError("a binary frame's header is not JSON") from None
    if not isinstance(header, dict):
        raise FrameError("a binary frame's header is not a JSON object")
    return header, memoryview(data)[end:]


def frame(header: JsonObject, payload: bytes = b"") -> bytes:
    """A binary file frame: ``header`` (JSON), then ``payload`` as it is."""
    encoded = json.dumps(header, separators=(",", ":")).encode()
    return b"".join((_PREFIX.pack(FRAME_VERSION, len(encoded)), encoded, payload))


def _error(request_id: Any, code: int, message: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


class FileMethods:
    """``_openab/file/read`` and ``_openab/file/write`` for one socket: ``owned`` refuses a session the socket
    does not hold (it raises the JSON-RPC error)."""

    def __init__(self, files: Transfers, owned: Callable[[str | None], Session]) -> None:
        self._files = files
        self._owned = owned

    def read(self, params: Any) -> JsonObject:
        """A chunk of an upload. One ``pread`` of at most 512 KiB, inline: short enough for the loop, and chunks
        keep their order."""
        data, result = self._read_bytes(params)
        return {"data": base64.b64encode(data).decode("ascii"), "eof": result["eof"]}

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

    def frame(self, data: bytes) -> bytes | str | None:
        """The answer to one binary frame: a read's chunk as a binary frame, everything else a JSON-RPC response in
        text (an error included: a frame too broken to name its request is answered with ``id`` null); ``None`` for
        a binary frame that does not start as a file frame, which is ignored, as every binary frame was before
        them. Never raises for bad input."""
        if data[:1] != bytes((FRAME_VERSION,)):
            return None
        try:
            header, payload = parse_frame(data)
        except FrameError as exc:
            return _error(None, PARSE_ERROR, str(exc))
        request_id = header.get("id")
        if header.get("jsonrpc") != "2.0" or not isinstance(request_id, int) or isinstance(request_id, bool):
            return _error(None, INVALID_REQUEST, "a binary frame's header is a JSON-RPC request with an integer id")
        method, params = header.get("method"), header.get("params")
        try:
            if method == FILE_READ_METHOD:
                if payload:
                    raise LocalRpcError(INVALID_PARAMS, "a read carries no bytes")
                chunk, result = self._read_bytes(params, digests=True)
                return frame({"jsonrpc": "2.0", "id": request_id, "result": result}, chunk)
            if method == FILE_WRITE_METHOD:
                written = self._write_bytes(params, payload)
                return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"written": written}})
            raise LocalRpcError(METHOD_NOT_FOUND, f"binary frames carry {FILE_READ_METHOD} and {FILE_WRITE_METHOD} "
                                                  f"only, not {str(method)[:100]!r}")
        except LocalRpcError as exc:
            return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": exc.to_json()})

    def _read_bytes(self, params: Any, *, digests: bool = False) -> tuple[bytes, JsonObject]:
        """A chunk of an upload and its answer's result; with ``digests`` (binary frames), the chunk's sha256 as
        the file was when the call began, and on the last chunk the file's once every byte left in order and hashed to
        it (docs/files.md): the extension then checks each chunk as it comes instead of hashing the whole file after
        the last."""
        parsed = parse_params(FileReadParams, params)
        self._owned(parsed.session_id)
        try:
            data, eof = self._files.read(parsed.session_id, parsed.transfer, parsed.offset)
            result: JsonObject = {"eof": eof, "size": len(data)}
            if digests:
                result["sha256"] = self._files.chunk_digest(parsed.session_id, parsed.transfer, parsed.offset, data)
                if eof and (whole := self._files.served_whole(parsed.session_id, parsed.transfer)):
                    result["file_sha256"] = whole
        except FileRefused as exc:
            raise LocalRpcError(INVALID_PARAMS, str(exc)) from None
        return data, result

    def _write_bytes(self, params: Any, data: memoryview) -> int:
        parsed = parse_params(FileReadParams, params)  # the write's params but its data: that is the payload
        self._owned(parsed.session_id)
        digest = params.get("sha256")
        if digest is not None and (not isinstance(digest, str) or not _HEX_DIGEST.fullmatch(digest)):
            raise LocalRpcError(INVALID_PARAMS, "`sha256` is the chunk's digest in 64 lowercase hex digits")
        if len(data) > CHUNK:
            raise LocalRpcError(INVALID_PARAMS, f"a chunk is at most {CHUNK} bytes, not {len(data)}: send smaller "
                                                "chunks")
        try:
            return self._files.write(parsed.session_id, parsed.transfer, parsed.offset, data, digest)
        except FileRefused as exc:
            raise LocalRpcError(INVALID_PARAMS, str(exc)) from None
