"""The session index at the engine: the session-list extensions proposal's rendering
beside AIR's (one picture), and what the index keeps once threads are gone."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.engine.features.sessions.index import LIST_CHANGED

from .support.air import declaring
from .support.proposals import CWD, Client

RECENT = 1_796_014_876  # 2026-11-30T05:01:16Z


def thread(thread_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": thread_id,
        "cwd": CWD,
        "preview": "hello",
        "updatedAt": RECENT,
        "recencyAt": RECENT,
        "status": {"type": "idle"},
        "source": "vscode",
        "model": "gpt-test",
        **fields,
    }


def status(thread_id: str, kind: str, flags: list[str] | None = None) -> dict[str, Any]:
    return {"threadId": thread_id, "status": {"type": kind, "activeFlags": flags or []}}


LISTED: dict[str, Any] = {"session": {"listChanged": {}}}


@pytest.mark.parametrize("version", [1, 2])
def test_a_client_of_the_proposal_gets_the_fields_on_the_row_and_the_hint(version: int) -> None:
    h = Client(version, LISTED)
    assert h.caps()["list"] == {"changes": {}}
    (row,) = h.list_page(thread("a", forkedFromId="z"))
    assert {k: row[k] for k in ("lastPromptAt", "state", "model", "forkedFrom")} == {
        "lastPromptAt": "2026-11-30T05:01:16Z",
        "state": "idle",
        "model": "gpt-test",
        "forkedFrom": "z",
    }
    assert "_meta" not in row and "lastTurnEndedAt" not in row

    h.codex_notify("thread/status/changed", status("a", "active", ["waitingOnApproval"]))
    assert h.hints(LIST_CHANGED) == [{"cwd": CWD}]
    assert not h.hints("_session/list_changed")
    turn = {"id": "t1", "status": "completed", "items": [], "completedAt": RECENT + 60}
    h.codex_notify("turn/completed", {"threadId": "a", "turn": turn})
    h.codex_notify("thread/status/changed", status("a", "idle"))
    (row,) = h.list_page(thread("a", status={"type": "notLoaded"}))
    # Not loaded by the list's reading: the state Codex last pushed stands.
    assert row["state"] == "idle" and row["lastTurnEndedAt"] == "2026-11-30T05:02:16Z"
    h.validate()


def test_an_air_client_that_also_declares_the_proposal_gets_both_renderings() -> None:
    h = Client(1, {**declaring("sessionIndex"), **LISTED})
    (row,) = h.list_page(thread("a"))
    assert row["state"] == "idle"
    assert row["_meta"]["jetbrains"]["air"]["state"] == "idle"
    assert row["_meta"]["jetbrains"]["air"]["archived"] is False
    h.codex_notify("thread/status/changed", status("a", "active"))
    assert h.hints(LIST_CHANGED) == h.hints("_session/list_changed") == [{"cwd": CWD}]
    h.validate()


def test_a_client_declaring_neither_gets_plain_rows() -> None:
    h = Client(1, {})
    assert h.caps()["list"] == {}
    (row,) = h.list_page(thread("a"))
    assert set(row) == {"sessionId", "cwd", "title", "updatedAt"}
    h.codex_notify("thread/status/changed", status("a", "active"))
    assert not h.hints(LIST_CHANGED)


@pytest.mark.parametrize("gone", ["thread/deleted", "thread/archived"])
def test_threads_deleted_or_archived_leave_nothing_behind(gone: str) -> None:
    h = Client(1, {**declaring("sessionIndex"), **LISTED})
    index = h.engine.session_index
    ids = [f"t{n}" for n in range(20)]
    h.list_page(*(thread(i) for i in ids))
    for i in ids:
        h.codex_notify("thread/status/changed", status(i, "active"))
        turn = {"id": f"turn-{i}", "status": "completed", "items": [], "completedAt": RECENT}
        h.codex_notify("turn/completed", {"threadId": i, "turn": turn})
    assert index.known() == set(ids)
    before = len(h.hints(LIST_CHANGED))
    for i in ids:
        h.codex_notify(gone, {"threadId": i})
    assert index.known() == set()
    # Each is a change of the listed cwd (its row left the list).
    assert len(h.hints(LIST_CHANGED)) == before + len(ids)


def test_a_closed_thread_keeps_its_row_without_a_state() -> None:
    h = Client(1, LISTED)
    h.list_page(thread("a", status={"type": "active", "activeFlags": []}))
    h.codex_notify("thread/closed", {"threadId": "a"})
    (row,) = h.list_page(thread("a", status={"type": "notLoaded"}))
    assert "state" not in row
    assert h.engine.session_index.known() == {"a"}  # its cwd, for the next change
