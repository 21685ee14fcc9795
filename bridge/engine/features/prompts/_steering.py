"""Steering: input added to the turn that is running (``_session/steering``).

A person who types while the agent works either waits (a queued ``session/prompt``,
:mod:`bridge.engine.features.prompts.prompts`) or steers: the words go into the running turn, and
the model reads them at its next step. Codex does exactly this with ``turn/steer
{threadId, input, expectedTurnId}``.

- **A turn runs**: ``turn/steer`` with its id; the outcome is ``injected`` and the
  running prompt's response covers what the steer added. While Codex has not yet
  named the turn, the steer waits for the name.
- **No turn runs**: ``promptRequired`` (reason ``noRunningTurn``) when the client
  asked for it (``_meta.steering.idleBehavior``), else a new turn starts with the
  input (``startedNewTurn``), its updates streaming as a prompt's do.
- **A steer racing the turn's end** is decided by Codex: ``expectedTurnId`` no
  longer matches, Codex refuses, and the steer is handled as on an idle session, or,
  when a prompt queued behind the turn has started its own meanwhile, steered into
  that one. Never lost, and never in a queued prompt's place.
- Steers of one session are handled one at a time, in arrival order. A cancel
  answers the ones still waiting ``failed`` (reason ``cancelled``).

Content the model cannot take (an image for a model whose catalog entry lists
text only) is refused on arrival with -32602 naming why. Sub-agent sessions refuse
steering (the RFD restricts them to ``session/cancel``): see
:data:`bridge.engine.features.subagents.subagents.RESTRICTED`.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from msgspec import UNSET, Raw

from ....acp import steering as acp_steering
from ....codex import types as codex_types
from ....codex.messages import ItemNotification
from ....jsonrpc import RequestId, RpcError
from ....jsonrpc.peer import ErrorObject
from ...core.answers import decode_params
from ...core.codex_asks import SteerTurn
from ...core.hub import Hub
from ...core.record_parts import Steer, TurnKind
from ...core.threads import ThreadRecord
from ...views import history
from ._input import prompt_to_input

log = logging.getLogger(__name__)

#: The input types (Codex ``UserInput``) that are images.
_IMAGE_INPUTS = (codex_types.ImageInput, codex_types.LocalImageInput)


class Turns(Protocol):
    """Starts a session's turns (:class:`bridge.engine.features.prompts.prompts.Prompts`)."""

    def start_turn(self, record: ThreadRecord, inputs: list[Any]) -> None:
        """Start a turn no prompt waits for; prompts sent meanwhile queue behind it."""


class Modalities(Protocol):
    """The session's model, as steering needs it (:mod:`bridge.engine.features.settings.settings`)."""

    def input_modalities(self, record: ThreadRecord) -> list[str] | None:
        """The input the session's model takes (``None``: not known)."""


class Steering:
    """``_session/steering`` (see the module docstring).

    Built by the prompts feature, whose ``turns`` a steer on an idle session starts
    and which tells it when a session's turn is named or has ended.
    """

    def __init__(self, hub: Hub, *, turns: Turns, settings: Modalities) -> None:
        self.hub = hub
        self._turns = turns
        #: The modalities the session's model takes.
        self._settings = settings

    def steer(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_steering.SteeringParams, acp_steering.METHOD)
        record = self.hub.threads.require(params.sessionId)
        if record.life.closing is not None:
            raise RpcError.invalid_params(f"session {record.id} is being closed")
        inputs = prompt_to_input(params.prompt)
        self._check_modalities(record, inputs)
        record.steers.append(Steer(rid, inputs, params.prompt_required))
        if len(record.steers) == 1:
            self._next(record)

    def turn_known(self, record: ThreadRecord) -> None:
        """Codex named the session's turn: a steer waiting for the name goes now."""
        self._next(record)

    def turn_ended(self, record: ThreadRecord) -> None:
        """The session's turn ended (its prompt answered): waiting steers meet an idle session."""
        self._next(record)

    def item_completed(self, note: ItemNotification) -> None:
        """Steered input is shown where it entered the turn: Codex reports it as a user
        message of the running turn after the prompt's own (or as the first of a turn a
        steer started), and the client is told of it as the user's message."""
        item = note.item
        if not isinstance(item, codex_types.UserMessageItem):
            return
        record = self.hub.threads.session(note.threadId)
        turn = record.turn if record is not None else None
        if record is None or record.parent_id is not None or turn is None:
            return
        turn.user_messages += 1
        # Another client's turn (another window, Codex's TUI): its prompt is news here.
        if turn.kind in (TurnKind.STEER, TurnKind.FOREIGN) or turn.user_messages > 1:
            for update in history.item_updates(item):
                self.hub.client.update(record.id, update)

    def cancelled(self, record: ThreadRecord) -> None:
        """``session/cancel``: steers not yet sent are answered ``failed``; one already
        with Codex gets its answer from Codex."""
        in_flight = record.steers[:1] if record.steers and record.steers[0].sent else []
        waiting = record.steers[len(in_flight) :]
        record.steers = in_flight
        for steer in waiting:
            self._answer(steer, "failed", "cancelled")

    # -- one at a time ---------------------------------------------------------------------

    def _next(self, record: ThreadRecord) -> None:
        while record.steers:
            steer: Steer = record.steers[0]
            if steer.sent:
                return  # Codex has it; its answer moves the queue on
            turn = record.turn
            if turn is not None and turn.id is None:
                return  # Codex has not named the turn yet: turn_known resumes
            if turn is not None and not turn.cancelled:
                self._send(record, steer, turn.id)
                return
            record.steers.pop(0)
            self._idle(record, steer)

    def _send(self, record: ThreadRecord, steer: Steer, turn_id: str | None) -> None:
        assert turn_id is not None
        steer.sent = True
        self.hub.codex.ask(
            record,
            SteerTurn(steer, turn_id),
            "turn/steer",
            codex_types.TurnSteerParams(
                threadId=record.id, input=steer.inputs, expectedTurnId=turn_id
            ),
            codex_types.TurnSteerResult,
            self._injected,
            self._refused,
        )

    def _injected(
        self, record: ThreadRecord, asked: SteerTurn, _result: codex_types.TurnSteerResult
    ) -> None:
        self._done(record, asked.steer)
        self._answer(asked.steer, "injected")
        self._next(record)

    def _refused(self, record: ThreadRecord, asked: SteerTurn, error: ErrorObject) -> None:
        steer, turn_id, turn = asked.steer, asked.expected_turn_id, record.turn
        if turn is not None and turn.id != turn_id and not turn.cancelled:
            # Its turn ended and another began (a prompt queued behind it): the words
            # go into the turn that runs now, once Codex has named it. Starting a turn
            # of their own would take the queued prompt's place, never to be answered.
            log.info("turn/steer raced the end of turn %s: into the next", turn_id)
            steer.sent = False
            self._next(record)
            return
        self._done(record, steer)
        if turn is None or turn.id != turn_id or turn.cancelled:
            # The turn ended (or is ending) before Codex took the input: as if idle.
            log.info("turn/steer raced the end of turn %s: %s", turn_id, error.message)
            self._idle(record, steer)
        else:
            self._answer(steer, "failed", error.message)
        self._next(record)

    def _done(self, record: ThreadRecord, steer: Steer) -> None:
        if record.steers and record.steers[0] is steer:
            record.steers.pop(0)

    def _idle(self, record: ThreadRecord, steer: Steer) -> None:
        if steer.prompt_required:
            self._answer(steer, "promptRequired", "noRunningTurn")
            return
        if self.hub.threads.session(record.id) is not record or record.life.closing is not None:
            self._answer(steer, "failed", "sessionClosed")
            return
        self._turns.start_turn(record, steer.inputs)
        self._answer(steer, "startedNewTurn")

    def _answer(self, steer: Steer, outcome: acp_steering.Outcome, reason: str = "") -> None:
        self.hub.client.answer(
            steer.request_id,
            acp_steering.SteeringResult(outcome=outcome, reason=reason or UNSET),
        )

    def _check_modalities(self, record: ThreadRecord, inputs: list[Any]) -> None:
        if not any(isinstance(item, _IMAGE_INPUTS) for item in inputs):
            return
        modalities = self._settings.input_modalities(record)
        if modalities is not None and "image" not in modalities:
            model = record.settings.model if record.settings is not None else "the model"
            raise RpcError.invalid_params(
                f"{model} takes {', '.join(modalities) or 'no'} input, not images: "
                "steer with text only"
            )
