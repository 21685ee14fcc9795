"""A cancel stops the commands the cancelled work left running (engine level).

The end-to-end proof, with real processes, is ``tests/test_e2e_cancel_commands.py``; here the
rules: which threads get ``thread/backgroundTerminals/clean``, when, and what happens when
Codex does not know the method.
"""

from __future__ import annotations

from typing import Any

from tests.support.engine_harness import Harness

CLEAN = "thread/backgroundTerminals/clean"


def cleans(h: Harness) -> list[dict[str, Any]]:
    return [m for m in h.to_codex if m.get("method") == CLEAN]


def cleaned(h: Harness) -> list[str]:
    return [m["params"]["threadId"] for m in cleans(h)]


def test_cancel_cleans_the_thread_at_once_and_again_when_its_turn_ends() -> None:
    h = Harness()
    sid = h.new_session("thread-1")
    other = h.new_session("thread-2")
    rid = h.start_prompt(sid)
    h.client_notify("session/cancel", {"sessionId": sid})
    interrupt = h.codex_request("turn/interrupt")
    assert cleaned(h) == ["thread-1"]
    # The interrupt comes first: the command the turn waits on is then in the background.
    assert h.to_codex.index(interrupt) < h.to_codex.index(cleans(h)[0])
    h.codex_reply(interrupt["id"], {})
    h.complete_turn(sid, status="interrupted")
    assert cleaned(h) == ["thread-1", "thread-1"]
    assert (h.client_response(rid) or {})["result"] == {"stopReason": "cancelled"}
    assert other not in cleaned(h)
    # A later turn of the same session ends without a clean: only cancelled work is stopped.
    h.start_prompt(sid, turn_id="turn-2")
    h.complete_turn(sid, "turn-2")
    assert cleaned(h) == ["thread-1", "thread-1"]


def test_cancelling_an_idle_session_stops_what_it_left_in_the_background() -> None:
    h = Harness()
    sid = h.new_session()
    h.client_notify("session/cancel", {"sessionId": sid})
    assert cleaned(h) == [sid]
    assert not [m for m in h.to_codex if m.get("method") == "turn/interrupt"]


def test_a_cancel_for_a_session_the_client_does_not_hold_stops_nothing() -> None:
    h = Harness()
    h.new_session("thread-1")
    h.client_notify("session/cancel", {"sessionId": "thread-of-someone-else"})
    assert cleaned(h) == []


def test_close_cleans_and_the_closed_turns_end_cleans_again() -> None:
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid)
    close = h.client_request("session/close", {"sessionId": sid})
    assert cleaned(h) == [sid]
    h.codex_reply(h.codex_request("turn/interrupt")["id"], {})
    h.complete_turn(sid, status="interrupted")
    assert cleaned(h) == [sid, sid]
    h.codex_reply(h.codex_request("thread/unsubscribe")["id"], {"status": "unsubscribed"})
    assert (h.client_response(close) or {}).get("result") == {}


def test_a_codex_without_the_method_is_asked_once() -> None:
    h = Harness()
    sid = h.new_session()
    h.client_notify("session/cancel", {"sessionId": sid})
    h.codex_error(cleans(h)[0]["id"], "Invalid request: unknown variant `" + CLEAN + "`")
    h.client_notify("session/cancel", {"sessionId": sid})
    assert len(cleans(h)) == 1


def test_other_errors_do_not_stop_later_cleans() -> None:
    h = Harness()
    sid = h.new_session()
    h.client_notify("session/cancel", {"sessionId": sid})
    # A session never prompted is no thread Codex stored yet: its clean is refused.
    h.codex_error(cleans(h)[0]["id"], f"thread not found: {sid}")
    h.client_notify("session/cancel", {"sessionId": sid})
    assert len(cleans(h)) == 2
