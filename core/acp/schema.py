"""ACP v1 control messages, validated at the edge.

Only the envelopes of control methods are modelled; prompt content and tool payloads stay plain JSON.
The error texts are those of the `/acp` contract, so a client written for upstream sees the same words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from .. import META_PREFIX
from ..jsonrpc import INVALID_PARAMS, JsonObject, LocalRpcError
from ..protocol_file import META

__all__ = [
    "ACP_TUNNEL_META",
    "AGENTS_META",
    "AGENTS_UNAVAILABLE_META",
    "AGENT_META",
    "AUTH_REQUIRED",
    "FRESH_META",
    "MARKS_RUNNING_META",
    "PERMISSION_RELAY_META",
    "PROTOCOL_VERSION",
    "AcpServerDeclaration",
    "AgentChoice",
    "AgentOffer",
    "CancelParams",
    "CloseParams",
    "FileReadParams",
    "FileWriteParams",
    "InitializeParams",
    "NewSessionParams",
    "PromptParams",
    "ResumeSessionParams",
    "acp_declarations",
    "checked_prompt",
    "initialize_result",
    "parse_params",
    "validate_session_id",
]

PROTOCOL_VERSION: Final = 1
# The client answers permission cards: sent in session/new or resume ``_meta``, advertised in initialize.
PERMISSION_RELAY_META: Final = META["permissionRelay"]
# The panel marks a journalled step running when its call arrives (session/new or resume ``_meta``): the pod need
# not send it a ``running`` notification first (core/journal/telling.py).
MARKS_RUNNING_META: Final = META["marksRunning"]
ACP_TUNNEL_META: Final = META_PREFIX + "acp"
# The agents a session may run: ``[{id, title}]`` in the initialize result's ``_meta``, the first the default.
AGENTS_META: Final = META["agents"]
# Why no agent of the pod can start (none of their commands is installed), for the person, in the initialize result's
# ``_meta`` when so: the panel shows it at connect instead of failing each prompt (core/agents/availability.py).
AGENTS_UNAVAILABLE_META: Final = META["agentsUnavailable"]
# The one a session runs: chosen in session/new ``_meta``, said back in the session/new and resume results.
AGENT_META: Final = META["agent"]
# In a session/resume result: the pod did not have that session (it restarted, evicted it idle, or the client closed
# it) and took the id up afresh; the agent's own memory of the conversation may carry on, the pod's steps and files
# of it are gone. The panel says so when the person goes back to an old chat.
FRESH_META: Final = META["fresh"]
# Why a turn answered ``cancelled`` when the client did not cancel it, in the session/prompt result's ``_meta``:
# STOPPED_SHUTDOWN, the gateway stopping (SIGTERM) cancelled it, so the panel does not say the person stopped it.
STOPPED_META: Final = META["stopped"]
STOPPED_SHUTDOWN: Final = "gateway_shutdown"
# ACP's error code for an agent that needs its user to sign in first.
AUTH_REQUIRED: Final = -32000
# Checked with fullmatch: `$` also matches before a final newline, and "sess_<uuid>\n" would become a session
# (and a directory name) of its own.
_SESSION_ID = re.compile(r"sess_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


M = TypeVar("M", bound=BaseModel)


class _Params(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class InitializeParams(_Params):
    """``initialize``: the client's protocol version and what it can do."""

    protocol_version: StrictInt = Field(alias="protocolVersion")
    client_capabilities: dict[str, Any] | None = Field(default=None, alias="clientCapabilities")
    client_info: dict[str, Any] | None = Field(default=None, alias="clientInfo")


class NewSessionParams(_Params):
    """``session/new``: ``cwd`` (never the agent's directory) and the servers the client provides."""

    cwd: StrictStr
    mcp_servers: list[Any] = Field(alias="mcpServers")


class ResumeSessionParams(_Params):
    """``session/resume``: the session to take over; an ``mcpServers`` array replaces the servers."""

    session_id: StrictStr = Field(alias="sessionId")
    cwd: StrictStr
    # Absent, null or not an array means "keep the declared servers"; only an array withdraws (§2.6).
    mcp_servers: Any = Field(default=None, alias="mcpServers")


class PromptParams(_Params):
    """``session/prompt``: the blocks, checked by :func:`checked_prompt`."""

    session_id: StrictStr = Field(alias="sessionId")
    prompt: Any


class CloseParams(_Params):
    """``session/close``: end the session now (its turn, its agent, its tunnels, its browser endpoint)."""

    session_id: StrictStr = Field(alias="sessionId")


class CancelParams(_Params):
    """``session/cancel`` (a notification)."""

    session_id: StrictStr = Field(alias="sessionId")


class FileReadParams(_Params):
    """``_openab/file/read``: a chunk of an upload's file, from ``offset`` (docs/files.md)."""

    session_id: StrictStr = Field(alias="sessionId", max_length=64)
    transfer: StrictStr = Field(max_length=64)
    offset: StrictInt = Field(ge=0)


class FileWriteParams(FileReadParams):
    """``_openab/file/write``: the next chunk of a download, base64 (its bound checked before it is decoded)."""

    data: StrictStr


def parse_params(model: type[M], params: Any, what: str = "params") -> M:
    """Validate request params or raise -32602 naming the offending fields."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise LocalRpcError(INVALID_PARAMS, f"Invalid {what}: params must be an object")
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'params'}: {err['msg']}" for err in exc.errors()
        )
        raise LocalRpcError(INVALID_PARAMS, f"Invalid {what}: {problems}") from None


@dataclass(frozen=True, slots=True)
class AcpServerDeclaration:
    """A ``{type:"acp"}`` MCP server the client provides over this connection."""

    server_id: str
    name: str


def acp_declarations(mcp_servers: Any) -> list[AcpServerDeclaration]:
    """The usable ``type:"acp"`` entries, deduplicated by id, in declaration order.

    Both the upstream form ``{id}`` and the ACP SDK form ``{serverId}`` are read; entries of other types
    (http, stdio) are the client's business and are not ours to open. Entries lacking a name or an id are
    ignored, as upstream does.
    """
    if not isinstance(mcp_servers, list):
        return []
    seen: dict[str, AcpServerDeclaration] = {}
    for entry in mcp_servers:
        if not isinstance(entry, dict) or entry.get("type") != "acp":
            continue
        server_id = entry.get("serverId") or entry.get("id")
        name = entry.get("name")
        if isinstance(server_id, str) and server_id and isinstance(name, str) and name:
            seen.setdefault(server_id, AcpServerDeclaration(server_id, name))
    return list(seen.values())


@dataclass(frozen=True, slots=True)
class AgentChoice:
    """An agent a session may run: ``id`` is what a client sends back, ``title`` what a person reads."""

    id: str
    title: str


@dataclass(frozen=True, slots=True)
class AgentOffer:
    """The agents the pod offers, the first being the default (``openab run --agent a --agent b``).

    ``unavailable`` says, when asked, why none of them can start (``None``: one can)."""

    choices: tuple[AgentChoice, ...]
    unavailable: Callable[[], str | None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.choices:
            raise ValueError("an agent offer needs at least one agent")

    @property
    def default(self) -> str:
        return self.choices[0].id

    def meta(self) -> list[JsonObject]:
        return [{"id": c.id, "title": c.title} for c in self.choices]

    def choose(self, meta: dict[str, Any] | None) -> str:
        """The agent session/new's ``_meta`` asks for (the default when it names none).

        Raises -32602 naming the choices for one the pod does not offer.
        """
        wanted = (meta or {}).get(AGENT_META)
        if wanted is None:
            return self.default
        ids = [c.id for c in self.choices]
        if wanted not in ids:
            raise LocalRpcError(
                INVALID_PARAMS,
                f"Invalid params: _meta.{AGENT_META} {wanted!r} is not an agent this gateway offers; "
                f"choose one of {', '.join(ids)} (initialize's _meta.{AGENTS_META} lists them)",
            )
        return str(wanted)

    def resumed(self, meta: dict[str, Any] | None) -> str:
        """The agent of a session resumed after the pod forgot it: the one ``_meta`` names if still offered
        (a restarted pod may offer others), else the default; resuming never fails for it."""
        wanted = (meta or {}).get(AGENT_META)
        return str(wanted) if wanted in [c.id for c in self.choices] else self.default


def validate_session_id(session_id: str) -> str:
    if not _SESSION_ID.fullmatch(session_id):
        raise LocalRpcError(INVALID_PARAMS, "Invalid sessionId: expected the form sess_<uuid>")
    return session_id


def initialize_result(version: str, agents: AgentOffer) -> JsonObject:
    why = agents.unavailable() if agents.unavailable is not None else None
    return {
        "_meta": {AGENTS_META: agents.meta(), **({AGENTS_UNAVAILABLE_META: why} if why else {})},
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": False,
            "sessionCapabilities": {"resume": {}, "close": {}},
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
            # The client's own http/sse servers are its business, never opened from the pod.
            "mcpCapabilities": {"http": False, "sse": False, "acp": True, "_meta": {ACP_TUNNEL_META: True}},
            "_meta": {PERMISSION_RELAY_META: True},
        },
        "agentInfo": {"name": "openab", "title": "OpenAB", "version": version},
        "authMethods": [],
    }


def checked_prompt(prompt: Any) -> list[JsonObject]:
    """Check a prompt's content blocks; returns them unchanged when every block is one we relay.

    Text and resource links only (links are shown, never fetched): the agent runs in the pod, and a block
    the browser could not have meant for it (a local file, an image we do not advertise) is refused here.
    """
    if not isinstance(prompt, list):
        raise LocalRpcError(INVALID_PARAMS, "Invalid params: prompt must be an array of content blocks")
    has_words = False
    for block in prompt:
        if not isinstance(block, dict):
            raise LocalRpcError(INVALID_PARAMS, "Invalid params: each prompt block must be an object")
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise LocalRpcError(INVALID_PARAMS, "Invalid params: a text block needs a string `text`")
            has_words = has_words or bool(text.strip())
        elif kind == "resource_link":
            if not isinstance(block.get("name"), str) or not isinstance(block.get("uri"), str):
                raise LocalRpcError(INVALID_PARAMS, "Invalid params: a resource_link block needs `name` and `uri`")
            has_words = True
        else:
            raise LocalRpcError(
                INVALID_PARAMS,
                f"Unsupported prompt content block type '{kind}' — send text or resource_link blocks",
            )
    if not has_words:
        raise LocalRpcError(INVALID_PARAMS, "Empty prompt")
    return prompt
