"""Codex's requests that wait on the user, from arrival until each is settled exactly once.

:mod:`bridge.engine.features.approvals.approvals` decides what each kind of Codex request looks
like to the client; this module keeps the rule they all follow: **every Codex request is
answered exactly once, and only an answer the user gave for work that is still wanted
authorizes anything.** A request (a :class:`~bridge.engine.core.threads.Question` in its
thread's record) settles exactly once, in :meth:`Questions.settle`, whichever comes
first:

- the client answers (an option it was not offered, a malformed answer or an error reply is
  logged and answers Codex with the safe default, ``decline``);
- the client cancels the turn (``session/cancel``) or closes the session: Codex gets ``cancel`` at
  once; the client's later answer is logged and dropped;
- the turn ends (``turn/completed``) or Codex says it stopped waiting
  (``serverRequest/resolved``), or Codex is lost: the client's open request is withdrawn with
  ``$/cancel_request``;
- the client disconnects: Codex gets ``cancel``.

A permission request names a tool call: while the user decides, the call shows
``pending`` (ACP: awaiting approval) on the session asked; once settled it shows what
Codex reports, never a success Codex did not report (:meth:`Questions._tool_call_answered`).
A hidden sub-agent's request is asked on its root session, naming the agent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ....acp import air
from ....acp import permissions as acp_permissions
from ....acp import tools as acp_tools
from ....codex import approvals as codex_approvals
from ....codex import types as codex_types
from ....jsonrpc import RequestId
from ....jsonrpc.peer import ErrorObject
from ...core.hub import Hub
from ...core.record_parts import Question, TurnKind
from ...core.threads import MAX_DEPTH, ThreadRecord
from ._views import Choice, CodexAnswer

log = logging.getLogger(__name__)

#: :meth:`Questions.settle`'s answer when Codex no longer waits for one.
NO_ANSWER: Any = object()


class Asking(Protocol):
    """What every Codex request that asks the user names: its thread, and its turn."""

    @property
    def threadId(self) -> str: ...

    @property
    def turnId(self) -> str | None: ...


class Fallbacks(NamedTuple):
    """What Codex gets when the work is cancelled, and when an answer cannot be used."""

    cancel: CodexAnswer
    decline: CodexAnswer


class Questions:
    """Every Codex request waiting on the user; see the module docstring."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: The client disconnected: what Codex asks from now on is not asked.
        self._client_gone = False

    # -- the lifecycle of one question -----------------------------------------------------

    def arrived(
        self, rid: RequestId, method: str, params: Asking, fallbacks: Fallbacks
    ) -> Question | None:
        """Register a Codex request; ``None`` when it is already handled (settled or re-sent)."""
        thread_id, turn_id = params.threadId, params.turnId
        cancel, decline = fallbacks
        record = self.hub.threads.session(thread_id)
        if record is not None and rid in record.questions:
            # thread/resume re-sends a pending request with its original id.
            log.info("Codex re-sent request %s (%s); still waiting on the client", rid, method)
            return None
        question = Question(rid, method, thread_id, turn_id, cancel=cancel, decline=decline)
        if record is None:
            log.warning(
                "Codex %s %s for thread %s, which no ACP session shows: declining",
                method,
                rid,
                thread_id,
            )
            self.settle(question, decline)
            return None
        if self._client_gone:
            self.settle(question, NO_ANSWER if self.others_turn(record) else cancel)
            return None
        record.questions[rid] = question
        if self._turn_cancelled(record, turn_id):
            # The user already cancelled this turn: nothing of it is authorized.
            log.info("Codex %s %s for a cancelled turn: cancelling", method, rid)
            self.settle(question, cancel)
            return None
        return question

    def ask_permission(
        self,
        question: Question,
        tool_call: acp_permissions.ToolCallUpdate,
        choices: Sequence[Choice],
        *,
        item_follows: bool,
        meta: dict[str, Any] | UnsetType = UNSET,
        presented: dict[str, Any] | None = None,
    ) -> None:
        """``presented``: AIR's presentation record of the request (its title, Codex's
        reason), sent to an AIR client only."""
        by_id = {choice.option.optionId: choice.answer for choice in choices}
        if presented is not None and self.hub.handshake.air is not None:
            existing = meta if isinstance(meta, dict) else {}
            meta = {**existing, **air.meta({"permission": presented})}

        def read_answer(raw: Raw) -> CodexAnswer:
            try:
                outcome = msgspec.json.decode(
                    raw, type=acp_permissions.RequestPermissionResponse
                ).outcome
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                log.warning(
                    "malformed permission answer for %s: %s; declining", question.method, exc
                )
                return question.decline
            if outcome.outcome == "cancelled":
                return question.cancel
            if outcome.outcome == "selected" and outcome.optionId in by_id:
                return by_id[outcome.optionId]
            log.warning(
                "the client answered %s with %s %r, which was not offered (offered: %s); declining",
                question.method,
                outcome.outcome,
                outcome.optionId,
                ", ".join(by_id),
            )
            return question.decline

        question.read_answer = read_answer
        request = acp_permissions.RequestPermissionRequest(
            sessionId=question.thread_id,
            toolCall=tool_call,
            options=[choice.option for choice in choices],
            meta=meta,
        )
        question.item_follows = item_follows
        self._hold_question(question, request)
        self.ask(question, "session/request_permission", request)

    def _hold_question(
        self, question: Question, request: acp_permissions.RequestPermissionRequest
    ) -> None:
        """Show the tool call the request names as ``pending`` (ACP: awaiting approval) on the
        session asked while the user decides: Codex announced a command as running
        (``item/started``) before asking whether it may run. A tool call never shown there
        (a hidden sub-agent's command asked on its root; a request Codex made no item for)
        is introduced first: a client sees no tool call id it was not told of."""
        addressed = self._addressed(question.thread_id, request)
        assert isinstance(addressed, acp_permissions.RequestPermissionRequest)
        target = self.hub.threads.session(addressed.sessionId)
        tool_call = addressed.toolCall
        if target is None:
            return
        question.tool_call = (target.id, tool_call.toolCallId)
        if tool_call.toolCallId in target.tools.announced:
            if self._running(question):
                self.hub.client.update(
                    target.id,
                    acp_tools.ToolCallUpdate(toolCallId=tool_call.toolCallId, status="pending"),
                )
            return
        self._introduce(question, target, tool_call)

    def _introduce(
        self, question: Question, target: ThreadRecord, tool_call: acp_permissions.ToolCallUpdate
    ) -> None:
        target.tools.announce(tool_call.toolCallId)
        self.hub.client.update(
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
        question.introduced = True
        asking = self.hub.threads.session(question.thread_id)
        if question.item_follows and asking is not None and asking is not target:
            # The hidden agent's item drives the tool call where it was introduced.
            _target, agent = self.hub.threads.ask_target(question.thread_id)
            asking.tools.show_on(tool_call.toolCallId, target.id, agent or "a sub-agent")

    def _running(self, question: Question) -> bool:
        """The item the request names has started and not finished (nor been ended)."""
        assert question.tool_call is not None
        record = self.hub.threads.get(question.thread_id)
        call = record.tools.calls.get(question.tool_call[1]) if record is not None else None
        return call is not None and not call.completed

    def ask(self, question: Question, method: str, params: msgspec.Struct) -> None:
        params = self._addressed(question.thread_id, params)

        def answered(raw: Raw) -> None:
            self._client_answered(question, raw)

        def refused(error: ErrorObject) -> None:
            self._client_refused(question, error)

        question.client_id = self.hub.client.request(method, params, answered, refused)

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

    def _client_answered(self, question: Question, raw: Raw) -> None:
        if question.settled:
            log.info(
                "late answer to %s (Codex request %s) dropped: it was already settled",
                question.method,
                question.codex_id,
            )
            return
        question.client_answered = True
        record = self.hub.threads.session(question.thread_id)
        if record is not None and self._turn_cancelled(record, question.turn_id):
            # The turn is being cancelled (session/close, a cancel still on its way):
            # an answer given now authorizes nothing.
            log.info("answer to %s after its turn was cancelled: cancelling", question.method)
            self.settle(question, question.cancel)
            return
        assert question.read_answer is not None
        answer = question.read_answer(raw)
        self.settle(question, answer)
        if question.after_answer is not None:
            question.after_answer(answer)

    def _client_refused(self, question: Question, error: ErrorObject) -> None:
        if question.settled:
            log.debug("client error for settled %s: %s", question.method, error.message)
            return
        question.client_answered = True
        log.warning(
            "the client answered %s with an error (%s); declining", question.method, error.message
        )
        self.settle(question, question.decline)

    def settle(self, question: Question, answer: CodexAnswer, *, withdraw: bool = False) -> None:
        """The one place a Codex request is answered (``NO_ANSWER``: Codex stopped waiting).

        ``withdraw`` also takes back the client's request if it is still open, so its
        dialog closes; a late answer to it is dropped.
        """
        if question.settled:
            return
        question.settled = True
        record = self.hub.threads.get(question.thread_id)
        if record is not None and record.questions.get(question.codex_id) is question:
            del record.questions[question.codex_id]
        if answer is not NO_ANSWER:
            self.hub.codex.answer(question.codex_id, answer)
        if question.tool_call is not None:
            self._tool_call_answered(question, answer)
        if withdraw and question.client_id is not None and not question.client_answered:
            self.hub.client.withdraw(question.client_id)

    def _tool_call_answered(self, question: Question, answer: CodexAnswer) -> None:
        """What the tool call the request held ``pending`` shows once it is settled.

        Never a success Codex did not report. Where an item follows, it tells what happened:
        allowed, the call is ``in_progress`` (the command runs) until the item completes;
        declined or cancelled, the item (``declined``) or the turn's end closes a call of the
        asking thread, and one introduced elsewhere ends ``failed`` now (its hidden agent's
        item is no longer followed). Where no item follows, the tool call stands for the
        question: ``completed`` when allowed (the permissions were granted: that was all
        there was to do), else ``failed``.
        """
        assert question.tool_call is not None
        session_id, call_id = question.tool_call
        record = self.hub.threads.get(question.thread_id)
        if record is not None and call_id in record.tools.ended:
            return  # its turn ended first, and ended it
        allowed = answer is not NO_ANSWER and answer not in (question.decline, question.cancel)
        status: acp_tools.ToolCallStatus
        if question.item_follows:
            if allowed or (answer is NO_ANSWER and self.hub.codex.lost_reason is None):
                # Allowed (or answered elsewhere: Codex resolved it): the item tells.
                if allowed and self._running(question):
                    self.hub.client.update(
                        session_id,
                        acp_tools.ToolCallUpdate(toolCallId=call_id, status="in_progress"),
                    )
                return
            if not question.introduced:
                return
            followed = record is not None and record.tools.unfollow(call_id)
            if not followed and record is not None and record.id != session_id:
                return  # no longer followed: its item or its turn's end has ended it
            status = "failed"
        else:
            status = "completed" if allowed else "failed"
        self.hub.client.update(
            session_id, acp_tools.ToolCallUpdate(toolCallId=call_id, status=status)
        )

    def client_can_elicit(self, mode: str) -> bool:
        # ACP: the capability for a mode is declared by a non-null member ({}).
        declared = self.hub.handshake.client_capabilities.elicitation
        return isinstance(declared, dict) and declared.get(mode) is not None

    def _of_thread(self, thread_id: str) -> list[Question]:
        record = self.hub.threads.get(thread_id)
        return list(record.questions.values()) if record is not None else []

    def _turn_cancelled(self, record: ThreadRecord, turn_id: str | None) -> bool:
        """The user cancelled the work this turn does: the root's prompt (it is, or may
        be, this turn), or a sub-agent's turn whose work was cancelled."""
        turn = record.turn
        if turn is None:
            return False
        if turn.request_id is not None:
            return turn.cancelled and (turn.id is None or turn_id is None or turn.id == turn_id)
        return turn.id == turn_id and self.hub.threads.in_cancelled_work(record)

    # -- what ends a question besides the answer -------------------------------------------------

    def cancel_thread(self, thread_id: str) -> None:
        """Answer ``cancel`` to everything Codex asks on behalf of this thread (a cascade)."""
        for question in self._of_thread(thread_id):
            self.settle(question, question.cancel, withdraw=True)

    def session_cancelled(self, session_id: str) -> None:
        for question in self._of_thread(session_id):
            # The client answers its own open requests `cancelled` (ACP's rule).
            self.settle(question, question.cancel)

    def thread_forgotten(self, record: ThreadRecord, *, answer: bool = True) -> None:
        """The thread closed (or its root did): nothing it asked is wanted any more here.
        Without ``answer`` (another client's turn goes on) Codex's requests are left to the
        other clients, as Codex takes the first answer of any."""
        for question in list(record.questions.values()):
            self.settle(question, question.cancel if answer else NO_ANSWER, withdraw=True)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        for question in self._of_thread(note.threadId):
            if question.turn_id == note.turn.id:
                # Codex drops what the turn waited on (serverRequest/resolved follows);
                # answering `cancel` too costs nothing and can never leave it waiting.
                self.settle(question, question.cancel, withdraw=True)

    def resolved(self, note: codex_approvals.ServerRequestResolved) -> None:
        record = self.hub.threads.get(note.threadId)
        question = record.questions.get(note.requestId) if record is not None else None
        if question is not None:
            log.info("Codex resolved %s %s itself", question.method, question.codex_id)
            self.settle(question, NO_ANSWER, withdraw=True)

    def codex_lost(self, _reason: str) -> None:
        for record in self.hub.threads:
            for question in list(record.questions.values()):
                self.settle(question, NO_ANSWER, withdraw=True)

    def client_lost(self) -> None:
        self._client_gone = True
        for record in self.hub.threads:
            # Another client's turn: its requests are left to that client.
            others = self.others_turn(record)
            for question in list(record.questions.values()):
                self.settle(question, NO_ANSWER if others else question.cancel)

    def others_turn(self, record: ThreadRecord) -> bool:
        """Whether ``record`` works for a turn another client of a shared Codex started (on
        its root session): Codex asks every client and takes the first answer."""
        if not self.hub.setup.codex_shared:
            return False  # no other client: a turn Codex started itself is this one's
        root: ThreadRecord | None = record
        for _ in range(MAX_DEPTH):
            if root is None or root.parent_id is None:
                break
            root = self.hub.threads.get(root.parent_id)
        return root is not None and root.turn is not None and root.turn.kind is TurnKind.FOREIGN
