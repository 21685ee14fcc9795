"""The work-state snapshot: one pure function of a thread's record, table by table."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.engine.core import workstate
from bridge.engine.core.record_parts import Question, Status, Turn
from bridge.engine.core.threads import ThreadRecord

IDLE: dict[str, Any] = {"state": "idle"}
RUNNING: dict[str, Any] = {"state": "running"}
NEEDS_YOU: dict[str, Any] = {"state": "requires_action"}
UNKNOWN: dict[str, Any] = {"state": "unknown"}
ENDED = workstate.turn_outcome("completed", None)
CANCELLED = workstate.turn_outcome("interrupted", None)
FAILED = workstate.turn_outcome("failed", "model overloaded")


def record(
    *,
    status: str | None = None,
    flags: tuple[str, ...] = (),
    turn: bool = False,
    outcome: Any = None,
    lost: bool = False,
    pending: int = 0,
    unstarted: bool = False,
) -> ThreadRecord:
    r = ThreadRecord("t-1", parent_id="root", session=True, visible=True)
    r.placing.unstarted = unstarted
    r.work.status = Status(status, frozenset(flags)) if status is not None else None
    r.turn = Turn(id="turn-1") if turn else None
    r.work.outcome = outcome
    r.work.lost = lost
    for n in range(pending):
        r.questions[n] = Question(
            n, "item/commandExecution/requestApproval", "t-1", "turn-1", None, None
        )
    return r


def shown(state: Any) -> dict[str, Any]:
    built: dict[str, Any] = msgspec.to_builtins(state)
    return built


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # Nothing said yet: a thread at rest.
        ({}, IDLE),
        # Codex's status decides while it says the thread is active.
        ({"status": "active"}, RUNNING),
        ({"status": "active", "turn": True}, RUNNING),
        ({"status": "active", "flags": ("waitingOnApproval",)}, NEEDS_YOU),
        ({"status": "active", "flags": ("waitingOnUserInput",), "turn": True}, NEEDS_YOU),
        ({"status": "active", "flags": ("somethingNew",)}, RUNNING),
        # A request still waiting on the user is an action required, flag or not.
        ({"status": "active", "turn": True, "pending": 1}, NEEDS_YOU),
        # A turn in flight with no active status yet (or an idle one from before it).
        ({"turn": True}, RUNNING),
        ({"status": "idle", "turn": True}, RUNNING),
        # The last turn's end, with its stop reason or error.
        ({"status": "idle", "outcome": ENDED}, shown(ENDED)),
        ({"status": "idle", "outcome": CANCELLED}, shown(CANCELLED)),
        ({"outcome": FAILED}, shown(FAILED)),
        ({"status": "idle"}, IDLE),
        # Codex's system error, whatever came before.
        (
            {"status": "systemError", "outcome": ENDED},
            {"state": "idle", "_meta": {"error": workstate.SYSTEM_ERROR}},
        ),
        # Lost while working: unknown, never an invented outcome.
        ({"lost": True, "status": "active", "turn": True}, UNKNOWN),
        ({"lost": True, "outcome": ENDED}, UNKNOWN),
    ],
    ids=lambda v: str(v) if isinstance(v, dict) else "",
)
def test_the_snapshot_of_a_record(case: dict[str, Any], expected: dict[str, Any]) -> None:
    assert shown(workstate.snapshot(record(**case))) == expected


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # A sub-agent Codex has not shown at work yet: its idle is no work that ended.
        ({"unstarted": True}, None),
        ({"unstarted": True, "status": "idle"}, None),
        # Whatever else Codex says of it is reported.
        ({"unstarted": True, "status": "active"}, RUNNING),
        ({"unstarted": True, "status": "idle", "turn": True}, RUNNING),
        ({"unstarted": True, "status": "active", "flags": ("waitingOnApproval",)}, NEEDS_YOU),
        ({"unstarted": True, "status": "idle", "outcome": ENDED}, shown(ENDED)),
        ({"unstarted": True, "outcome": FAILED}, shown(FAILED)),
        (
            {"unstarted": True, "status": "systemError"},
            {"state": "idle", "_meta": {"error": workstate.SYSTEM_ERROR}},
        ),
        ({"unstarted": True, "lost": True}, UNKNOWN),
        # Any other thread: exactly its snapshot, idle at rest included.
        ({}, IDLE),
        ({"status": "idle"}, IDLE),
        ({"status": "active", "turn": True}, RUNNING),
        ({"status": "idle", "outcome": CANCELLED}, shown(CANCELLED)),
    ],
    ids=lambda v: str(v) if isinstance(v, dict) else "",
)
def test_what_a_client_is_told_of_a_record(
    case: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    told = workstate.reportable(record(**case))
    assert (None if told is None else shown(told)) == expected


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        ("completed", None, {"state": "idle", "stopReason": "end_turn"}),
        ("interrupted", None, {"state": "idle", "stopReason": "cancelled"}),
        ("failed", "boom", {"state": "idle", "stopReason": None, "_meta": {"error": "boom"}}),
        ("failed", None, {"state": "idle", "stopReason": None, "_meta": {"error": "turn failed"}}),
        ("weird", None, {"state": "idle", "stopReason": None, "_meta": {"error": "turn weird"}}),
    ],
)
def test_how_a_turn_that_ended_leaves_the_thread(
    status: str, error: str | None, expected: dict[str, Any]
) -> None:
    assert shown(workstate.turn_outcome(status, error)) == expected


def test_a_turn_end_is_newer_than_the_active_status_codex_reported_during_it() -> None:
    r = record(status="active", flags=("waitingOnApproval",), turn=True)
    r.turn = None
    workstate.turn_ended(r, "interrupted", None)
    assert shown(workstate.snapshot(r)) == shown(CANCELLED)
    # The next turn's active status takes over again.
    r.work.status = Status("active")
    assert shown(workstate.snapshot(r)) == RUNNING


@pytest.mark.parametrize(
    ("case", "cancellable"),
    [
        ({}, False),
        ({"turn": True}, True),
        ({"turn": True, "lost": True}, False),
        ({"status": "active"}, False),
    ],
)
def test_a_thread_can_be_cancelled_exactly_while_it_has_a_turn(
    case: dict[str, Any], cancellable: bool
) -> None:
    assert workstate.cancellable(record(**case)) is cancellable


def test_the_snapshot_is_a_function_of_the_record_alone() -> None:
    r = record(status="active", turn=True)
    assert workstate.snapshot(r) == workstate.snapshot(r)
    before = msgspec.to_builtins(workstate.snapshot(r))
    r.work.reported = workstate.snapshot(r)  # what was sent does not change what is true
    assert msgspec.to_builtins(workstate.snapshot(r)) == before
