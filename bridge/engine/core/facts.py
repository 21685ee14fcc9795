"""What the features say happened, once, in no protocol version's words.

A feature states a fact with :meth:`ClientLink.state <bridge.engine.core.client_link.ClientLink.state>`;
the client's face (:mod:`bridge.engine.faces.v1`, :mod:`bridge.engine.faces.v2`)
renders it in its version's messages, or not at all (v1 has no work state and no
insertion of a prompt). A session's updates are facts too: the ACP update Structs
the views build (a tool call created or changed, a plan, the commands, the
config options, the mode), sent with :meth:`ClientLink.update`; each face has a
rendering for every one of them (``tests/test_faces.py`` checks it).

Each fact names the session it is about by its record, so that what a face keeps
of a session lives in the record (:class:`~bridge.engine.core.threads.ThreadRecord`)
and is forgotten with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias, get_args

from msgspec import Raw

from ...acp.types import PromptResult
from ...jsonrpc import RequestId, RpcError
from .record_parts import Prompt
from .threads import ThreadRecord


@dataclass(frozen=True, slots=True)
class PromptInserted:
    """A prompt was inserted into the session: its work began, as the user message
    ``message_id``. The prompts feature decides when, and under which id
    (:mod:`bridge.engine.features.prompts.prompts`, "Insertion"): Codex's user message item's
    id, or one of the bridge's (:func:`bridge.engine.core.turns.insert`)."""

    record: ThreadRecord
    request_id: RequestId
    message_id: str
    #: The prompt as the client sent it.
    content: list[Raw]


@dataclass(frozen=True, slots=True)
class PromptEnded:
    """A prompt's work ended: with a stop reason (a ``PromptResult``), or an error.
    ``prompt`` is ``None`` for a prompt no record held (it is answered all the same)."""

    record: ThreadRecord
    request_id: RequestId
    prompt: Prompt | None
    outcome: PromptResult | RpcError


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """Codex started a turn on the session (a prompt's, or one nobody here asked for)."""

    thread_id: str
    turn_id: str


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """Codex ended a turn on the session: ``status`` as Codex says it, and its error."""

    thread_id: str
    turn_id: str
    status: str
    error: str | None


@dataclass(frozen=True, slots=True)
class SessionOpened:
    """A session opened (new, load, resume, fork) with these settings: ``result`` is the
    open's answer as the settings feature filled it (its type says which open it was)."""

    record: ThreadRecord
    request_id: RequestId
    result: Any


@dataclass(frozen=True, slots=True)
class ToolCallCancelled:
    """The client cancelled tool call ``call_id`` of the session (a running command): a
    failure of it, from now on, is its cancel."""

    record: ThreadRecord
    call_id: str


Fact: TypeAlias = (
    PromptInserted | PromptEnded | TurnStarted | TurnEnded | SessionOpened | ToolCallCancelled
)

#: Every fact type (each face renders each; the test of the faces reads this).
FACTS: tuple[type, ...] = get_args(Fact)

__all__ = [
    "FACTS",
    "Fact",
    "PromptEnded",
    "PromptInserted",
    "SessionOpened",
    "ToolCallCancelled",
    "TurnEnded",
    "TurnStarted",
]
