"""What a record asks Codex.

A Codex request whose answer changes a record is an entry on that record
(``ThreadRecord.codex_asks``) from the moment it is sent until Codex answers it
(:meth:`bridge.engine.core.codex_link.CodexLink.ask`). The answer goes to the feature with the entry,
and only while the record still holds it: an entry is withdrawn by what ends what it
is about, and its answer is then stale (dropped). A ``StartTurn`` or a ``FindTurn`` is
withdrawn when its turn leaves the record (:mod:`bridge.engine.core.turns`); a read of
what the record shows (``ReadSubagent``, ``ReadParentage``, ``ListSkills``,
``ListTerminals``) when the record is forgotten or dropped (:class:`~bridge.engine.core.threads.Threads`,
:func:`~bridge.engine.core.threads.withdraw_record`). The
others are answered whatever became of their record: the answer is owed to someone
else (a client's steer, load or pick, prompts waiting on a resume), or is news of a
turn that has ended (a refused interrupt).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from ...codex import types as codex_types
from ...jsonrpc import RequestId
from .record_parts import LeftOut, Settings, Steer, Turn, Unplaced


@dataclass(slots=True, eq=False)
class StartTurn:
    """``turn/start`` (or a slash command's request, ``command``) for ``turn``: a prompt's
    (``turn.request_id``), or a steer's on an idle session."""

    turn: Turn
    #: A slash command's request (``thread/compact/start``...): no user message item will
    #: name its prompt.
    command: bool = False


@dataclass(slots=True, eq=False)
class InterruptTurn:
    """``turn/interrupt`` of ``turn`` (named): a refusal is news even once it has ended."""

    turn: Turn


@dataclass(slots=True, eq=False)
class FindTurn:
    """``thread/read`` (with turns) naming ``turn``, another client's turn already running
    when the session opened, so that it can be interrupted."""

    turn: Turn


@dataclass(slots=True, eq=False)
class SteerTurn:
    """``turn/steer`` of ``steer``'s input into turn ``expected_turn_id``: the steer's
    client request is answered whatever became of the session."""

    steer: Steer
    expected_turn_id: str


@dataclass(slots=True, eq=False)
class ResumeThread:
    """``thread/resume`` of a session after Codex came back; ``written``: its turns were
    read already, to have Codex write a thread it never stored (tried once)."""

    written: bool = False


@dataclass(slots=True, eq=False)
class WriteThread:
    """``thread/read`` (with turns) of a session Codex holds and never wrote, after Codex
    came back: reading it writes it; its resume is tried again, whatever the answer."""


@dataclass(slots=True, eq=False)
class ReadSubagent:
    """``thread/read`` (with turns) of a sub-agent after Codex came back: its status and
    its last turn. Nothing to do once it is forgotten."""


@dataclass(slots=True, eq=False)
class ListSkills:
    """``skills/list`` for a session's folder: its skills become its commands (offered as
    to an AIR client, ``air``). Nothing to do once it is forgotten."""

    air: bool


@dataclass(slots=True, eq=False)
class ListTerminals:
    """``thread/backgroundTerminals/list`` of a session opened again: the commands its
    thread still runs become tasks. Nothing to do once it is forgotten."""


@dataclass(slots=True, eq=False)
class ReadCost:
    """``account/usage/read`` of a session's thread at a turn's end: what Codex estimates
    it cost so far goes on its usage. Nothing to do once it is forgotten."""


@dataclass(slots=True, eq=False)
class ReadParentage:
    """``thread/read`` of a thread no session shows yet, to learn its parent and place it
    (``unplaced``: what it holds meanwhile). Nothing to place once its record is dropped."""

    unplaced: Unplaced


@dataclass(slots=True, eq=False)
class OpenStored:
    """A load or resume of a stored session (``method``, client request ``rid``), one
    request after the other on the record being opened: ``thread/read`` (``stored``, once
    answered), ``thread/resume`` (``written``: again, once its turns were read to have Codex
    write a thread it never stored), ``config/read`` for a thread never stored. The client
    waits on it: never withdrawn (a cancel of the client's marks it ``cancelled``)."""

    rid: RequestId
    method: str
    cwd: str
    #: ``config`` for the resume: the bridge's overrides and the client's MCP servers.
    config: dict[str, Any]
    #: The session's other folders, as the client named them for this open (checked).
    folders: tuple[str, ...]
    #: The history (and its sub-agents') goes out before the answer (a load).
    replay: bool
    #: The MCP servers the client named that are left out (told once the session opens).
    left_out: tuple[LeftOut, ...] = ()
    stored: codex_types.Thread | None = None
    written: bool = False
    #: The client cancelled it (``$/cancel_request``, answered -32800): Codex's answer to
    #: what was asked already ends it, and nothing more is asked.
    cancelled: bool = False


@dataclass(slots=True, eq=False)
class StorePick:
    """``thread/settings/update`` storing the user's pick (``change``) in the thread:
    once Codex has it, ``settings`` say so and client request ``rid`` is answered, as
    ``session/set_mode`` (``mode``) or as a config option's set. The client waits on it:
    never withdrawn."""

    rid: RequestId
    settings: Settings
    #: Codex's ``ThreadSettingsUpdateParams``.
    change: Any
    mode: bool


#: What a record may be asking Codex (a closed union: :meth:`bridge.engine.core.codex_link.CodexLink.ask`).
CodexAsk: TypeAlias = (
    StartTurn
    | InterruptTurn
    | FindTurn
    | SteerTurn
    | ResumeThread
    | WriteThread
    | ReadSubagent
    | ReadParentage
    | OpenStored
    | StorePick
    | ListSkills
    | ListTerminals
    | ReadCost
)
