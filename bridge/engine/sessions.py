"""Per-session state: the thread behind an ACP session and its prompt in flight.

A session id *is* the Codex thread id (a UUIDv7): unique, stable across
restarts of either program, so nothing has to be persisted to keep it stable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..jsonrpc import RequestId


@dataclass(slots=True)
class Prompt:
    """A ``session/prompt`` waiting for its Codex turn to end."""

    request_id: RequestId
    turn_id: str | None = None
    cancel_requested: bool = False
    interrupt_sent: bool = False
    # The last non-retried ``error`` notification: the reason a failed turn gives.
    error_message: str | None = None


@dataclass(slots=True)
class Session:
    session_id: str
    cwd: str
    prompt: Prompt | None = None
    # Items whose text arrived as deltas; their ``item/completed`` repeats it.
    streamed_items: set[str] = field(default_factory=set)

    @property
    def thread_id(self) -> str:
        return self.session_id
