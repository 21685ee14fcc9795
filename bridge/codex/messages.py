"""Codex's messages as the bridge reads them: one type per method, decoded once.

:data:`NOTIFICATIONS` and :data:`REQUESTS` map each method the bridge handles
to the Struct its ``params`` decode into (beside :mod:`bridge.codex.methods`,
the generated list of everything Codex may send). The engine decodes a
message with :func:`decode_notification` / :func:`decode_request` before any
feature sees it, and hands the same typed value to every feature that reacts
to it. A method the bridge does not handle decodes into :class:`Untyped`,
which keeps only the thread it concerns (the sub-agent gate needs that much).
:func:`params_type` names the type a method's params decode into, as the
engine's routing table (:mod:`bridge.engine.core.codex_routing`) lists them.

The streamed answer is most of what Codex sends: :func:`streamed_delta`
decodes an ``item/agentMessage/delta`` written as Codex writes it in one pass
(envelope and params together) into the same
:class:`~bridge.codex.types.AgentMessageDelta` the general way gives, for the
same route; anything else is left to the general way.

Items are decoded with their notification: :class:`ItemNotification`'s
``item`` is a :data:`ThreadItem`, a known item, an :class:`UnknownItem` (a type
this bridge does not know yet: Codex adds some between releases) or a
:class:`MalformedItem` (a known type whose members do not fit: shown as
failed where it was announced, never a crash).
"""

from __future__ import annotations

import logging
from typing import Any, TypeAlias

import msgspec
from msgspec import Raw

from ..jsonrpc.peer import MAX_DEPTH
from ..wire import lazy_decoder
from . import account, approvals, items, mcp, palette, settings, threads, types

log = logging.getLogger(__name__)


class Untyped(msgspec.Struct):
    """The params of a method the bridge does not read: only the thread they concern."""

    threadId: str = ""


class MalformedItem(msgspec.Struct):
    """An item of a known type whose members do not decode."""

    type: str
    id: str
    raw: Raw
    error: str


ThreadItem: TypeAlias = (
    types.KnownItem
    | items.ToolItem
    | items.CollabAgentToolCallItem
    | types.UnknownItem
    | MalformedItem
)


class ItemNotification(msgspec.Struct):
    """``item/started`` and ``item/completed``: the item decoded, and kept raw for
    the few readers that pass Codex's own members on (a patch's changes)."""

    threadId: str
    turnId: str
    item: ThreadItem
    raw: Raw


class _ItemEnvelope(msgspec.Struct):
    threadId: str
    item: Raw
    turnId: str = ""


class _ItemTag(msgspec.Struct):
    type: str = ""
    id: str = ""


#: The params type of every notification the bridge reads.
NOTIFICATIONS: dict[str, type[Any]] = {
    "account/login/completed": account.AccountLoginCompleted,
    "account/updated": account.AccountUpdated,
    "account/rateLimits/updated": palette.RateLimitsUpdated,
    "error": types.ErrorNotification,
    "item/agentMessage/delta": types.AgentMessageDelta,
    "item/commandExecution/outputDelta": items.CommandExecutionOutputDelta,
    "item/commandExecution/terminalInteraction": items.TerminalInteraction,
    "item/completed": _ItemEnvelope,
    "item/fileChange/patchUpdated": items.FileChangePatchUpdated,
    "item/mcpToolCall/progress": items.McpToolCallProgress,
    "mcpServer/oauthLogin/completed": mcp.McpServerOauthLoginCompleted,
    "mcpServer/startupStatus/updated": mcp.McpServerStartupStatus,
    "item/reasoning/summaryPartAdded": types.ReasoningSummaryPartAdded,
    "item/reasoning/summaryTextDelta": types.ReasoningSummaryTextDelta,
    "item/started": _ItemEnvelope,
    "serverRequest/resolved": approvals.ServerRequestResolved,
    "thread/archived": threads.ThreadGone,
    "thread/closed": threads.ThreadGone,
    "thread/deleted": threads.ThreadGone,
    "thread/environment/connected": types.EnvironmentConnection,
    "thread/environment/disconnected": types.EnvironmentConnection,
    "thread/name/updated": items.ThreadNameUpdated,
    "thread/settings/updated": settings.ThreadSettingsUpdated,
    "thread/started": types.ThreadStarted,
    "thread/status/changed": types.ThreadStatusChanged,
    "thread/tokenUsage/updated": types.ThreadTokenUsageUpdated,
    "turn/completed": types.TurnNotification,
    "turn/diff/updated": types.TurnDiffUpdated,
    "turn/plan/updated": items.TurnPlanUpdated,
    "turn/started": types.TurnNotification,
}


class LegacyApprovalParams(msgspec.Struct):
    """``execCommandApproval`` / ``applyPatchApproval`` (Codex's removed v1 API): declined unread."""

    conversationId: str = ""


#: Experimental requests an older Codex makes that the bridge answers: not in the
#: generated list of what the pinned Codex sends, yet no sign of a corrupt recording.
RETIRED_REQUESTS = frozenset({"currentTime/read"})

#: The params type of every request Codex makes that the bridge answers.
REQUESTS: dict[str, type[Any]] = {
    "item/commandExecution/requestApproval": approvals.CommandExecutionRequestApprovalParams,
    "item/fileChange/requestApproval": approvals.FileChangeRequestApprovalParams,
    "item/permissions/requestApproval": approvals.PermissionsRequestApprovalParams,
    "item/tool/requestUserInput": approvals.ToolRequestUserInputParams,
    "mcpServer/elicitation/request": approvals.McpServerElicitationRequestParams,
    "execCommandApproval": LegacyApprovalParams,
    "applyPatchApproval": LegacyApprovalParams,
    "currentTime/read": types.CurrentTimeReadParams,
}


class _AgentMessageDeltaMessage(msgspec.Struct, forbid_unknown_fields=True):
    """A whole ``item/agentMessage/delta`` notification: envelope and params in one."""

    method: str
    params: types.AgentMessageDelta
    #: When app-server emitted it: Codex (0.169 on) stamps every notification so, after
    #: ``params``; unread, but without it no real delta would take this way.
    emittedAtMs: int | None = None


AGENT_MESSAGE_DELTA = "item/agentMessage/delta"
#: How Codex begins every ``item/agentMessage/delta`` it writes (members in this order).
AGENT_MESSAGE_DELTA_HEAD = b'{"method":"item/agentMessage/delta","params":'
_AGENT_MESSAGE_DELTA = msgspec.json.Decoder(_AgentMessageDeltaMessage)
_DELTA_HEAD_LEN = len(AGENT_MESSAGE_DELTA_HEAD)
#: A message this short cannot nest deeper than the peer accepts (JSON nests at most
#: half its length deep), so reading it without the peer skips no check.
_SHALLOW = 2 * MAX_DEPTH


#: The type each method's params decode into (a request's, were a method both).
_PARAMS: dict[str, type[Any]] = {**NOTIFICATIONS, **REQUESTS}
#: Their decoders, each built at the first message of its method or by
#: :func:`prepare_decoders` (``Engine.prepare``, once Codex has been asked for its
#: handshake), not at import: all of them cost ~3.5 ms, which the engine's start (and its
#: answer to ``initialize``) would wait for.
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}
_UNTYPED = msgspec.json.Decoder(Untyped)
_ITEM_TAG = msgspec.json.Decoder(_ItemTag)
_KNOWN_ITEM = lazy_decoder(types.KnownItem)
_TOOL_ITEM = lazy_decoder(items.ToolItem)
_COLLAB_ITEM = lazy_decoder(items.CollabAgentToolCallItem)
_KNOWN_TYPES = frozenset({"userMessage", "agentMessage", "reasoning", "plan"})

DecodeError = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)


def decode_params(method: str, raw: Raw) -> Any:
    """The typed params of a notification or request Codex sent.

    Raises ``msgspec.ValidationError`` / ``DecodeError`` when they do not fit
    the method's type; a method the bridge does not read gives :class:`Untyped`.
    """
    decoder = _DECODERS.get(method)
    if decoder is None:
        kind = _PARAMS.get(method)
        if kind is None:
            try:
                return _UNTYPED.decode(raw or b"{}")
            except DecodeError:
                return Untyped()
        decoder = _DECODERS[method] = msgspec.json.Decoder(kind)
    params = decoder.decode(raw or b"null")
    if type(params) is _ItemEnvelope:
        return ItemNotification(
            params.threadId, params.turnId, decode_item(params.item), params.item
        )
    return params


def prepare_decoders() -> None:
    """Build every method's decoder now rather than at its first message."""
    for method, kind in _PARAMS.items():
        if method not in _DECODERS:
            _DECODERS[method] = msgspec.json.Decoder(kind)


def streamed_delta(data: bytes) -> types.AgentMessageDelta | None:
    """``data`` as an ``item/agentMessage/delta`` notification, decoded in one pass;
    ``None`` for anything else: another member (``id``, ``jsonrpc``...), another
    method, params that do not fit, bad JSON, or a message long enough to need the
    peer's depth check. The caller then reads it the general way, which says what
    is wrong with it."""
    # A slice compares faster than bytes.startswith, which parses its arguments.
    if (
        type(data) is not bytes
        or len(data) > _SHALLOW
        or data[:_DELTA_HEAD_LEN] != AGENT_MESSAGE_DELTA_HEAD
    ):
        return None
    try:
        message = _AGENT_MESSAGE_DELTA.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    return message.params if message.method == AGENT_MESSAGE_DELTA else None


def params_type(method: str) -> type[Any]:
    """The type :func:`decode_params` gives for ``method``'s params."""
    kind = NOTIFICATIONS.get(method) or REQUESTS.get(method) or Untyped
    return ItemNotification if kind is _ItemEnvelope else kind


def decode_item(raw: Raw) -> ThreadItem:
    """One item, by its ``type``; never raises."""
    try:
        tag = _ITEM_TAG.decode(raw)
    except msgspec.ValidationError as exc:
        log.warning("Codex sent an item that is not one: %s", exc)
        return MalformedItem("", "", raw, str(exc))
    try:
        if tag.type in _KNOWN_TYPES:
            known: types.KnownItem = _KNOWN_ITEM().decode(raw)
            return known
        if tag.type in items.TOOL_ITEM_TYPES:
            tool: items.ToolItem = _TOOL_ITEM().decode(raw)
            return tool
        if tag.type == "collabAgentToolCall":
            collab: items.CollabAgentToolCallItem = _COLLAB_ITEM().decode(raw)
            return collab
    except msgspec.ValidationError as exc:
        log.warning("Codex %s item %s not understood: %s", tag.type, tag.id, exc)
        return MalformedItem(tag.type, tag.id, raw, str(exc))
    return types.UnknownItem(tag.type, tag.id, raw)


def thread_of(params: Any) -> str:
    """The thread a decoded message concerns ("" for none)."""
    thread_id = getattr(params, "threadId", "")
    return thread_id if isinstance(thread_id, str) else ""
