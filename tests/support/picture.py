"""Threads as Codex lists them, for the daemon's picture and its page."""

from __future__ import annotations

from bridge.codex.types import Thread


def thread(
    thread_id: str, status: str = "idle", parent: str | None = None, updated: int | None = None
) -> Thread:
    """A thread in ``/w``, its preview naming it, ``status`` its status type."""
    return Thread(
        id=thread_id,
        cwd="/w",
        preview=f"work {thread_id}",
        status={"type": status},
        parentThreadId=parent,
        updatedAt=updated,
    )
