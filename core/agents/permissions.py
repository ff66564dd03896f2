"""Answering an agent's ``session/request_permission`` in the pod: always for our own browser tools, and for
everything else when the person cannot be asked.

A request for a tool of our ``openab_browser`` server (as the agent's runtime identifies it, see
:mod:`openab_browser.core.agents.recipes`) is decided here by the policy and never becomes a card in the panel: the
browser's guard is what stops a risky action, with its own card. Only requests for anything else (shell, file
edits, other MCP servers) go to the person, with every option the agent offers.

Three policies (``--permissions``):

* ``auto``: approve like upstream openab: ``allow_always``, else ``allow_once``, else the first option that is
  not a reject, else ``cancelled``;
* ``browser-only``: approve only a tool of our own ``openab_browser`` server that the browser currently
  offers, as identified by fields the agent's *runtime* sets (see :mod:`openab_browser.core.agent_recipes`); reject
  everything else;
* ``deny``: reject everything.

A rejection picks the agent's ``reject_once`` (else ``reject_always``); an agent that offered no reject option
gets ``cancelled``, which ends its turn rather than letting the call through.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal

from ..jsonrpc import JsonObject
from .config import SERVER_NAME
from .recipes import Identify

__all__ = ["Policy", "approve_auto", "browser_identity", "cancelled", "decide", "decide_ours", "reject", "select"]

Policy = Literal["auto", "browser-only", "deny"]


def cancelled() -> JsonObject:
    return {"outcome": {"outcome": "cancelled"}}


def select(option_id: str) -> JsonObject:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def _options(params: JsonObject) -> list[JsonObject]:
    options = params.get("options")
    if not isinstance(options, list):
        return []
    return [o for o in options if isinstance(o, dict) and isinstance(o.get("optionId"), str)]


def _first(options: list[JsonObject], *kinds: str) -> str | None:
    for kind in kinds:
        for option in options:
            if option.get("kind") == kind:
                return str(option["optionId"])
    return None


def approve_auto(params: JsonObject) -> JsonObject:
    options = _options(params)
    chosen = _first(options, "allow_always", "allow_once")
    if chosen is None:
        chosen = next(
            (str(o["optionId"]) for o in options if not str(o.get("kind", "")).startswith("reject")), None
        )
    return select(chosen) if chosen is not None else cancelled()


def _approve_once(params: JsonObject) -> JsonObject:
    # Once, not always: every later call is checked again, and no "always" rule is left in the agent's files.
    options = _options(params)
    chosen = _first(options, "allow_once", "allow_always")
    return select(chosen) if chosen is not None else cancelled()


def reject(params: JsonObject) -> JsonObject:
    chosen = _first(_options(params), "reject_once", "reject_always")
    return select(chosen) if chosen is not None else cancelled()


def decide(
    policy: Policy,
    params: JsonObject,
    *,
    identify: Identify,
    tool_call: JsonObject | None = None,
    browser_tools: Collection[str] = (),
) -> JsonObject:
    """The outcome object for one permission request under ``policy``.

    ``tool_call`` is the request's tool call merged over what the agent streamed earlier for the same id
    (Codex sends sparse permission requests); ``browser_tools`` are the tool names the browser offers now.
    """
    if policy == "auto":
        return approve_auto(params)
    if policy == "browser-only":
        tool = browser_identity(params, identify, tool_call)
        if tool is not None and tool in browser_tools:
            return _approve_once(params)
    return reject(params)


def decide_ours(
    policy: Policy,
    params: JsonObject,
    *,
    identify: Identify,
    tool_call: JsonObject | None = None,
    browser_tools: Collection[str] = (),
) -> JsonObject | None:
    """The policy's outcome for a request about one of our own browser tools; ``None`` for any other request,
    which is the person's to answer."""
    if browser_identity(params, identify, tool_call) is None:
        return None
    return decide(policy, params, identify=identify, tool_call=tool_call, browser_tools=browser_tools)


def browser_identity(params: JsonObject, identify: Identify, tool_call: JsonObject | None = None) -> str | None:
    """The name of our server's tool the request is about, as the agent's runtime identifies it, else ``None``."""
    offered = {str(o["optionId"]) for o in _options(params)}
    identity = identify(tool_call or _tool_call(params), offered)
    return identity[1] if identity is not None and identity[0] == SERVER_NAME else None


def _tool_call(params: JsonObject) -> JsonObject:
    value: Any = params.get("toolCall")
    return value if isinstance(value, dict) else {}
