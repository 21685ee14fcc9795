"""What the session lifecycle asks of the features beside it, each behind a small
protocol (the wiring hands them in: :mod:`bridge.engine.engine`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ....codex import types as codex_types
from ....jsonrpc import RequestId
from ...core.record_parts import LeftOut
from ...core.threads import ThreadRecord

Started = codex_types.ThreadStartResult
LeftOuts = tuple[LeftOut, ...]


class Opener(Protocol):
    """Makes a root session's record and says its open is done (:mod:`.opening`)."""

    def open_root(self, thread_id: str, cwd: str, left_out: LeftOuts = ()) -> ThreadRecord:
        """The client opened a session on ``thread_id``: its record."""

    def ready(self, record: ThreadRecord, rid: RequestId, result: Any, opened: Started) -> None:
        """The open is done: ``result`` is the engine's to send, with what follows it."""

    def mcp_servers(
        self, mcp_servers: Any, method: str
    ) -> tuple[dict[str, Any], tuple[LeftOut, ...]]:
        """The client's MCP servers as Codex's ``config``; those left out."""


class HistoryReplay(Protocol):
    """Replays a loaded root's stored items and its sub-agents' (:mod:`bridge.engine.features.subagents.history`)."""

    def replay(
        self, root: ThreadRecord, stored: codex_types.Thread, then: Callable[[], None]
    ) -> None:
        """Replay ``stored`` as ``root``'s history, then call ``then``."""


class SubagentTree(Protocol):
    """The sub-agents under a session (:mod:`bridge.engine.features.subagents`)."""

    def cancel_work(self, session_id: str) -> None:
        """Cancel the work under ``session_id``: its sub-agents' turns and their commands."""

    def open_failed(self, thread_id: str) -> None:
        """A load, resume or fork of ``thread_id`` failed."""


class Rejoin(Protocol):
    """Subscribes to a reopened root's sub-agents (:mod:`bridge.engine.features.subagents.rejoin`)."""

    def rejoin(self, root: ThreadRecord, then: Callable[[], None]) -> None:
        """Subscribe to the sub-agents Codex holds under ``root``, then call ``then``."""


class PromptControl(Protocol):
    """What a close needs of the prompts feature."""

    def cancel(self, record: ThreadRecord) -> None:
        """Cancel the session's prompt and its queue (``session/cancel``)."""

    def cancel_queued(self, record: ThreadRecord) -> None:
        """Answer the prompts queued on the session ``cancelled``, its turn left alone."""
