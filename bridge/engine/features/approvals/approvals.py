"""Codex's approval requests and questions → ACP permission requests and elicitations.

Codex asks the client before it runs an escalated command, writes outside the sandbox, widens
its permissions or runs an MCP tool, and when the model asks the user a question. Each of these
*server requests* becomes one request to the ACP client on the session of the request's
``threadId``, and the client's answer becomes Codex's answer:

==========================================  ==================================================
Codex asks                                  the client sees
==========================================  ==================================================
``item/commandExecution/requestApproval``   ``session/request_permission``: allow once, allow
                                            for this session, always allow the proposed command
                                            prefix / network host, reject
``item/fileChange/requestApproval``         ``session/request_permission``: allow once, allow
                                            for this session, reject
``item/permissions/requestApproval``        ``session/request_permission``: for this turn, for
                                            this session, deny
``mcpServer/elicitation/request`` (an MCP   ``session/request_permission``: allow, for this
tool may run?)                              session, always, reject
``mcpServer/elicitation/request`` (other)   ``elicitation/create`` (form or URL mode)
``item/tool/requestUserInput``              ``elicitation/create``: one form field per question
==========================================  ==================================================

An elicitation needs the client's ``elicitation.form`` / ``.url`` capability; without it Codex
gets a clear "no" at once (empty answers, ``decline``), never a request that hangs.

Every request waits, as a :class:`~bridge.engine.core.threads.Pending`, until it is settled
exactly once: :mod:`bridge.engine.features.approvals._questions` keeps that rule (what settles a request,
what the tool call a permission request holds shows meanwhile and after). This module says
what each kind of request looks like to the client, and what its answer means to Codex.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ....acp import air
from ....acp import permissions as acp_permissions
from ....codex import approvals as codex_approvals
from ....codex import items as codex_items
from ....codex import types as codex_types
from ....codex.messages import ItemNotification
from ....jsonrpc import ErrorCode, RequestId
from ...core import AGENT_NAME
from ...core.hub import Hub
from ...core.record_parts import Question
from ...core.threads import ThreadRecord
from ._questions import Asking, Fallbacks, Questions
from ._views import (
    ALLOW_ALWAYS,
    ALLOW_SESSION,
    Choice,
    UserInputForm,
    allow_for_session,
    allow_once,
    command_choices,
    command_title,
    decision,
    decode_elicitation,
    escalated_command,
    file_change_title,
    mcp_answer,
    option,
    permission_kind,
    permissions_title,
    reject_once,
)

log = logging.getLogger(__name__)

#: What Codex gets for a command or a file change when the work is cancelled, and when the
#: user's answer cannot be used.
_APPROVAL = Fallbacks(
    cancel=codex_approvals.ApprovalResponse(decision=codex_approvals.CANCEL),
    decline=codex_approvals.ApprovalResponse(decision=codex_approvals.DECLINE),
)
_ELICITATION = Fallbacks(
    cancel=codex_approvals.McpServerElicitationResponse(action="cancel"),
    decline=codex_approvals.McpServerElicitationResponse(action="decline"),
)
_QUESTIONS = Fallbacks(cancel=codex_approvals.NO_ANSWERS, decline=codex_approvals.NO_ANSWERS)
#: A permission request answered with nothing granted.
_NOTHING = codex_approvals.PermissionsApprovalResponse(permissions={})

P = TypeVar("P", bound=Asking)


def _asks(
    method: str, fallbacks: Fallbacks
) -> Callable[
    [Callable[[Approvals, Question, P], None]], Callable[[Approvals, RequestId, P], None]
]:
    """Turn a handler of a Codex request that asks the user into the request's handler: the
    request is registered first (:meth:`Questions.arrived`), and the handler runs only
    for one that still waits on the user."""

    def handler_of(
        ask: Callable[[Approvals, Question, P], None],
    ) -> Callable[[Approvals, RequestId, P], None]:
        @functools.wraps(ask)
        def on_request(self: Approvals, rid: RequestId, params: P) -> None:
            question = self.requests.arrived(rid, method, params, fallbacks)
            if question is not None:
                ask(self, question, params)

        return on_request

    return handler_of


#: What a file change offers, always the same: once, for the session, or reject.
_FILE_CHANGE_CHOICES = (
    allow_once(decision(codex_approvals.ACCEPT)),
    allow_for_session(decision(codex_approvals.ACCEPT_FOR_SESSION)),
    reject_once(decision(codex_approvals.DECLINE)),
)


class Approvals:
    """Codex's server requests that ask the user; see the module docstring."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.requests = Questions(hub)

    # -- Codex asks ----------------------------------------------------------------------

    @_asks("item/commandExecution/requestApproval", _APPROVAL)
    def command_approval(
        self, question: Question, params: codex_approvals.CommandExecutionRequestApprovalParams
    ) -> None:
        title = command_title(params.command)
        if params.kind == "writeStdin":
            title = f"Send input to {title}"
        if params.networkApprovalContext is not None:
            title = f"{title} (network access to {params.networkApprovalContext.host})"
        # What the tool call shows as its input (as at item/started), and why Codex asks.
        raw_input: dict[str, Any] = {"command": params.command, "cwd": params.cwd}
        if params.commandActions:
            raw_input["commandActions"] = params.commandActions
        if params.reason:
            raw_input["reason"] = params.reason
        # The kind never understates (clients auto-approve reads): see permission_kind. Input
        # to a running process, or a checkpoint, is no command to judge.
        record = self.hub.threads.session(params.threadId)
        assert record is not None  # arrived checked
        kind = permission_kind(
            params.command if params.kind == "command" else None,
            params.commandActions or [],
            escalated=escalated_command(record.settings)
            or params.networkApprovalContext is not None,
        )
        tool_call = acp_permissions.ToolCallUpdate(
            toolCallId=params.itemId,
            title=title,
            kind=kind,
            status="pending",
            rawInput=raw_input,
        )
        self.requests.ask_permission(
            question,
            tool_call,
            command_choices(params),
            item_follows=True,
            presented=air.permission(
                "Allow network access?" if params.networkApprovalContext else "Run command?",
                params.reason,
            ),
        )

    @_asks("item/fileChange/requestApproval", _APPROVAL)
    def file_change_approval(
        self, question: Question, params: codex_approvals.FileChangeRequestApprovalParams
    ) -> None:
        record = self.hub.threads.session(params.threadId)
        assert record is not None  # arrived checked
        # The request names the item only; its changes came with item/started.
        item = _started_item(record.started_items.get(params.itemId))
        changes = item.changes if item is not None and item.changes else []
        raw_input: dict[str, Any] = {"changes": changes}
        if params.reason:
            raw_input["reason"] = params.reason
        if params.grantRoot:
            raw_input["grantRoot"] = params.grantRoot
        paths = [c["path"] for c in changes if isinstance(c.get("path"), str)]
        tool_call = acp_permissions.ToolCallUpdate(
            toolCallId=params.itemId,
            title=file_change_title(changes, record.cwd),
            kind="edit",
            status="pending",
            locations=[acp_permissions.ToolCallLocation(path=p) for p in paths]
            if paths
            else msgspec.UNSET,
            rawInput=raw_input,
        )
        presented = air.permission("Make edits?", params.reason)
        self.requests.ask_permission(
            question, tool_call, _FILE_CHANGE_CHOICES, item_follows=True, presented=presented
        )

    @_asks("item/permissions/requestApproval", Fallbacks(cancel=_NOTHING, decline=_NOTHING))
    def permissions_approval(
        self, question: Question, params: codex_approvals.PermissionsRequestApprovalParams
    ) -> None:
        raw_input: dict[str, Any] = {"permissions": params.permissions}
        if params.reason:
            raw_input["reason"] = params.reason
        # No item exists for a permission request (Codex sends no item/started for
        # it): the bridge introduces the tool call, and closes it once settled.
        tool_call = acp_permissions.ToolCallUpdate(
            toolCallId=params.itemId,
            title=permissions_title(params.permissions),
            kind="other",
            status="pending",
            rawInput=raw_input,
        )

        grant = codex_approvals.PermissionsApprovalResponse
        choices = [
            allow_once(grant(permissions=params.permissions, scope="turn"), "Allow for this turn"),
            allow_for_session(grant(permissions=params.permissions, scope="session")),
            reject_once(_NOTHING, "Deny"),
        ]
        self.requests.ask_permission(
            question,
            tool_call,
            choices,
            item_follows=False,
            presented=air.permission("Grant permissions?", params.reason),
        )

    @_asks("item/tool/requestUserInput", _QUESTIONS)
    def user_input(
        self, question: Question, params: codex_approvals.ToolRequestUserInputParams
    ) -> None:
        if not self.requests.client_can_elicit("form"):
            log.info(
                "Codex asks %d question(s), but the client declared no form elicitation: "
                "answering none (the model goes on without)",
                len(params.questions),
            )
            self.requests.settle(question, codex_approvals.NO_ANSWERS)
            return
        form = UserInputForm(params.questions)
        question.read_answer = lambda raw: form.answers(decode_elicitation(raw, question.method))
        request = acp_permissions.FormElicitationRequest(
            sessionId=params.threadId, message=form.message, requestedSchema=form.schema
        )
        self.requests.ask(question, "elicitation/create", request)

    @_asks("mcpServer/elicitation/request", _ELICITATION)
    def mcp_elicitation(
        self, question: Question, params: codex_approvals.McpServerElicitationRequestParams
    ) -> None:
        approval = params.approval_meta()
        if approval is not None:
            self._ask_mcp_tool_approval(question, params, approval)
            return
        if params.mode == "form" and self.requests.client_can_elicit("form"):
            schema = params.requestedSchema if isinstance(params.requestedSchema, dict) else {}
            question.read_answer = lambda raw: mcp_answer(decode_elicitation(raw, question.method))
            request: msgspec.Struct = acp_permissions.FormElicitationRequest(
                sessionId=params.threadId,
                message=params.message,
                requestedSchema=schema,
                meta=_elicitation_meta(params),
            )
        elif (
            params.mode == "url"
            and params.url
            and params.elicitationId
            and self.requests.client_can_elicit("url")
        ):
            question.read_answer = lambda raw: mcp_answer(decode_elicitation(raw, question.method))
            request = acp_permissions.UrlElicitationRequest(
                sessionId=params.threadId,
                message=params.message,
                elicitationId=params.elicitationId,
                url=params.url,
                meta=_elicitation_meta(params),
            )
        else:
            log.info(
                "MCP server %s (environment %s) asks for input (%s mode), which the client "
                "cannot show: declining",
                params.serverName,
                params.environmentId,
                params.mode,
            )
            self.requests.settle(question, question.decline)
            return
        self.requests.ask(question, "elicitation/create", request)

    def _ask_mcp_tool_approval(
        self,
        question: Question,
        params: codex_approvals.McpServerElicitationRequestParams,
        meta: dict[str, Any],
    ) -> None:
        tool = meta.get("tool_title") or meta.get("tool_name") or "a tool"
        tool_name = meta.get("tool_name")
        # The tool call was announced at item/started; the elicitation does not name it.
        record = self.hub.threads.session(params.threadId)
        started = record.started_items.values() if record is not None else []
        found = next(
            (
                item.id
                for item in map(_started_item, reversed(list(started)))
                if item is not None
                and item.type == "mcpToolCall"
                and item.server == params.serverName
                and (tool_name is None or item.tool == tool_name)
            ),
            None,
        )
        item_id = found if found is not None else f"mcp-approval-{question.codex_id}"
        tool_call = acp_permissions.ToolCallUpdate(
            toolCallId=item_id,
            title=f"{params.serverName}: {tool}",
            status="pending",
            rawInput=meta.get("tool_params"),
        )
        persist = meta.get(codex_approvals.PERSIST_KEY)
        persist = persist if isinstance(persist, list) else []
        accept = codex_approvals.McpServerElicitationResponse(action="accept", content=None)
        choices = [allow_once(accept)]
        for scope, option_id, name in (
            ("session", ALLOW_SESSION, "Allow for this session"),
            ("always", ALLOW_ALWAYS, "Always allow"),
        ):
            if scope in persist:
                remembered = codex_approvals.McpServerElicitationResponse(
                    action="accept", content=None, meta={codex_approvals.PERSIST_KEY: scope}
                )
                choices.append(Choice(option(option_id, name, "allow_always"), remembered))
        choices.append(reject_once(question.decline))
        self.requests.ask_permission(
            question,
            tool_call,
            choices,
            item_follows=found is not None,
            meta=_elicitation_meta(params),
        )

    def legacy_approval(self, rid: RequestId, _params: object) -> None:
        log.warning(
            "Codex sent a legacy (v1 API) approval request %s; this bridge starts turns with "
            "turn/start only, so it declines it",
            rid,
        )
        # An error reply is how Codex learns a client cannot approve: it rejects the
        # action ("approval request failed") and the turn goes on.
        self.hub.codex.refuse(
            rid,
            ErrorCode.METHOD_NOT_FOUND,
            f"{AGENT_NAME} does not answer legacy approval requests; declined",
        )

    # -- what ends a question besides the answer (see bridge.engine.features.approvals._questions) ------------

    def cancel_thread(self, thread_id: str) -> None:
        """Answer ``cancel`` to everything Codex asks on behalf of this thread (a cascade)."""
        self.requests.cancel_thread(thread_id)

    def session_cancelled(self, session_id: str) -> None:
        self.requests.session_cancelled(session_id)

    def thread_forgotten(self, record: ThreadRecord, *, answer: bool = True) -> None:
        """The thread closed (or its root did); without ``answer``, what it asked is left
        to the other clients of a shared Codex."""
        self.requests.thread_forgotten(record, answer=answer)
        record.started_items.clear()

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        self.requests.turn_completed(note)
        record = self.hub.threads.get(note.threadId)
        if record is not None:
            record.started_items.clear()

    def resolved(self, note: codex_approvals.ServerRequestResolved) -> None:
        self.requests.resolved(note)

    def codex_lost(self, reason: str) -> None:
        self.requests.codex_lost(reason)
        for record in self.hub.threads:
            record.started_items.clear()

    def client_lost(self) -> None:
        self.requests.client_lost()

    def others_turn(self, record: ThreadRecord) -> bool:
        """Whether ``record`` works for a turn another client of a shared Codex started."""
        return self.requests.others_turn(record)

    # -- the items a request names -----------------------------------------------------------

    def item_started(self, note: ItemNotification) -> None:
        if isinstance(
            note.item, codex_items.FileChangeItem | codex_items.McpToolCallItem
        ) and self.hub.threads.session(note.threadId):
            # Kept raw: a permission request shows the patch's changes as Codex wrote them.
            self.hub.threads.record(note.threadId).started_items[note.item.id] = note.raw

    def item_completed(self, note: ItemNotification) -> None:
        record = self.hub.threads.get(note.threadId)
        if record is not None:
            record.started_items.pop(note.item.id, None)


def _started_item(raw: Raw | None) -> codex_approvals.StartedItem | None:
    if raw is None:
        return None
    try:
        return msgspec.json.decode(raw, type=codex_approvals.StartedItem)
    except msgspec.ValidationError:
        return None


def _elicitation_meta(
    params: codex_approvals.McpServerElicitationRequestParams,
) -> dict[str, Any] | UnsetType:
    """What the client learns of where an MCP elicitation comes from beyond its session:
    the MCP server, and the environment it runs in when Codex names one."""
    if params.environmentId is None:
        return UNSET
    return {"mcpServer": params.serverName, "environmentId": params.environmentId}
