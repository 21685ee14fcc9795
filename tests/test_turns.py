"""A turn's state machine (``bridge/engine/core/turns.py``): each transition of its table,
and each refused one (which changes nothing)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.engine.core import turns
from bridge.engine.core.facts import PromptInserted
from bridge.engine.core.moves import ImpossibleMove
from bridge.engine.core.record_parts import Prompt, QueuedPrompt, Turn, TurnKind
from bridge.engine.core.threads import ThreadRecord, Threads
from bridge.engine.core.turns import Interrupt, PromptState, TurnState
from bridge.jsonrpc import RpcError

State = TurnState
Makes = Callable[[], tuple[ThreadRecord, Turn]]


def root() -> ThreadRecord:
    return ThreadRecord("root", session=True, visible=True)


def child() -> ThreadRecord:
    return ThreadRecord("child", parent_id="root", session=True, visible=True)


def asked(kind: TurnKind = TurnKind.PROMPT) -> tuple[ThreadRecord, Turn]:
    record = root()
    return record, turns.begin(record, kind, 1 if kind is not TurnKind.STEER else None)


def running(kind: TurnKind = TurnKind.PROMPT) -> tuple[ThreadRecord, Turn]:
    record, turn = asked(kind)
    assert turns.named(record, turn, "turn-1")
    return record, turn


def cancelling() -> tuple[ThreadRecord, Turn]:
    record, turn = running()
    assert turns.cancel(turn)
    return record, turn


# -- a root's turn begins ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "rid", "to"),
    [
        (TurnKind.PROMPT, 1, State.ASKED),
        (TurnKind.STEER, None, State.ASKED),
        (TurnKind.QUICK, 1, State.ANSWERING),
    ],
)
def test_begin_from_idle(kind: TurnKind, rid: int | None, to: TurnState) -> None:
    record = root()
    assert turns.state(record) is State.IDLE
    turn = turns.begin(record, kind, rid)
    assert record.turn is turn
    assert (turns.state(record), turn.kind, turn.request_id, turn.id) == (to, kind, rid, None)


def test_begin_replaces_a_cancelling_turn() -> None:
    # A steer reaching a session whose cancelled turn is ending starts a turn of its own.
    record, old = cancelling()
    new = turns.begin(record, TurnKind.STEER)
    assert record.turn is new and new is not old
    assert turns.state(record) is State.ASKED


@pytest.mark.parametrize("busy", [asked, running])
def test_begin_over_a_running_turn_replaces_it_and_says_so(
    busy: Makes, caplog: pytest.LogCaptureFixture
) -> None:
    # A steer Codex refused as the turn it named ended, once the next one began.
    record, old = busy()
    new = turns.begin(record, TurnKind.STEER)
    assert record.turn is new and not turns.current(record, old)
    assert "a steer turn replaces its prompt turn" in caplog.text


@pytest.mark.parametrize("kind", [TurnKind.FOREIGN, TurnKind.SUBAGENT])
def test_begin_refused_for_a_turn_begun_elsewhere(kind: TurnKind) -> None:
    record = root()
    with pytest.raises(turns.TurnConflict):
        turns.begin(record, kind)
    assert record.turn is None


# -- named ------------------------------------------------------------------------------


def test_named_asked_to_running() -> None:
    record, turn = asked()
    assert turns.named(record, turn, "turn-1")
    assert (turns.state(record), turn.id) == (State.RUNNING, "turn-1")
    assert record.own_turns == {"turn-1"}


def test_named_keeps_a_cancel() -> None:
    record, turn = asked()
    turns.cancel(turn)
    assert turns.named(record, turn, "turn-1")
    assert (turns.state(record), turn.id) == (State.CANCELLING, "turn-1")


def test_named_refused_once_named() -> None:
    record, turn = running()
    assert not turns.named(record, turn, "turn-2")
    assert turn.id == "turn-1" and record.own_turns == {"turn-1"}


def test_named_refused_for_a_turn_no_longer_the_records() -> None:
    record, turn = asked()
    turns.end(record, turn)
    assert not turns.named(record, turn, "turn-1")
    assert turn.id is None and record.own_turns == set() and record.turn is None


# -- another client's turn ----------------------------------------------------------------


def test_foreign_started_on_an_idle_session() -> None:
    record = root()
    turn = turns.foreign_started(record, "turn-9")
    assert turn is record.turn and turn is not None
    assert (turns.state(record), turn.kind, turn.id) == (State.RUNNING, TurnKind.FOREIGN, "turn-9")


def test_foreign_started_refused_while_a_turn_runs() -> None:
    record, turn = asked()
    assert turns.foreign_started(record, "turn-9") is None
    assert record.turn is turn and turn.id is None


@pytest.mark.parametrize(("turn_id", "to"), [("turn-9", State.RUNNING), (None, State.ASKED)])
def test_joined(turn_id: str | None, to: TurnState) -> None:
    record = root()
    turn = turns.joined(record, turn_id)
    assert record.turn is turn
    assert (turns.state(record), turn.kind, turn.id, turn.joined) == (
        to,
        TurnKind.FOREIGN,
        turn_id,
        set(),
    )


def test_found_names_the_foreign_turn_and_rearms_its_interrupt() -> None:
    record = root()
    turn = turns.joined(record, None)
    assert turns.looking_up(turn)
    assert turns.found(record, turn, "turn-9")
    assert (turn.id, turns.interrupt(turn)) == ("turn-9", Interrupt.NONE)
    assert turns.found(record, turn, None)  # a later read: none in progress
    assert turn.id is None


def test_found_refused_for_a_turn_no_longer_the_records() -> None:
    record = root()
    turn = turns.joined(record, None)
    turns.lost(record)
    assert not turns.found(record, turn, "turn-9")
    assert turn.id is None


def test_looking_up_once_for_an_unnamed_foreign_turn() -> None:
    turn = turns.joined(root(), None)
    assert turns.looking_up(turn)
    assert turns.interrupt(turn) is Interrupt.LOOKING_UP
    assert not turns.looking_up(turn)


@pytest.mark.parametrize(
    "make", [lambda: turns.joined(root(), "turn-9"), lambda: asked()[1]], ids=["named", "prompt"]
)
def test_looking_up_refused(make: Callable[[], Turn]) -> None:
    turn = make()
    assert not turns.looking_up(turn)
    assert turns.interrupt(turn) is Interrupt.NONE


# -- cancel, stop, interrupt ---------------------------------------------------------------


@pytest.mark.parametrize("kind", [TurnKind.PROMPT, TurnKind.QUICK])
def test_cancel_asked(kind: TurnKind) -> None:
    record, turn = asked(kind)
    assert turns.cancel(turn)
    assert turns.state(record) is State.CANCELLING


def test_cancel_running() -> None:
    record, turn = running()
    assert turns.cancel(turn)
    assert turns.state(record) is State.CANCELLING


def test_cancel_refused_once_cancelled() -> None:
    record, turn = cancelling()
    assert not turns.cancel(turn)
    assert turns.state(record) is State.CANCELLING


def test_fail_keeps_the_first_failure() -> None:
    record, turn = running()
    first, second = RpcError.internal("no sign-in"), RpcError.internal("unreachable")
    assert turns.fail(turn, first)
    assert not turns.fail(turn, second)
    assert turn.failure is first and turns.state(record) is State.RUNNING


def test_interrupting_once_named() -> None:
    _record, turn = cancelling()
    assert turns.interrupting(turn)
    assert turns.interrupt(turn) is Interrupt.SENT
    assert not turns.interrupting(turn)


def test_interrupting_refused_before_the_turn_is_named() -> None:
    _record, turn = asked()
    turns.cancel(turn)
    assert not turns.interrupting(turn)
    assert turns.interrupt(turn) is Interrupt.NONE


def test_interrupt_refused_after_it_was_sent() -> None:
    _record, turn = cancelling()
    turns.interrupting(turn)
    assert turns.interrupt_refused(turn)
    assert turns.interrupt(turn) is Interrupt.REFUSED
    assert not turns.interrupt_refused(turn)


def test_interrupt_refused_refused_when_none_was_sent() -> None:
    _record, turn = cancelling()
    assert not turns.interrupt_refused(turn)
    assert turns.interrupt(turn) is Interrupt.NONE


# -- the end ----------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [asked, running, cancelling])
def test_end(make: Makes) -> None:
    record, turn = make()
    assert turns.end(record, turn)
    assert turns.state(record) is State.IDLE and not turns.current(record, turn)


def test_end_refused_for_a_turn_no_longer_the_records() -> None:
    record, old = cancelling()
    new = turns.begin(record, TurnKind.STEER)
    assert not turns.end(record, old)
    assert record.turn is new and turns.current(record, new)


@pytest.mark.parametrize("make", [asked, running, cancelling])
def test_lost(make: Makes) -> None:
    record, turn = make()
    assert turns.lost(record) is turn
    assert turns.state(record) is State.IDLE
    assert turns.lost(record) is None


# -- a sub-agent's turn -----------------------------------------------------------------------


def test_subagent_started_from_idle() -> None:
    record = child()
    turn = turns.subagent_started(record, "c-1", "turn-1")
    assert record.turn is turn
    assert (turns.state(record), turn.kind, turn.root_turn_id) == (
        State.RUNNING,
        TurnKind.SUBAGENT,
        "turn-1",
    )


def test_subagent_started_again_keeps_the_turn() -> None:
    record = child()
    turn = turns.subagent_started(record, "c-1", None)
    assert turns.subagent_started(record, "c-1", "turn-1") is turn
    assert turn.root_turn_id == "turn-1"


def test_subagent_started_over_an_unended_turn_keeps_its_cancel() -> None:
    record = child()
    turns.cancel(turns.subagent_started(record, "c-1", "turn-1"))
    turn = turns.subagent_started(record, "c-2", "turn-1")
    assert turn.id == "c-2" and turns.state(record) is State.CANCELLING
    assert turns.interrupt(turn) is Interrupt.NONE


@pytest.mark.parametrize(("turn_id", "to"), [("c-1", State.RUNNING), (None, State.IDLE)])
def test_subagent_running(turn_id: str | None, to: TurnState) -> None:
    record = child()
    turns.subagent_started(record, "c-0", None)
    turns.subagent_running(record, turn_id, "turn-1" if turn_id else None)
    assert turns.state(record) is to
    if turn_id is not None:
        assert record.turn is not None and record.turn.root_turn_id == "turn-1"


def test_unwanted_work_is_cancelling() -> None:
    record = ThreadRecord("stray")
    turn = turns.unwanted(record, "c-1")
    assert (turns.state(record), turn.id) == (State.CANCELLING, "c-1")
    assert turns.interrupting(turn)


def test_end_named() -> None:
    record = child()
    turns.subagent_started(record, "c-1", None)
    assert turns.end_named(record, "c-1")
    assert turns.state(record) is State.IDLE


def test_end_named_refused_for_another_turn() -> None:
    record = child()
    turn = turns.subagent_started(record, "c-2", None)
    assert not turns.end_named(record, "c-1")
    assert record.turn is turn
    assert not turns.end_named(child(), "c-1")


# -- questions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "root_turn"),
    [
        (TurnKind.PROMPT, True),
        (TurnKind.STEER, True),
        (TurnKind.FOREIGN, True),
        (TurnKind.QUICK, False),
        (TurnKind.SUBAGENT, False),
    ],
)
def test_is_root(kind: TurnKind, root_turn: bool) -> None:
    assert turns.is_root(Turn(kind=kind)) is root_turn


def test_a_prompts_states() -> None:
    record = root()
    record.prompts[1] = Prompt(1, [])
    record.queued.append(QueuedPrompt(1, []))
    assert turns.prompt_state(record, 1) is PromptState.QUEUED
    record.queued.clear()
    assert turns.prompt_state(record, 1) is PromptState.SENT
    record.prompts[1].message_id = "m-1"
    assert turns.prompt_state(record, 1) is PromptState.INSERTED
    del record.prompts[1]
    assert turns.prompt_state(record, 1) is PromptState.ANSWERED


def test_insert_takes_the_awaited_prompt_and_numbers_the_bridges_ids() -> None:
    threads = Threads()
    record = root()
    first, second = Prompt(1, []), Prompt(2, [])
    record.prompts.update({1: first, 2: second})
    record.awaiting_message = 1
    fact = turns.insert_awaited(threads, record, None)
    assert fact == PromptInserted(record, 1, "root-prompt-1", [])
    assert first.message_id == "root-prompt-1"
    assert turns.prompt_state(record, 1) is PromptState.INSERTED
    assert turns.insert(threads, record, second, None).message_id == "root-prompt-2"
    assert turns.prompt_state(record, 2) is PromptState.INSERTED


def test_insert_under_codexs_item_id() -> None:
    threads = Threads()
    record = root()
    record.prompts[1] = Prompt(1, [])
    record.awaiting_message = 1
    fact = turns.insert_awaited(threads, record, "item-7")
    assert fact is not None and fact.message_id == "item-7"
    assert threads.prompt_ids == 0


def test_insert_awaited_refused_when_no_prompt_awaits() -> None:
    threads = Threads()
    record = root()
    assert turns.insert_awaited(threads, record, None) is None
    record.awaiting_message = 1  # answered meanwhile: no longer held
    assert turns.insert_awaited(threads, record, None) is None
    assert threads.prompt_ids == 0


# -- the tables -----------------------------------------------------------------------------


def test_every_move_of_the_table_is_one_a_transition_makes() -> None:
    """Each move :data:`turns.MOVES` lists is made by some transition above; nothing moves a
    turn into ``IDLE`` (a turn ends by leaving its record)."""
    made = {
        (State.ASKED, State.RUNNING),  # named
        (State.ASKED, State.CANCELLING),  # cancel, unnamed
        (State.ANSWERING, State.CANCELLING),  # a command cancelled
        (State.RUNNING, State.CANCELLING),  # cancel
        (State.RUNNING, State.ASKED),  # found: another client's turn is not in progress
    }
    listed = {(a, b) for a, tos in turns.MOVES.items() for b in tos}
    assert listed == made
    assert all(State.IDLE not in tos for tos in turns.MOVES.values())


def test_a_move_the_table_does_not_have_raises_and_changes_nothing() -> None:
    _, turn = cancelling()
    with pytest.raises(ImpossibleMove, match="CANCELLING to RUNNING"):
        turns._move(turn, State.RUNNING)
    assert turn.state is State.CANCELLING
    assert turns.interrupting(turn)
    with pytest.raises(ImpossibleMove, match="SENT to LOOKING_UP"):
        turns._move_interrupt(turn, Interrupt.LOOKING_UP)
    assert turn.interrupt is Interrupt.SENT


def test_a_turn_keeps_how_it_was_when_it_leaves_its_record() -> None:
    """A feature holding a turn that ended reads how it ended (cancelled or not)."""
    record, turn = cancelling()
    assert turns.end(record, turn)
    assert turns.state(record) is State.IDLE
    assert turn.state is State.CANCELLING and turn.cancelled


def test_a_late_read_keeps_an_interrupt_that_went() -> None:
    """Reading another client's turns again once its interrupt went does not arm a second
    ``turn/interrupt``."""
    record = root()
    turn = turns.joined(record, None)
    assert turns.looking_up(turn)
    assert turns.found(record, turn, "turn-9")
    assert turns.interrupting(turn)
    assert turns.found(record, turn, "turn-9")
    assert turns.interrupt(turn) is Interrupt.SENT
    assert not turns.interrupting(turn)
