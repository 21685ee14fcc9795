"""A stored Codex thread as an ACP session: a ``session/list`` row, whether it is a
root, and what a client is told when Codex holds no thread of an id."""

from __future__ import annotations

from datetime import datetime, timedelta

from msgspec import UNSET

from ...acp import sessions as acp_sessions
from ...codex import threads
from ...codex import types as codex_types
from ...jsonrpc.peer import ErrorObject

#: How Codex 0.169 starts its ``thread/read`` refusal of an id that is not a UUID.
INVALID_THREAD_ID = "invalid thread id"
NO_ROLLOUT = threads.NO_ROLLOUT


def is_unstored(error: ErrorObject) -> bool:
    """Codex holds the thread but has no turn of it to list (``threads.NO_TURNS``)."""
    return threads.no_turns(error.code, error.message)


def not_found_message(session_id: str, codex_message: str) -> str:
    """The -32002 message for a thread ``thread/read`` refused.

    Codex 0.169 stores a thread only at its first turn, and a Codex answers a
    well-formed id it neither holds nor stored with ``thread not loaded: ID``, whether
    the id was never made or was made by an earlier Codex and never prompted: it cannot
    tell them apart, so neither can the bridge. The message says why such a session is
    gone, since that is the surprise; an id that is not a thread id at all is named as one.
    """
    if codex_message.startswith(INVALID_THREAD_ID):
        return f"Session not found: {session_id} is not a Codex thread id"
    return (
        f"Session not found: {session_id}. This Codex holds no thread of that id and has "
        "none stored: a session is stored only once it has been prompted, so one never "
        "prompted does not survive a restart of Codex (it lives as long as the Codex that "
        "created it)"
    )


def is_root(thread: codex_types.Thread) -> bool:
    """An interactive thread a person started, not a sub-agent's."""
    if thread.parentThreadId is not None:
        return False
    return not (isinstance(thread.source, dict) and "subAgent" in thread.source)


def session_info(thread: codex_types.Thread) -> acp_sessions.SessionInfo:
    """A listed thread: its name, else its preview (first user message), on one line."""
    title = " ".join((thread.name or thread.preview).split())
    return acp_sessions.SessionInfo(
        sessionId=thread.id,
        cwd=thread.cwd,
        title=title or UNSET,
        updatedAt=iso_time(thread.updatedAt) if thread.updatedAt is not None else UNSET,
    )


_EPOCH = datetime(1970, 1, 1)  # UTC's, naive: isoformat then writes no offset


def iso_time(unix_seconds: int) -> str:
    """Codex's Unix seconds as ISO 8601 in UTC (``2026-11-30T05:01:16Z``)."""
    # Arithmetic on a naive epoch: under half of strftime's cost, paid for every row of
    # every listed page.
    return (_EPOCH + timedelta(seconds=unix_seconds)).isoformat() + "Z"
