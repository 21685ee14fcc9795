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

The rule this module exists for: **every Codex request is answered exactly once, and only an
answer the user gave for work that is still wanted authorizes anything.** So a request settles
exactly once, whichever comes first:

- the client answers (an option it was not offered, a malformed answer or an error reply is
  logged and answers Codex with the safe default, ``decline``);
- the client cancels the turn (``session/cancel``) or closes the session: Codex gets ``cancel`` at
  once; the client's later answer is logged and dropped;
- the turn ends (``turn/completed``) or Codex says it stopped waiting
  (``serverRequest/resolved``), or Codex is lost: the client's open request is withdrawn with
  ``$/cancel_request``;
- the client disconnects: Codex gets ``cancel``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ...acp import permissions as acp_permissions
from ...acp import tools as acp_tools
from ...codex import approvals as codex_approvals
from ...codex import items as codex_items
from ...codex import types as codex_types
from ...codex.messages import ItemNotification
from ...jsonrpc import ErrorCode, RequestId
from ...jsonrpc.peer import ErrorObject
from ..core.hub import AGENT_NAME, Hub
from ..core.threads import MAX_DEPTH, Pending, ThreadRecord
from ..views.approval_views import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    ALLOW_SESSION,
    REJECT_ONCE,
    Choice,
    CodexAnswer,
    UserInputForm,
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
)

log = logging.getLogger(__name__)

#: ``_settle``'s answer when Codex no longer waits for one.
_NO_ANSWER: Any = object()

ReadAnswer = Callable[[Raw], CodexAnswer]


class Approvals:
    """Codex's server requests that ask the user; see the module docstring."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._client_gone = False

    # -- Codex asks ----------------------------------------------------------------------

    def command_approval(
        self, rid: RequestId, params: codex_approvals.CommandExecutionRequestApprovalParams
    ) -> None:
        pending = self._arrived(
            rid,
            "item/commandExecution/requestApproval",
            params.threadId,
            params.turnId,
            cancel=codex_approvals.ApprovalResponse(decision=codex_approvals.CANCEL),
            decline=codex_approvals.ApprovalResponse(decision=codex_approvals.DECLINE),
        )
        if pending is None:
            return
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
        assert record is not None  # _arrived checked
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
        self._ask_permission(pending, tool_call, command_choices(params), item_follows=True)

    def file_change_approval(
        self, rid: RequestId, params: codex_approvals.FileChangeRequestApprovalParams
    ) -> None:
        pending = self._arrived(
            rid,
            "item/fileChange/requestApproval",
            params.threadId,
            params.turnId,
            cancel=codex_approvals.ApprovalResponse(decision=codex_approvals.CANCEL),
            decline=codex_approvals.ApprovalResponse(decision=codex_approvals.DECLINE),
        )
        if pending is None:
            return
        record = self.hub.threads.session(params.threadId)
        assert record is not None  # _arrived checked
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
        choices = [
            Choice(option(ALLOW_ONCE, "Allow", "allow_once"), decision(codex_approvals.ACCEPT)),
            Choice(
                option(ALLOW_SESSION, "Allow for this session", "allow_always"),
                decision(codex_approvals.ACCEPT_FOR_SESSION),
            ),
            Choice(option(REJECT_ONCE, "Reject", "reject_once"), decision(codex_approvals.DECLINE)),
        ]
        self._ask_permission(pending, tool_call, choices, item_follows=True)

    def permissions_approval(
        self, rid: RequestId, params: codex_approvals.PermissionsRequestApprovalParams
    ) -> None:
        nothing = codex_approvals.PermissionsApprovalResponse(permissions={})
        pending = self._arrived(
            rid,
            "item/permissions/requestApproval",
            params.threadId,
            params.turnId,
            cancel=nothing,
            decline=nothing,
        )
        if pending is None:
            return
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

        def grant(
            scope: codex_approvals.PermissionGrantScope,
        ) -> codex_approvals.PermissionsApprovalResponse:
            return codex_approvals.PermissionsApprovalResponse(
                permissions=params.permissions, scope=scope
            )

        choices = [
            Choice(option(ALLOW_ONCE, "Allow for this turn", "allow_once"), grant("turn")),
            Choice(
                option(ALLOW_SESSION, "Allow for this session", "allow_always"), grant("session")
            ),
            Choice(option(REJECT_ONCE, "Deny", "reject_once"), nothing),
        ]
        self._ask_permission(pending, tool_call, choices, item_follows=False)

    def user_input(
        self, rid: RequestId, params: codex_approvals.ToolRequestUserInputParams
    ) -> None:
        pending = self._arrived(
            rid,
            "item/tool/requestUserInput",
            params.threadId,
            params.turnId,
            cancel=codex_approvals.NO_ANSWERS,
            decline=codex_approvals.NO_ANSWERS,
        )
        if pending is None:
            return
        if not self._client_can_elicit("form"):
            log.info(
                "Codex asks %d question(s), but the client declared no form elicitation: "
                "answering none (the model goes on without)",
                len(params.questions),
            )
            self._settle(pending, codex_approvals.NO_ANSWERS)
            return
        form = UserInputForm(params.questions)
        pending.read_answer = lambda raw: form.answers(decode_elicitation(raw, pending.method))
        request = acp_permissions.FormElicitationRequest(
            sessionId=params.threadId, message=form.message, requestedSchema=form.schema
        )
        self._ask(pending, "elicitation/create", request)

    def mcp_elicitation(
        self, rid: RequestId, params: codex_approvals.McpServerElicitationRequestParams
    ) -> None:
        pending = self._arrived(
            rid,
            "mcpServer/elicitation/request",
            params.threadId,
            params.turnId,
            cancel=codex_approvals.McpServerElicitationResponse(action="cancel"),
            decline=codex_approvals.McpServerElicitationResponse(action="decline"),
        )
        if pending is None:
            return
        approval = params.approval_meta()
        if approval is not None:
            self._ask_mcp_tool_approval(pending, params, approval)
            return
        if params.mode == "form" and self._client_can_elicit("form"):
            schema = params.requestedSchema if isinstance(params.requestedSchema, dict) else {}
            pending.read_answer = lambda raw: mcp_answer(decode_elicitation(raw, pending.method))
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
            and self._client_can_elicit("url")
        ):
            pending.read_answer = lambda raw: mcp_answer(decode_elicitation(raw, pending.method))
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
            self._settle(pending, pending.decline)
            return
        self._ask(pending, "elicitation/create", request)

    def _ask_mcp_tool_approval(
        self,
        pending: Pending,
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
        item_id = found if found is not None else f"mcp-approval-{pending.codex_id}"
        tool_call = acp_permissions.ToolCallUpdate(
            toolCallId=item_id,
            title=f"{params.serverName}: {tool}",
            status="pending",
            rawInput=meta.get("tool_params"),
        )
        persist = meta.get(codex_approvals.PERSIST_KEY)
        persist = persist if isinstance(persist, list) else []
        accept = codex_approvals.McpServerElicitationResponse(action="accept", content=None)
        choices = [Choice(option(ALLOW_ONCE, "Allow", "allow_once"), accept)]
        for scope, option_id, name in (
            ("session", ALLOW_SESSION, "Allow for this session"),
            ("always", ALLOW_ALWAYS, "Always allow"),
        ):
            if scope in persist:
                remembered = codex_approvals.McpServerElicitationResponse(
                    action="accept", content=None, meta={codex_approvals.PERSIST_KEY: scope}
                )
                choices.append(Choice(option(option_id, name, "allow_always"), remembered))
        choices.append(Choice(option(REJECT_ONCE, "Reject", "reject_once"), pending.decline))
        self._ask_permission(
            pending,
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
        self.hub.refuse_codex(
            rid,
            ErrorCode.METHOD_NOT_FOUND,
            f"{AGENT_NAME} does not answer legacy approval requests; declined",
        )

    # -- the lifecycle of one question -----------------------------------------------------

    def _arrived(
        self,
        rid: RequestId,
        method: str,
        thread_id: str,
        turn_id: str | None,
        *,
        cancel: CodexAnswer,
        decline: CodexAnswer,
    ) -> Pending | None:
        """Register a Codex request; ``None`` when it is already handled (settled or re-sent)."""
        record = self.hub.threads.session(thread_id)
        if record is not None and rid in record.pending:
            # thread/resume re-sends a pending request with its original id.
            log.info("Codex re-sent request %s (%s); still waiting on the client", rid, method)
            return None
        pending = Pending(rid, method, thread_id, turn_id, cancel=cancel, decline=decline)
        if record is None:
            log.warning(
                "Codex %s %s for thread %s, which no ACP session shows: declining",
                method,
                rid,
                thread_id,
            )
            self._settle(pending, decline)
            return None
        if self._client_gone:
            self._settle(pending, _NO_ANSWER if self.others_turn(record) else cancel)
            return None
        record.pending[rid] = pending
        if self._turn_cancelled(record, turn_id):
            # The user already cancelled this turn: nothing of it is authorized.
            log.info("Codex %s %s for a cancelled turn: cancelling", method, rid)
            self._settle(pending, cancel)
            return None
        return pending

    def _ask_permission(
        self,
        pending: Pending,
        tool_call: acp_permissions.ToolCallUpdate,
        choices: list[Choice],
        *,
        item_follows: bool,
        meta: dict[str, Any] | UnsetType = UNSET,
    ) -> None:
        by_id = {choice.option.optionId: choice.answer for choice in choices}

        def read_answer(raw: Raw) -> CodexAnswer:
            try:
                outcome = msgspec.json.decode(
                    raw, type=acp_permissions.RequestPermissionResponse
                ).outcome
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                log.warning(
                    "malformed permission answer for %s: %s; declining", pending.method, exc
                )
                return pending.decline
            if outcome.outcome == "cancelled":
                return pending.cancel
            if outcome.outcome == "selected" and outcome.optionId in by_id:
                return by_id[outcome.optionId]
            log.warning(
                "the client answered %s with %s %r, which was not offered (offered: %s); declining",
                pending.method,
                outcome.outcome,
                outcome.optionId,
                ", ".join(by_id),
            )
            return pending.decline

        pending.read_answer = read_answer
        request = acp_permissions.RequestPermissionRequest(
            sessionId=pending.thread_id,
            toolCall=tool_call,
            options=[choice.option for choice in choices],
            meta=meta,
        )
        pending.item_follows = item_follows
        self._hold_pending(pending, request)
        self._ask(pending, "session/request_permission", request)

    def _hold_pending(
        self, pending: Pending, request: acp_permissions.RequestPermissionRequest
    ) -> None:
        """Show the tool call the request names as ``pending`` (ACP: awaiting approval) on the
        session asked while the user decides: Codex announced a command as running
        (``item/started``) before asking whether it may run. A tool call never shown there
        (a hidden sub-agent's command asked on its root; a request Codex made no item for)
        is introduced first: a client sees no tool call id it was not told of."""
        addressed = self._addressed(pending.thread_id, request)
        assert isinstance(addressed, acp_permissions.RequestPermissionRequest)
        target = self.hub.threads.session(addressed.sessionId)
        tool_call = addressed.toolCall
        if target is None:
            return
        pending.tool_call = (target.id, tool_call.toolCallId)
        if tool_call.toolCallId in target.announced_tools:
            if self._running(pending):
                self.hub.update(
                    target.id,
                    acp_tools.ToolCallUpdate(toolCallId=tool_call.toolCallId, status="pending"),
                )
            return
        self._introduce(pending, target, tool_call)

    def _introduce(
        self, pending: Pending, target: ThreadRecord, tool_call: acp_permissions.ToolCallUpdate
    ) -> None:
        target.announced_tools.add(tool_call.toolCallId)
        self.hub.update(
            target.id,
            acp_tools.ToolCall(
                toolCallId=tool_call.toolCallId,
                title=tool_call.title if isinstance(tool_call.title, str) else "Permission",
                kind=tool_call.kind or UNSET,
                status="pending",
                locations=[
                    acp_tools.ToolCallLocation(path=location.path, line=location.line)
                    for location in tool_call.locations or []
                ]
                or UNSET,
                rawInput=tool_call.rawInput,
            ),
        )
        pending.introduced = True
        asking = self.hub.threads.session(pending.thread_id)
        if pending.item_follows and asking is not None and asking is not target:
            # The hidden agent's item drives the tool call where it was introduced.
            _target, agent = self.hub.threads.ask_target(pending.thread_id)
            asking.shown_on[tool_call.toolCallId] = (target.id, agent or "a sub-agent")

    def _running(self, pending: Pending) -> bool:
        """The item the request names has started and not finished (nor been ended)."""
        assert pending.tool_call is not None
        record = self.hub.threads.get(pending.thread_id)
        call = record.tool_calls.get(pending.tool_call[1]) if record is not None else None
        return call is not None and not call.completed

    def _ask(self, pending: Pending, method: str, params: msgspec.Struct) -> None:
        params = self._addressed(pending.thread_id, params)

        def answered(raw: Raw) -> None:
            self._client_answered(pending, raw)

        def refused(error: ErrorObject) -> None:
            self._client_refused(pending, error)

        pending.client_id = self.hub.client_request(method, params, answered, refused)

    def _addressed(self, thread_id: str, params: msgspec.Struct) -> msgspec.Struct:
        """Ask a hidden sub-agent's question on its root session, saying which agent asks."""
        target, agent = self.hub.threads.ask_target(thread_id)
        if target == thread_id:
            return params
        changes: dict[str, Any] = {"sessionId": target}
        tool_call = getattr(params, "toolCall", None)
        message = getattr(params, "message", None)
        if isinstance(tool_call, acp_permissions.ToolCallUpdate) and isinstance(
            tool_call.title, str
        ):
            changes["toolCall"] = msgspec.structs.replace(
                tool_call, title=f"{agent}: {tool_call.title}"
            )
        elif isinstance(message, str):
            changes["message"] = f"{agent} asks: {message}"
        return msgspec.structs.replace(params, **changes)

    def cancel_thread(self, thread_id: str) -> None:
        """Answer ``cancel`` to everything Codex asks on behalf of this thread (a cascade)."""
        for pending in self._of_thread(thread_id):
            self._settle(pending, pending.cancel, withdraw=True)

    def _client_answered(self, pending: Pending, raw: Raw) -> None:
        if pending.settled:
            log.info(
                "late answer to %s (Codex request %s) dropped: it was already settled",
                pending.method,
                pending.codex_id,
            )
            return
        pending.client_answered = True
        record = self.hub.threads.session(pending.thread_id)
        if record is not None and self._turn_cancelled(record, pending.turn_id):
            # The turn is being cancelled (session/close, a cancel still on its way):
            # an answer given now authorizes nothing.
            log.info("answer to %s after its turn was cancelled: cancelling", pending.method)
            self._settle(pending, pending.cancel)
            return
        assert pending.read_answer is not None
        answer = pending.read_answer(raw)
        self._settle(pending, answer)
        if pending.after_answer is not None:
            pending.after_answer(answer)

    def _client_refused(self, pending: Pending, error: ErrorObject) -> None:
        if pending.settled:
            log.debug("client error for settled %s: %s", pending.method, error.message)
            return
        pending.client_answered = True
        log.warning(
            "the client answered %s with an error (%s); declining", pending.method, error.message
        )
        self._settle(pending, pending.decline)

    def _settle(self, pending: Pending, answer: CodexAnswer, *, withdraw: bool = False) -> None:
        """The one place a Codex request is answered (``_NO_ANSWER``: Codex stopped waiting).

        ``withdraw`` also takes back the client's request if it is still open, so its
        dialog closes; a late answer to it is dropped.
        """
        if pending.settled:
            return
        pending.settled = True
        record = self.hub.threads.get(pending.thread_id)
        if record is not None and record.pending.get(pending.codex_id) is pending:
            del record.pending[pending.codex_id]
        if answer is not _NO_ANSWER:
            self.hub.answer_codex(pending.codex_id, answer)
        if pending.tool_call is not None:
            self._tool_call_settled(pending, answer)
        if withdraw and pending.client_id is not None and not pending.client_answered:
            self.hub.client_notification(
                "$/cancel_request",
                acp_permissions.CancelRequestNotification(requestId=pending.client_id),
            )

    def _tool_call_settled(self, pending: Pending, answer: CodexAnswer) -> None:
        """What the tool call the request held ``pending`` shows once it is settled.

        Never a success Codex did not report. Where an item follows, it tells what happened:
        allowed, the call is ``in_progress`` (the command runs) until the item completes;
        declined or cancelled, the item (``declined``) or the turn's end closes a call of the
        asking thread, and one introduced elsewhere ends ``failed`` now (its hidden agent's
        item is no longer followed). Where no item follows, the tool call stands for the
        question: ``completed`` when allowed (the permissions were granted: that was all
        there was to do), else ``failed``.
        """
        assert pending.tool_call is not None
        session_id, call_id = pending.tool_call
        record = self.hub.threads.get(pending.thread_id)
        if record is not None and call_id in record.ended_tools:
            return  # its turn ended first, and ended it
        allowed = answer is not _NO_ANSWER and answer not in (pending.decline, pending.cancel)
        status: acp_tools.ToolCallStatus
        if pending.item_follows:
            if allowed or (answer is _NO_ANSWER and self.hub.codex_lost_reason is None):
                # Allowed (or answered elsewhere: Codex resolved it): the item tells.
                if allowed and self._running(pending):
                    self.hub.update(
                        session_id,
                        acp_tools.ToolCallUpdate(toolCallId=call_id, status="in_progress"),
                    )
                return
            if not pending.introduced:
                return
            followed = record is not None and record.shown_on.pop(call_id, None) is not None
            if not followed and record is not None and record.id != session_id:
                return  # no longer followed: its item or its turn's end has ended it
            status = "failed"
        else:
            status = "completed" if allowed else "failed"
        self.hub.update(session_id, acp_tools.ToolCallUpdate(toolCallId=call_id, status=status))

    def _client_can_elicit(self, mode: str) -> bool:
        # ACP: the capability for a mode is declared by a non-null member ({}).
        declared = self.hub.client_capabilities.elicitation
        return isinstance(declared, dict) and declared.get(mode) is not None

    def _of_thread(self, thread_id: str) -> list[Pending]:
        record = self.hub.threads.get(thread_id)
        return list(record.pending.values()) if record is not None else []

    def _turn_cancelled(self, record: ThreadRecord, turn_id: str | None) -> bool:
        """The user cancelled the work this turn does: the root's prompt (it is, or may
        be, this turn), or a sub-agent's turn whose work was cancelled."""
        turn = record.turn
        if turn is None:
            return False
        if turn.request_id is not None:
            return turn.cancel_requested and (
                turn.id is None or turn_id is None or turn.id == turn_id
            )
        return turn.id == turn_id and self.hub.threads.work_cancelled(record)

    # -- what ends a question besides the answer -------------------------------------------------

    def session_cancelled(self, session_id: str) -> None:
        for pending in self._of_thread(session_id):
            # The client answers its own open requests `cancelled` (ACP's rule).
            self._settle(pending, pending.cancel)

    def thread_forgotten(self, record: ThreadRecord, *, answer: bool = True) -> None:
        """The thread closed (or its root did): nothing it asked is wanted any more here.
        Without ``answer`` (another client's turn goes on) Codex's requests are left to the
        other clients, as Codex takes the first answer of any."""
        for pending in list(record.pending.values()):
            self._settle(pending, pending.cancel if answer else _NO_ANSWER, withdraw=True)
        record.started_items.clear()

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        for pending in self._of_thread(note.threadId):
            if pending.turn_id == note.turn.id:
                # Codex drops what the turn waited on (serverRequest/resolved follows);
                # answering `cancel` too costs nothing and can never leave it waiting.
                self._settle(pending, pending.cancel, withdraw=True)
        record = self.hub.threads.get(note.threadId)
        if record is not None:
            record.started_items.clear()

    def resolved(self, note: codex_approvals.ServerRequestResolved) -> None:
        record = self.hub.threads.get(note.threadId)
        pending = record.pending.get(note.requestId) if record is not None else None
        if pending is not None:
            log.info("Codex resolved %s %s itself", pending.method, pending.codex_id)
            self._settle(pending, _NO_ANSWER, withdraw=True)

    def codex_lost(self, _reason: str) -> None:
        for record in self.hub.threads:
            for pending in list(record.pending.values()):
                self._settle(pending, _NO_ANSWER, withdraw=True)
            record.started_items.clear()

    def client_lost(self) -> None:
        self._client_gone = True
        for record in self.hub.threads:
            # Another client's turn: its requests are left to that client.
            others = self.others_turn(record)
            for pending in list(record.pending.values()):
                self._settle(pending, _NO_ANSWER if others else pending.cancel)

    def others_turn(self, record: ThreadRecord) -> bool:
        """Whether ``record`` works for a turn another client of a shared Codex started (on
        its root session): Codex asks every client and takes the first answer."""
        root: ThreadRecord | None = record
        for _ in range(MAX_DEPTH):
            if root is None or root.parent_id is None:
                break
            root = self.hub.threads.get(root.parent_id)
        return root is not None and root.turn is not None and root.turn.foreign

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
