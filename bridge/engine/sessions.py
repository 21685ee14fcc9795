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
    #: The immediate parent of a sub-agent's session (``None`` for a root).
    parent_id: str | None = None
    #: False for a sub-agent the client is not shown (it did not declare
    #: ``subagents``): its updates are not sent, its questions go to its root.
    visible: bool = True

    @property
    def thread_id(self) -> str:
        return self.session_id
