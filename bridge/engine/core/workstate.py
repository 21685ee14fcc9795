"""A thread's work state: ``running`` / ``requires_action`` / ``idle`` / ``unknown``.

One pure function of the thread's record, :func:`snapshot`, decides it from
what Codex said (its thread status and active flags, its turns), what the
thread has pending, and whether Codex was lost while it worked. Rules, first
match wins:

1. Codex was lost while the thread worked → ``unknown`` (never an invented outcome).
2. Codex reports a system error → ``idle`` with ``_meta.error``.
3. Codex reports the thread ``active`` → ``requires_action`` when it waits on an
   approval or on the user's input (an active flag, or a request of it still
   waiting on the user), else ``running``.
4. A turn is in flight → ``running``.
5. Its last turn ended → ``idle`` with that turn's stop reason (``end_turn``,
   ``cancelled``), or without one and with ``_meta.error`` when it failed.
6. Otherwise → ``idle``.

A turn's end sets the status to idle (:func:`turn_ended`): the turn's outcome
is newer than the ``active`` Codex reported while it ran. When a snapshot is
sent, and to whom, is the sub-agent feature's business; it sends one only when
it differs from the last one sent.

What a client is told (:func:`reportable`) is the snapshot, except for a
sub-agent not yet at work. Codex creates a spawned child ``idle`` and only
then starts its first turn: that ``idle`` is no work that ended, so nothing is
reported until Codex says more (``running`` once it is active, or a turn's
end, an error, ``unknown``). The RFD allows it: until a state is reported the
client has no confirmed current work state, and announcing implies none.

A session's own work, as its client is shown it on the session's stream (ACP
v2's ``state_update``), follows the same quantities as the client sees them
(:func:`foreground`): the prompts of its that were inserted and have not ended,
or a turn Codex started without one (a goal's, another client's), are work,
``running``; no such work is ``idle``. While the client holds a question of the
session (a permission request or an elicitation) it is ``requires_action``: a
question of its work, or one asked once the work ended and no turn runs (Plan
mode's "Implement this plan?"). A turn the client is not yet shown as work (a
prompt not inserted yet, a resumed session's before its state is told) keeps it
``idle``. A sub-agent's stream
carries its :func:`reportable` snapshot instead (the sub-agent feature reports
it on the parent first), and a resumed session starts from its
:func:`snapshot`: what Codex says of a turn already running.
"""

from __future__ import annotations

from ...acp.subagents import WorkState
from .threads import ThreadRecord

#: The turn of a resumed session that Codex reported at work: its id is not known here.
ANY_TURN = "*"

#: Active flags that mean the thread waits on the user.
WAITING_FLAGS = frozenset({"waitingOnApproval", "waitingOnUserInput"})

SYSTEM_ERROR = "Codex reports a system error"


def snapshot(record: ThreadRecord) -> WorkState:
    """The work state of ``record`` now (see the module docstring)."""
    if record.work.lost:
        return WorkState(state="unknown")
    status = record.work.status
    if status is not None and status.type == "systemError":
        return WorkState(state="idle", meta={"error": SYSTEM_ERROR})
    if status is not None and status.type == "active":
        waiting = bool(status.flags & WAITING_FLAGS) or any(
            not p.settled for p in record.questions.values()
        )
        return WorkState(state="requires_action" if waiting else "running")
    if record.turn is not None:
        return WorkState(state="running")
    if record.work.outcome is not None:
        outcome: WorkState = record.work.outcome
        return outcome
    return WorkState(state="idle")


#: Idle with no stop reason and no error: what :func:`snapshot` says of a thread at rest.
_AT_REST = WorkState(state="idle")


def reportable(record: ThreadRecord) -> WorkState | None:
    """The snapshot a client may be told of ``record`` now, or ``None``: a sub-agent
    Codex has not yet shown at work (:attr:`ThreadRecord.unstarted`) is not idle from
    work that ended, so a plain ``idle`` is no snapshot of it (see the module docstring)."""
    state = snapshot(record)
    if record.placing.unstarted and state == _AT_REST:
        return None
    return state


def foreground(record: ThreadRecord) -> str:
    """The work state of the session's own work, as its client is shown it (see the
    module docstring)."""
    if record.shown.working or record.shown.turn_elsewhere is not None:
        return "requires_action" if record.shown.asking else "running"
    if record.shown.asking and record.turn is None:
        return "requires_action"  # a question once the work ended: Plan mode's
    return "idle"


def cancellable(record: ThreadRecord) -> bool:
    """Whether ``session/cancel`` can stop the thread's work now: it has a turn to interrupt."""
    return record.turn is not None and not record.work.lost


def turn_outcome(status: str, error: str | None) -> WorkState:
    """How a turn that ended with Codex's ``status`` leaves the thread."""
    if status == "completed":
        return WorkState(state="idle", stopReason="end_turn")
    if status == "interrupted":
        return WorkState(state="idle", stopReason="cancelled")
    return WorkState(state="idle", stopReason=None, meta={"error": error or f"turn {status}"})


def turn_ended(record: ThreadRecord, status: str, error: str | None) -> None:
    """Record a turn's end: its outcome, and a status no longer ``active``."""
    record.work.ended(turn_outcome(status, error))
