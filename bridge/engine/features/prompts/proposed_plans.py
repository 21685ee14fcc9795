"""Plan mode's proposed plan, and the question a turn that proposed one ends with.

In Plan mode (the ``collaboration_mode`` option, ``/plan``) Codex has the model propose a
plan, and takes it out of the answer as a ``plan`` item. Streaming shows it, whole, when the
item completes (:func:`bridge.engine.views.translate.proposed_plan`; its deltas,
``item/plan/delta``, are not streamed: Codex says they may not add up to the item). This
feature asks what Codex's TUI asks then:

- **When**: a turn of this client's (a prompt's, or one a steer or this feature started) ends
  ``completed`` having proposed a plan, and the session is idle after it (a prompt queued
  behind the turn starts instead: the user has moved on). Another client's turn is that
  client's to ask about; a sub-agent's plan is no session's to implement.
- **How**: "Implement this plan?" as an elicitation with one choice where the client
  declared ``elicitation.form``, else as ``session/request_permission`` naming a
  ``switch_mode`` tool call (shown ``pending`` first, ``completed`` once answered).
- **Yes, implement this plan**: the session's collaboration mode becomes Default as
  ``/plan off`` makes it (``thread/settings/update``; the client is told the option's new
  value), then a turn starts with the words Codex's TUI sends for it
  (:data:`IMPLEMENT_PROMPT`). No prompt waits for that turn: it is reported as a steer's
  on an idle session is (the user message shown, its updates streamed; v2 ``running``
  then ``idle``). **No, stay in Plan mode**: nothing.
- **Once**: the first answer settles it. A ``session/cancel``, a new prompt, any other turn
  on the session, the session's close, or Codex lost withdraws it (``$/cancel_request``,
  the tool call ``failed``); an answer after that is dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

import msgspec
from msgspec import Raw

from ....acp import permissions as acp_permissions
from ....acp import tools as acp_tools
from ....codex import types as codex_types
from ....codex.messages import ItemNotification
from ....jsonrpc import RequestId
from ....jsonrpc.peer import ErrorObject
from ...core import news
from ...core.hub import Hub
from ...core.ports import Collaboration
from ...core.record_parts import TurnKind
from ...core.threads import ThreadRecord

log = logging.getLogger(__name__)

#: The question, as Codex's TUI words it.
QUESTION = "Implement this plan?"
IMPLEMENT = "implement"
STAY = "stay"
#: The two answers (ids and words; Codex's TUI has these words).
CHOICES = {IMPLEMENT: "Yes, implement this plan", STAY: "No, stay in Plan mode"}
#: What the turn that carries the plan out is asked, as Codex's TUI asks it.
IMPLEMENT_PROMPT = "Implement the plan."
#: The elicitation's one field.
_FIELD = "decision"


@dataclass(slots=True)
class _Proposed:
    """The plan a session's running turn proposed (the last, if several)."""

    turn_id: str
    item_id: str


@dataclass(slots=True, eq=False)
class _Asked:
    """The question open on a session: the client's request, and its tool call if any."""

    item_id: str
    client_id: RequestId | None = None
    tool_call_id: str | None = None
    settled: bool = False


class ProposedPlans:
    """Asks whether to implement a proposed plan (see the module docstring)."""

    def __init__(self, hub: Hub, *, settings: Collaboration) -> None:
        self.hub = hub
        self._settings = settings
        #: By session: the plan its running turn proposed.
        self._proposed: dict[str, _Proposed] = {}
        #: By session: the question open on it.
        self._asked: dict[str, _Asked] = {}

    # -- a turn proposes, and ends -------------------------------------------------------------

    def item_completed(self, note: ItemNotification) -> None:
        item = note.item
        if not isinstance(item, codex_types.PlanItem) or not item.text.strip():
            return
        record = self.hub.threads.session(note.threadId)
        turn = record.turn if record is not None else None
        if record is None or record.parent_id is not None or turn is None:
            return
        if turn.kind in (TurnKind.PROMPT, TurnKind.STEER) and turn.id == note.turnId:
            self._proposed[record.id] = _Proposed(note.turnId, item.id)

    def turn_started(self, note: codex_types.TurnNotification) -> None:
        """Any turn on the session withdraws its question (another window's, a steer's)."""
        self.withdraw(note.threadId)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        """A turn of this client's that proposed a plan ended ``completed``: the question,
        once the session is idle after it."""
        proposed = self._proposed.pop(note.threadId, None)
        if proposed is None or proposed.turn_id != note.turn.id:
            return
        record = self.hub.threads.session(note.threadId)
        if note.turn.status != "completed" or record is None or record.life.closing is not None:
            return
        if record.turn is not None or record.queued:
            log.info("session %s: a prompt follows the proposed plan; not asked", record.id)
            return
        self._ask(record, proposed.item_id)

    # -- the question ---------------------------------------------------------------------------

    def _ask(self, record: ThreadRecord, item_id: str) -> None:
        asked = self._asked[record.id] = _Asked(item_id)
        declared = self.hub.handshake.client_capabilities.elicitation
        if isinstance(declared, dict) and declared.get("form") is not None:
            request: msgspec.Struct = acp_permissions.FormElicitationRequest(
                sessionId=record.id, message=QUESTION, requestedSchema=_FORM
            )
            method = "elicitation/create"
        else:
            asked.tool_call_id = f"{item_id}-implement"
            self.hub.client.update(
                record.id,
                acp_tools.ToolCall(
                    toolCallId=asked.tool_call_id,
                    title=QUESTION,
                    kind="switch_mode",
                    status="pending",
                ),
            )
            request = acp_permissions.RequestPermissionRequest(
                sessionId=record.id,
                toolCall=acp_permissions.ToolCallUpdate(
                    toolCallId=asked.tool_call_id, title=QUESTION, kind="switch_mode"
                ),
                options=[
                    acp_permissions.PermissionOption(
                        optionId=IMPLEMENT, name=CHOICES[IMPLEMENT], kind="allow_once"
                    ),
                    acp_permissions.PermissionOption(
                        optionId=STAY, name=CHOICES[STAY], kind="reject_once"
                    ),
                ],
            )
            method = "session/request_permission"

        def answered(raw: Raw) -> None:
            self._answered(record, asked, _decision(method, raw))

        def refused(error: ErrorObject) -> None:
            if not asked.settled:
                log.info("the client answered %r with an error: %s", QUESTION, error.message)
            self._answered(record, asked, STAY)

        asked.client_id = self.hub.client.request(method, request, answered, refused)

    def _answered(self, record: ThreadRecord, asked: _Asked, decision: str) -> None:
        if asked.settled:
            log.info("session %s: a late answer to %r dropped", record.id, QUESTION)
            return
        self._settle(record.id, asked, "completed")
        if decision != IMPLEMENT:
            return
        if self.hub.threads.session(record.id) is not record or record.life.closing is not None:
            return

        implement, failed = partial(self._implement, record), partial(_not_stored, record.id)
        if not self._settings.set_collaboration(record, "default", implement, failed):
            log.warning("session %s has no settings: the plan is not implemented", record.id)

    def _implement(self, record: ThreadRecord) -> None:
        """Default mode is stored: the turn that carries the plan out, unless the user has
        moved on meanwhile (a prompt of theirs runs, or the session closed)."""
        moved_on = record.turn is not None or record.queued or record.life.resuming
        if self.hub.threads.session(record.id) is not record or record.life.closing or moved_on:
            log.info("session %s moved on: the plan is not implemented", record.id)
            return
        # The engine starts it (a turn no prompt waits for: prompts sent meanwhile queue).
        self.hub.happened(news.TurnWanted(record, (codex_types.TextInput(text=IMPLEMENT_PROMPT),)))

    def _settle(self, session_id: str, asked: _Asked, status: acp_tools.ToolCallStatus) -> None:
        asked.settled = True
        if self._asked.get(session_id) is asked:
            del self._asked[session_id]
        if asked.tool_call_id is not None:
            self.hub.client.update(
                session_id, acp_tools.ToolCallUpdate(toolCallId=asked.tool_call_id, status=status)
            )

    # -- what withdraws it --------------------------------------------------------------------------

    def withdraw(self, session_id: str) -> None:
        """The session moved on (a cancel, a new prompt, another turn, its close): the
        question is taken back, and its answer will change nothing."""
        self._proposed.pop(session_id, None)
        asked = self._asked.get(session_id)
        if asked is None:
            return
        log.info("session %s: %r withdrawn", session_id, QUESTION)
        self._settle(session_id, asked, "failed")
        if asked.client_id is not None:
            self.hub.client.withdraw(asked.client_id)

    def codex_lost(self, _reason: str) -> None:
        for session_id in list(self._asked):
            self.withdraw(session_id)
        self._proposed.clear()

    def client_lost(self) -> None:
        """Nobody is left to answer, nor to tell."""
        for asked in self._asked.values():
            asked.settled = True
        self._asked.clear()
        self._proposed.clear()


#: The elicitation: one required choice.
_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        _FIELD: {
            "type": "string",
            "title": QUESTION,
            "oneOf": [{"const": value, "title": title} for value, title in CHOICES.items()],
        }
    },
    "required": [_FIELD],
}


def _decision(method: str, raw: Raw) -> str:
    """The user's answer: :data:`IMPLEMENT` only when they picked it; anything else
    (the other choice, a decline, a cancel, an answer that does not fit) stays."""
    try:
        if method == "elicitation/create":
            response = msgspec.json.decode(raw, type=acp_permissions.CreateElicitationResponse)
            content = response.content or {}
            chosen = content.get(_FIELD) if response.action == "accept" else None
            return IMPLEMENT if chosen == IMPLEMENT else STAY
        outcome = msgspec.json.decode(raw, type=acp_permissions.RequestPermissionResponse).outcome
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        log.warning("malformed answer to %r: %s; staying in Plan mode", QUESTION, exc)
        return STAY
    return IMPLEMENT if outcome.outcome == "selected" and outcome.optionId == IMPLEMENT else STAY


def _not_stored(session_id: str, error: ErrorObject) -> None:
    log.warning("session %s: Default mode not stored: %s", session_id, error.message)
