"""A thread's turn: its states, and the one place they change.

A thread runs at most one turn at a time (``ThreadRecord.turn``, a
:class:`~bridge.engine.core.threads.Turn`). This module is the only one that
assigns ``record.turn`` or moves a turn's state; the features tell it what
happened (a prompt asked for a turn, Codex named it, the user cancelled it, an
interrupt went out or was refused, the turn ended, Codex was lost) and ask it
questions. ``tests/test_architecture.py`` keeps it so.

**Kinds** (:class:`~bridge.engine.core.threads.TurnKind`, fixed when the turn
begins): a root session's ``PROMPT`` (a ``session/prompt`` waits for it),
``STEER`` (a steer on an idle session started it), ``QUICK`` (a slash command
answered without a Codex turn: the session is busy until it is answered) and
``FOREIGN`` (another client of the same Codex started it, or Codex itself); a
sub-agent's turn is a ``SUBAGENT`` one. Prompts, steers and foreign turns are
the session's *own* turns (:func:`is_root`): the prompts feature answers them.

**States** (:class:`~bridge.engine.core.record_parts.TurnState`, stored on the turn;
:func:`state` reads a record's)::

    IDLE        no turn
    ASKED       a root turn asked of Codex (turn/start, a command, its machine
                awaited): Codex has not named it yet
    ANSWERING   a slash command answered without a turn, not answered yet
    RUNNING     Codex named the turn (its id is known)
    CANCELLING  the user cancelled it (an ancestor's cancel, for a sub-agent):
                ``turn/interrupt`` goes once the turn is named; it ends when
                Codex says so

Beside the state, a turn's interrupt is ``NONE`` / ``LOOKING_UP`` (another
client's turn, its id being read) / ``SENT`` / ``REFUSED``
(:class:`~bridge.engine.core.record_parts.Interrupt`; the bridge also interrupts a
turn it stops itself, for a model out of reach: :func:`fail`). Both move only as
:data:`MOVES` and :data:`INTERRUPT_MOVES` allow: any other move raises
:class:`~bridge.engine.core.moves.ImpossibleMove`, a defect of the caller. A turn
ends by leaving the record (its state stays what it was: a feature holding it
reads how it ended).

**Transitions** (each a function below; a transition that does not apply
changes nothing and says so: ``False`` or ``None``)::

    event                         function          from                  to
    a prompt, steer, command      begin             IDLE, CANCELLING      ASKED (ANSWERING)
                                                    (any other: replaced,
                                                    logged; see begin)
    Codex names the turn          named             ASKED, CANCELLING     RUNNING, CANCELLING
                                                    (the same turn, unnamed)
    another client's turn starts  foreign_started   IDLE                  RUNNING
    a session opens on a running  joined            any                   RUNNING (ASKED while
      turn (another client's)                                             its id is not read)
    the running turn is read      found             ASKED, RUNNING,       same, its id now the
      (a foreign one's id)                          CANCELLING (same)     one read
    a sub-agent's turn starts     subagent_started  any                   RUNNING (a new turn keeps
                                                                          a cancel that reached the
                                                                          last one), CANCELLING
    a sub-agent's turn read       subagent_running  any                   RUNNING, or IDLE
    work nobody wants any more    unwanted          any                   CANCELLING (named)
    the user cancels              cancel            ASKED, ANSWERING,     CANCELLING
                                                    RUNNING
    the bridge stops the turn     fail              ASKED, RUNNING        same (its failure kept)
    turn/interrupt to be sent     interrupting      named, interrupt      interrupt SENT
                                                    NONE
    turn/interrupt refused        interrupt_refused interrupt SENT        interrupt REFUSED
    Codex ends the turn (or       end               the same turn         IDLE
      refuses to start it)
    a sub-agent's turn ends       end_named         the turn of that id   IDLE
    Codex is lost                 lost              any                   IDLE

A function that takes the ``turn`` a feature holds applies only while that turn
is still the record's (:func:`current`): a late answer from Codex for a turn
that ended (or was replaced) meanwhile changes nothing. These are the
staleness guards of the features; they keep the turn they started, never
``record.turn`` read again later. What was asked of Codex for one turn alone
(its start, the read of its id: ``StartTurn``, ``FindTurn`` on
``record.codex_asks``) is withdrawn here as the turn leaves the record: Codex's
late answer to it never reaches the feature (:meth:`~bridge.engine.core.codex_link.CodexLink.ask`).

**A prompt's states** (the prompts feature's, on the record): *queued*
(``record.queued``: it waits for the turn before it), *sent* (its turn asked of
Codex: ``record.awaiting_message`` until Codex's user message item names it),
*inserted* (``Prompt.message_id``: the client was told its work began), then
*answered* (gone from ``record.prompts``). :func:`prompt_state` reads them;
:func:`insert` moves a prompt to *inserted*, whoever sees it first: the prompts
feature (Codex's user message item, a slash command accepted, a turn ended with
no item) or the hub, as the turn's first tool call or plan (:data:`TURN_TRAFFIC`)
goes to the client (:func:`insert_awaited`).
"""

from __future__ import annotations

import enum
import logging
from typing import TypeVar

from ...acp import permissions as acp_permissions
from ...acp import tools as acp_tools
from ...jsonrpc import RequestId, RpcError
from .facts import PromptInserted
from .moves import checked
from .record_parts import Interrupt, Prompt, Turn, TurnKind, TurnState
from .threads import ThreadRecord, Threads, withdraw_turn

T = TypeVar("T", bound=Turn | None)

log = logging.getLogger(__name__)

__all__ = [
    "INTERRUPT_MOVES",
    "MOVES",
    "TURN_TRAFFIC",
    "Interrupt",
    "PromptState",
    "TurnConflict",
    "TurnState",
    "begin",
    "cancel",
    "current",
    "end",
    "end_named",
    "fail",
    "foreign_started",
    "found",
    "insert",
    "insert_awaited",
    "interrupt",
    "interrupt_refused",
    "interrupting",
    "is_root",
    "joined",
    "looking_up",
    "lost",
    "named",
    "prompt_state",
    "state",
    "subagent_running",
    "subagent_started",
    "unwanted",
]


_S = TurnState
#: A turn's moves, from → to (see the table above). ``RUNNING → ASKED``: a read of another
#: client's turns found none in progress (:func:`found`). Ending is no move: the turn leaves
#: the record.
MOVES: dict[TurnState, frozenset[TurnState]] = {
    _S.IDLE: frozenset(),
    _S.ASKED: frozenset({_S.RUNNING, _S.CANCELLING}),
    _S.ANSWERING: frozenset({_S.CANCELLING}),
    _S.RUNNING: frozenset({_S.ASKED, _S.CANCELLING}),
    _S.CANCELLING: frozenset(),
}

_I = Interrupt
#: A turn's interrupt's moves. ``LOOKING_UP → NONE``: the id was read, the interrupt may go.
INTERRUPT_MOVES: dict[Interrupt, frozenset[Interrupt]] = {
    _I.NONE: frozenset({_I.LOOKING_UP, _I.SENT}),
    _I.LOOKING_UP: frozenset({_I.NONE}),
    _I.SENT: frozenset({_I.REFUSED}),
    _I.REFUSED: frozenset(),
}


def _move(turn: Turn, to: TurnState) -> None:
    turn.state = checked(MOVES, turn.state, to, f"turn {turn.id or '(unnamed)'}")


def _move_interrupt(turn: Turn, to: Interrupt) -> None:
    turn.interrupt = checked(
        INTERRUPT_MOVES, turn.interrupt, to, f"the interrupt of turn {turn.id or '(unnamed)'}"
    )


class PromptState(enum.Enum):
    QUEUED = "queued"
    SENT = "sent"
    INSERTED = "inserted"
    ANSWERED = "answered"


class TurnConflict(RuntimeError):
    """A turn of a kind this client does not begin (another client's, a sub-agent's) was
    begun: a defect of the caller."""


# -- questions --------------------------------------------------------------------------


def state(record: ThreadRecord) -> TurnState:
    """Where ``record``'s turn is (see the module docstring)."""
    return TurnState.IDLE if record.turn is None else record.turn.state


def interrupt(turn: Turn) -> Interrupt:
    return turn.interrupt


def current(record: ThreadRecord, turn: Turn) -> bool:
    """``turn`` is still ``record``'s (it has not ended, nor been replaced)."""
    return record.turn is turn


def is_root(turn: Turn) -> bool:
    """A turn of Codex's the prompts feature runs: a prompt's, a steer's on an idle
    session, or another client's on the session (a slash command answered without a turn
    has none; a sub-agent's is the sub-agents feature's)."""
    return turn.kind in _ROOT_KINDS


def prompt_state(record: ThreadRecord, rid: RequestId) -> PromptState:
    """Where prompt ``rid`` of the session is (see the module docstring)."""
    prompt = record.prompts.get(rid)
    if prompt is None:
        return PromptState.ANSWERED
    if prompt.message_id is not None:
        return PromptState.INSERTED
    if any(waiting.request_id == rid for waiting in record.queued):
        return PromptState.QUEUED
    return PromptState.SENT


# -- a prompt's insertion -------------------------------------------------------------------


#: The session updates only a turn sends, which a prompt's insertion precedes.
TURN_TRAFFIC: frozenset[type] = frozenset(
    {
        acp_tools.ToolCall,
        acp_tools.ToolCallUpdate,
        acp_permissions.ToolCallStatusUpdate,
        acp_tools.Plan,
    }
)


def insert(
    threads: Threads, record: ThreadRecord, prompt: Prompt, message_id: str | None
) -> PromptInserted:
    """``prompt`` is inserted as ``message_id`` or, when none is given, an id of this
    bridge's (``SESSION-prompt-N``, numbered over the connection): the fact to state."""
    if record.awaiting_message == prompt.request_id:
        record.awaiting_message = None
    if message_id is None:
        threads.prompt_ids += 1
        message_id = f"{record.id}-prompt-{threads.prompt_ids}"
    prompt.message_id = message_id
    return PromptInserted(record, prompt.request_id, message_id, prompt.content)


def insert_awaited(
    threads: Threads, record: ThreadRecord, message_id: str | None
) -> PromptInserted | None:
    """The prompt awaiting its user message item is inserted (as ``message_id``, or an id
    of this bridge's): the fact to state, ``None`` when no prompt awaits one."""
    rid = record.awaiting_message
    prompt = record.prompts.get(rid) if rid is not None else None
    return insert(threads, record, prompt, message_id) if prompt is not None else None


# -- a root's turn -------------------------------------------------------------------------


def begin(record: ThreadRecord, kind: TurnKind, request_id: RequestId | None = None) -> Turn:
    """A root turn is asked of Codex for prompt ``request_id`` (``PROMPT``), a steer on an
    idle session (``STEER``), or a slash command answered without a turn (``QUICK``).

    The prompts feature begins one on an idle session, or over a cancelled turn (a steer
    arriving as it ends). A turn that neither ended nor was cancelled is replaced all the
    same, and logged: a steer Codex refused because the turn it named ended, once the
    next one began, starts a turn of its own (:mod:`bridge.engine.features.prompts._steering`)."""
    if kind not in _BEGUN_HERE:
        raise TurnConflict(f"a {kind.value} turn is not begun by this client")
    running = record.turn
    if running is not None and not running.cancelled:
        log.warning(
            "thread %s: a %s turn replaces its %s turn %s",
            record.id,
            kind.value,
            running.kind.value,
            running.id,
        )
    first = TurnState.ANSWERING if kind is TurnKind.QUICK else TurnState.ASKED
    return _take(record, Turn(request_id=request_id, kind=kind, state=first))


def named(record: ThreadRecord, turn: Turn, turn_id: str) -> bool:
    """Codex named ``turn`` (its answer to ``turn/start``, or ``turn/started``, whichever
    came first); ``False`` when it is no longer the record's, or was named already."""
    if record.turn is not turn or turn.id is not None:
        return False
    turn.id = turn_id
    if turn.state is TurnState.ASKED:
        _move(turn, TurnState.RUNNING)
    record.own_turns.add(turn_id)
    return True


def foreign_started(record: ThreadRecord, turn_id: str) -> Turn | None:
    """A turn no prompt here asked for started on an idle session (another client's, or
    Codex's own): the session's turn all the same. ``None`` when a turn runs already."""
    if record.turn is not None:
        return None
    return _take(record, Turn(id=turn_id, kind=TurnKind.FOREIGN))


def joined(record: ThreadRecord, turn_id: str | None) -> Turn:
    """The session opened while another client's turn runs on it (``turn_id`` when the
    thread's turns named it): its items started before stream nothing here."""
    first = TurnState.ASKED if turn_id is None else TurnState.RUNNING
    return _take(record, Turn(id=turn_id, kind=TurnKind.FOREIGN, joined=set(), state=first))


def found(record: ThreadRecord, turn: Turn, turn_id: str | None) -> bool:
    """The thread's turns were read while ``turn`` (a foreign one) runs: its id is the
    one in progress (``None``: none is). ``False`` when ``turn`` is no longer the
    record's. An interrupt that waited for the id may go now."""
    if record.turn is not turn:
        return False
    turn.id = turn_id
    if turn.interrupt is Interrupt.LOOKING_UP:
        _move_interrupt(turn, Interrupt.NONE)
    if turn.state in (TurnState.ASKED, TurnState.RUNNING):
        now = TurnState.ASKED if turn_id is None else TurnState.RUNNING
        if now is not turn.state:
            _move(turn, now)
    return True


def cancel(turn: Turn) -> bool:
    """The user cancelled ``turn``'s work; ``False`` when it was cancelled already."""
    if turn.cancelled:
        return False
    _move(turn, TurnState.CANCELLING)
    return True


def fail(turn: Turn, failure: RpcError) -> bool:
    """The bridge stops ``turn`` itself (no sign-in, the model out of reach): ``failure``
    answers its prompt once Codex ends it. ``False`` when it was stopped already."""
    if turn.failure is not None:
        return False
    turn.failure = failure
    return True


def looking_up(turn: Turn) -> bool:
    """An unnamed foreign turn is to be interrupted: its id is read first (once). ``False``
    when it is named, is not foreign, or is being read already."""
    if turn.id is not None or turn.kind is not TurnKind.FOREIGN:
        return False
    if turn.interrupt is not Interrupt.NONE:
        return False
    _move_interrupt(turn, Interrupt.LOOKING_UP)
    return True


def interrupting(turn: Turn) -> bool:
    """``turn/interrupt`` is to be sent for ``turn`` now: ``True`` once, when it is named."""
    if turn.id is None or turn.interrupt is not Interrupt.NONE:
        return False
    _move_interrupt(turn, Interrupt.SENT)
    return True


def interrupt_refused(turn: Turn) -> bool:
    """Codex refused the interrupt (the turn had just ended, most often): no
    ``turn/completed`` of it is to be awaited on its account."""
    if turn.interrupt is not Interrupt.SENT:
        return False
    _move_interrupt(turn, Interrupt.REFUSED)
    return True


def end(record: ThreadRecord, turn: Turn) -> bool:
    """``turn`` ended (Codex said so, refused to start it, or the command was answered):
    the thread is idle. ``False`` when it was no longer the record's."""
    if record.turn is not turn:
        return False
    _take(record, None)
    return True


# -- a sub-agent's turn ------------------------------------------------------------------


def subagent_started(record: ThreadRecord, turn_id: str, root_turn_id: str | None) -> Turn:
    """A sub-agent's turn started (``turn/started``), for root turn ``root_turn_id``. A
    turn whose end was never seen is replaced: a cancel that reached it still stands."""
    previous = record.turn
    if previous is not None and previous.id == turn_id:
        turn = previous
    else:
        kept = previous is not None and previous.cancelled
        turn = Turn(
            id=turn_id,
            kind=TurnKind.SUBAGENT,
            state=TurnState.CANCELLING if kept else TurnState.RUNNING,
        )
    turn.root_turn_id = root_turn_id
    return _take(record, turn)


def subagent_running(
    record: ThreadRecord, turn_id: str | None, root_turn_id: str | None = None
) -> Turn | None:
    """A sub-agent's turns were read (a load's history, Codex come back): it runs turn
    ``turn_id`` (``None``: none)."""
    return _take(
        record,
        None
        if turn_id is None
        else Turn(id=turn_id, kind=TurnKind.SUBAGENT, root_turn_id=root_turn_id),
    )


def unwanted(record: ThreadRecord, turn_id: str) -> Turn:
    """Sub-agent work that nobody here wants (its session closed) runs turn ``turn_id``:
    cancelled, to be interrupted."""
    cancelled = Turn(id=turn_id, kind=TurnKind.SUBAGENT, state=TurnState.CANCELLING)
    return _take(record, cancelled)


def end_named(record: ThreadRecord, turn_id: str) -> bool:
    """A sub-agent's turn ``turn_id`` ended; ``False`` when the record runs another."""
    if record.turn is None or record.turn.id != turn_id:
        return False
    _take(record, None)
    return True


# -- any turn --------------------------------------------------------------------------------


def lost(record: ThreadRecord) -> Turn | None:
    """Codex is gone: the record's turn will never be heard of again. The turn it had."""
    turn = record.turn
    _take(record, None)
    return turn


def _take(record: ThreadRecord, turn: T) -> T:
    """``turn`` is ``record``'s from now on: what the turn it replaces asked of Codex is
    stale (see ``StartTurn``)."""
    previous = record.turn
    if previous is not None and previous is not turn:
        withdraw_turn(record, previous)
    record.turn = turn
    return turn


_ROOT_KINDS = frozenset({TurnKind.PROMPT, TurnKind.STEER, TurnKind.FOREIGN})
_BEGUN_HERE = frozenset({TurnKind.PROMPT, TurnKind.STEER, TurnKind.QUICK})
