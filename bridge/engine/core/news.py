"""What a feature tells the engine happened, so that the engine decides what follows.

A feature is handed no callable of the engine's and never calls back up into it.
Where what it did needs other features to react (a prompt's end, a session's open,
a close that may finish), it says so with :meth:`Hub.happened
<bridge.engine.core.hub.Hub.happened>` as the last thing it does, and returns. The
engine takes what was said once the feature returns (``Engine._follow``), in the
order it was said, each item's own consequences before the next item: the order
the calls had when features called up, now decided in one place, ``engine.py``.

A :class:`~bridge.engine.core.facts.PromptEnded` is said this way too: the engine
adds what the client's extensions add to it (AIR's failure record, the quota, the
files report) before the face renders it.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from ...codex import types as codex_types
from ...jsonrpc import RequestId
from .facts import PromptEnded
from .threads import ThreadRecord


class WorkEnded(msgspec.Struct, frozen=True):
    """The session's work ended: its prompt was answered (its turn ended, Codex refused
    it, its machine was out of reach) or a turn nobody here waited for ended. A close
    waiting on it may finish, waiting steers meet an idle session, the next queued
    prompt may start."""

    record: ThreadRecord


class SessionReady(msgspec.Struct, frozen=True):
    """A session opened (new, load, resume, fork): ``result`` is the answer to client
    request ``request_id`` before the settings fill it; ``opened`` is Codex's answer."""

    record: ThreadRecord
    request_id: RequestId
    result: Any
    opened: codex_types.ThreadStartResult


class CloseDue(msgspec.Struct, frozen=True):
    """A session's close may finish: its work is over. The session is forgotten (and its
    sub-agents), then the closes ``waiting`` are answered once Codex unsubscribed."""

    record: ThreadRecord
    waiting: tuple[RequestId, ...]


class TurnWanted(msgspec.Struct, frozen=True):
    """A turn no prompt waits for is wanted on an idle session (a proposed plan's
    implementation), with ``inputs``."""

    record: ThreadRecord
    inputs: tuple[Any, ...]


class ClientWaited(msgspec.Struct, frozen=True):
    """Client messages that waited for Codex (its handshake, or its return) may be handled
    now, in order: Codex is ready, or known to be away."""

    messages: tuple[bytes, ...]


class V2Chosen(msgspec.Struct, frozen=True):
    """The client's ``initialize`` (request ``request_id``, its decoded ``params``) asks for
    ACP v2: its face and request table are built, then it is answered."""

    request_id: RequestId
    params: Any


class InterruptRefused(msgspec.Struct, frozen=True):
    """Codex refused to interrupt a sub-agent's turn: turn ends held behind it may go."""


News: TypeAlias = (
    PromptEnded
    | WorkEnded
    | SessionReady
    | CloseDue
    | TurnWanted
    | ClientWaited
    | V2Chosen
    | InterruptRefused
)

__all__ = [
    "ClientWaited",
    "CloseDue",
    "InterruptRefused",
    "News",
    "PromptEnded",
    "SessionReady",
    "TurnWanted",
    "V2Chosen",
    "WorkEnded",
]
