"""One session in several windows: client connections on one shared Codex, each an engine fed
the same Codex events (``tests/support/engine_harness.py`` ``Windows``).

Codex sends every event of a thread to each connection subscribed to it, whoever started the
turn. Window ``a`` created the session and prompts; window ``b`` opened it again. What each rule
says is checked from both sides.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tests.support.engine_harness import Harness, Windows
from tests.test_v2 import V2

THREAD = "thread-1"
TEXT = [{"type": "text", "text": "write a poem", "text_elements": []}]


def _stream_a_turn(
    w: Windows, turn: str = "turn-1", start: bool = True, only_a: bool = False
) -> int | None:
    """``a`` prompts (if ``start``); Codex runs the turn: its user message, then some text
    (``only_a``: to ``a`` alone, ``b`` not yet subscribed)."""
    rid = w.a.start_prompt(THREAD, "write a poem", turn) if start else None
    notify = w.a.codex_notify if only_a else w.notify
    note = {"threadId": THREAD, "turn": {"id": turn, "status": "inProgress", "items": []}}
    notify("turn/started", note)
    user = {"type": "userMessage", "id": f"um-{turn}", "content": TEXT}
    notify("item/started", {"threadId": THREAD, "turnId": turn, "item": user})
    notify("item/completed", {"threadId": THREAD, "turnId": turn, "item": user})
    answer = {"type": "agentMessage", "id": f"msg-{turn}", "text": ""}
    notify("item/started", {"threadId": THREAD, "turnId": turn, "item": answer})
    delta = {"threadId": THREAD, "turnId": turn, "itemId": f"msg-{turn}", "delta": "roses"}
    notify("item/agentMessage/delta", delta)
    return rid


def _windows() -> Windows:
    w = Windows(THREAD)
    w.a.new_session(THREAD)
    assert w.b.client_response(w.open("session/load")) is not None
    return w


def _kinds(h: Harness) -> list[str]:
    return [u["sessionUpdate"] for u in h.updates(THREAD)]


def test_a_turn_another_window_started_shows_its_prompt_then_streams() -> None:
    w = _windows()
    _stream_a_turn(w)
    # b did not send it: the prompt is news there, before the answer.
    assert _kinds(w.b)[-2:] == ["user_message_chunk", "agent_message_chunk"]
    prompt = [u for u in w.b.updates(THREAD) if u["sessionUpdate"] == "user_message_chunk"]
    assert prompt == [
        {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "write a poem"},
            "messageId": "um-turn-1",
        }
    ]
    # a sent it: its own prompt is not echoed.
    assert "user_message_chunk" not in _kinds(w.a)


@pytest.mark.parametrize("cancelling", ["a", "b"])
def test_a_cancel_from_either_window_stops_the_turn_and_the_prompt_ends_cancelled(
    cancelling: str,
) -> None:
    w = _windows()
    rid = _stream_a_turn(w)
    window = w.a if cancelling == "a" else w.b
    window.client_notify("session/cancel", {"sessionId": THREAD})
    interrupts = [m for m in window.to_codex if m.get("method") == "turn/interrupt"]
    # The turn id b knows from turn/started, though b did not start the turn.
    assert [m["params"] for m in interrupts] == [{"threadId": THREAD, "turnId": "turn-1"}]
    window.codex_reply(interrupts[0]["id"], {})
    w.notify(
        "turn/completed",
        {"threadId": THREAD, "turn": {"id": "turn-1", "status": "interrupted", "items": []}},
    )
    assert w.a.client_response(rid) == {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {"stopReason": "cancelled"},
    }
    # Neither window is left with a turn: b's next prompt starts one at once.
    rid_b = w.b.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": "next"}]}
    )
    assert w.b.codex_request("turn/start")["params"]["threadId"] == THREAD
    assert w.b.client_response(rid_b) is None


def test_a_prompt_from_another_window_waits_for_the_running_turn_then_starts() -> None:
    w = _windows()
    rid_a = _stream_a_turn(w)
    rid_b = w.b.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": "then this"}]}
    )
    # Queued behind a's turn: nothing goes to Codex yet.
    assert not [m for m in w.b.to_codex if m.get("method") == "turn/start"]
    w.notify(
        "turn/completed",
        {"threadId": THREAD, "turn": {"id": "turn-1", "status": "completed", "items": []}},
    )
    assert w.a.result(rid_a) == {"stopReason": "end_turn"}
    start = w.b.codex_request("turn/start")
    assert start["params"]["input"][0]["text"] == "then this"
    w.b.codex_reply(start["id"], {"turn": {"id": "turn-2", "status": "inProgress", "items": []}})
    # b's turn is a's "another window's" turn now: a sees b's prompt, and a prompt of a's waits.
    _stream_a_turn(w, "turn-2", start=False)
    assert _kinds(w.a)[-2:] == ["user_message_chunk", "agent_message_chunk"]
    w.a.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": "more"}]}
    )
    assert len([m for m in w.a.to_codex if m.get("method") == "turn/start"]) == 1
    w.notify(
        "turn/completed",
        {"threadId": THREAD, "turn": {"id": "turn-2", "status": "completed", "items": []}},
    )
    assert w.b.result(rid_b) == {"stopReason": "end_turn"}
    assert len([m for m in w.a.to_codex if m.get("method") == "turn/start"]) == 2


def _running_turn(turn_id: str) -> list[dict[str, Any]]:
    return [{"id": turn_id, "status": "inProgress", "items": [], "error": None}]


def test_a_window_that_loads_the_session_while_a_turn_runs_can_cancel_it() -> None:
    w = Windows(THREAD)
    w.a.new_session(THREAD)
    _stream_a_turn(w, only_a=True)
    w.open("session/load", status="active", turns=_running_turn("turn-1"))
    w.b.client_notify("session/cancel", {"sessionId": THREAD})
    [interrupt] = [m for m in w.b.to_codex if m.get("method") == "turn/interrupt"]
    assert interrupt["params"] == {"threadId": THREAD, "turnId": "turn-1"}


def test_a_window_that_resumes_the_session_while_a_turn_runs_reads_which_turn_to_cancel() -> None:
    w = Windows(THREAD)
    w.a.new_session(THREAD)
    _stream_a_turn(w, only_a=True)
    w.open("session/resume", status="active")
    before = len(w.b.to_codex)
    w.b.client_notify("session/cancel", {"sessionId": THREAD})
    [read] = [m for m in w.b.to_codex[before:] if m.get("method") == "thread/read"]
    assert read["params"] == {"threadId": THREAD, "includeTurns": True}
    thread = {"id": THREAD, "cwd": "/work", "preview": "", "turns": _running_turn("turn-1")}
    w.b.codex_reply(read["id"], {"thread": thread})
    [interrupt] = [m for m in w.b.to_codex if m.get("method") == "turn/interrupt"]
    assert interrupt["params"] == {"threadId": THREAD, "turnId": "turn-1"}


def test_closing_a_window_leaves_another_windows_turn_running() -> None:
    w = _windows()
    _stream_a_turn(w)
    rid = w.b.client_request("session/close", {"sessionId": THREAD})
    unsubscribe = w.b.codex_request("thread/unsubscribe")
    w.b.codex_reply(unsubscribe["id"], {})
    assert w.b.result(rid) == {}
    assert not [m for m in w.b.to_codex if m.get("method") == "turn/interrupt"]


def test_v2_windows_follow_a_turn_either_started_and_a_cancel_from_the_other_ends_it() -> None:
    w = Windows(THREAD)
    w.a, w.b = V2(), V2()
    w.a.new_session(THREAD)
    w.open("session/resume")
    rid = w.a.prompt(THREAD, "write a poem")
    w.a.accept_turn("turn-1", THREAD)
    note = {"threadId": THREAD, "turn": {"id": "turn-1", "status": "inProgress", "items": []}}
    w.b.codex_notify("turn/started", note)
    w.a.codex_notify("turn/started", note)
    user = {"type": "userMessage", "id": "um-turn-1", "content": TEXT}
    w.b.codex_notify("item/started", {"threadId": THREAD, "turnId": "turn-1", "item": user})
    w.notify("item/completed", {"threadId": THREAD, "turnId": "turn-1", "item": user})
    assert w.b.states(THREAD)[-1] == {"state": "running"}
    assert w.a.states(THREAD)[-1] == {"state": "running"}
    # b did not send the prompt: it is shown there as the user's message.
    assert _kinds(w.b)[-1] == "user_message_chunk"
    w.b.client_notify("session/cancel", {"sessionId": THREAD})
    [interrupt] = [m for m in w.b.to_codex if m.get("method") == "turn/interrupt"]
    assert interrupt["params"] == {"threadId": THREAD, "turnId": "turn-1"}
    w.notify(
        "turn/completed",
        {"threadId": THREAD, "turn": {"id": "turn-1", "status": "interrupted", "items": []}},
    )
    cancelled = {"state": "idle", "stopReason": "cancelled"}
    assert w.a.states(THREAD)[-1] == cancelled
    assert w.b.states(THREAD)[-1] == cancelled
    assert w.a.client_response(rid) is not None
    w.a.validate()
    w.b.validate()


def test_a_window_that_loads_the_session_mid_answer_shows_that_answer_once_whole() -> None:
    w = Windows(THREAD)
    w.a.new_session(THREAD)
    _stream_a_turn(w, only_a=True)  # "roses" streamed to a before b opened the session
    w.open("session/load", status="active", turns=_running_turn("turn-1"))
    start = len(w.b.updates(THREAD))
    delta = {"threadId": THREAD, "turnId": "turn-1", "itemId": "msg-turn-1", "delta": " are red"}
    w.notify("item/agentMessage/delta", delta)
    # An item started after the load streams as usual.
    later = {"type": "agentMessage", "id": "msg-2", "text": ""}
    w.notify("item/started", {"threadId": THREAD, "turnId": "turn-1", "item": later})
    w.notify(
        "item/agentMessage/delta",
        {"threadId": THREAD, "turnId": "turn-1", "itemId": "msg-2", "delta": "violets"},
    )
    whole = {"type": "agentMessage", "id": "msg-turn-1", "text": "roses are red"}
    w.notify("item/completed", {"threadId": THREAD, "turnId": "turn-1", "item": whole})
    done = {"type": "agentMessage", "id": "msg-2", "text": "violets"}
    w.notify("item/completed", {"threadId": THREAD, "turnId": "turn-1", "item": done})
    shown = [
        (u["messageId"], u["content"]["text"])
        for u in w.b.updates(THREAD)[start:]
        if u["sessionUpdate"] == "agent_message_chunk"
    ]
    assert shown == [("msg-2", "violets"), ("msg-turn-1", "roses are red")]
    # a, which saw it begin, streamed it and shows nothing more at its completion.
    streamed = [
        u["content"]["text"]
        for u in w.a.updates(THREAD)
        if u["sessionUpdate"] == "agent_message_chunk"
    ]
    assert streamed == ["roses", " are red", "violets"]


def _ask(h: Harness, rid: int, params: dict[str, Any]) -> None:
    message = {"id": rid, "method": "item/commandExecution/requestApproval", "params": params}
    h._collect(h.engine.receive_codex(msgspec.json.encode(message)))


#: A command approval Codex asks of every connection on the thread.
APPROVAL = {
    "threadId": THREAD,
    "turnId": "turn-1",
    "itemId": "call-1",
    "reason": "write outside the workspace",
    "command": "touch /x",
    "cwd": "/work",
    "commandActions": [],
}


def _asked_in_both() -> Windows:
    """Two windows on a thread whose turn (a's) is asked an approval, request 7, in both."""
    w = _windows()
    _stream_a_turn(w)
    for window in w.both():  # Codex asks every subscribed connection
        _ask(window, 7, APPROVAL)
    return w


def test_closing_a_window_leaves_the_other_windows_approval_to_it() -> None:
    w = _asked_in_both()
    asked = [m for m in w.b.to_client if m.get("method") == "session/request_permission"]
    assert len(asked) == 1
    rid = w.b.client_request("session/close", {"sessionId": THREAD})
    w.b.codex_reply(w.b.codex_request("thread/unsubscribe")["id"], {})
    assert w.b.result(rid) == {}
    # b's question is withdrawn there, and b gave Codex no answer: a's user answers it.
    assert [m for m in w.b.to_client if m.get("method") == "$/cancel_request"] == [
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": asked[0]["id"]}}
    ]
    assert not [m for m in w.b.to_codex if m.get("id") == 7 and "method" not in m]


def test_a_window_whose_client_goes_away_leaves_the_other_windows_approval_to_it() -> None:
    w = _asked_in_both()
    w.b._collect(w.b.engine.client_lost())
    assert not [m for m in w.b.to_codex if m.get("id") == 7 and "method" not in m]
    # Its own turn's questions are still answered when its client goes: nobody else asked.
    _ask(w.a, 8, APPROVAL)
    w.a._collect(w.a.engine.client_lost())
    assert [m["result"] for m in w.a.to_codex if m.get("id") in (7, 8) and "method" not in m] == [
        {"decision": "cancel"},
        {"decision": "cancel"},
    ]


def test_a_turn_codex_started_itself_is_answered_when_the_only_client_goes() -> None:
    # A bridge with a Codex of its own: a turn no prompt started is Codex's (a goal's), no
    # other client can answer what it asks, so a client that leaves answers it (cancel).
    h = Harness()
    h.new_session(THREAD)
    h.codex_notify(
        "turn/started",
        {"threadId": THREAD, "turn": {"id": "turn-1", "status": "inProgress", "items": []}},
    )
    _ask(h, 7, APPROVAL)
    assert [m for m in h.to_client if m.get("method") == "session/request_permission"]
    h._collect(h.engine.client_lost())
    assert [m["result"] for m in h.to_codex if m.get("id") == 7 and "method" not in m] == [
        {"decision": "cancel"}
    ]


def _child_of_turn_2_starts(window: Harness, before: int) -> None:
    """A sub-agent of turn 2 starts its turn; the window's reads of it (asked since Codex
    message ``before``) are answered."""
    child_turn = {"id": "child-turn", "status": "inProgress", "items": [], "rootTurnId": "turn-2"}
    window.codex_notify("turn/started", {"threadId": "child-1", "turn": child_turn})
    for m in window.to_codex[before:]:
        if m.get("method") == "thread/read":
            thread = {"id": "child-1", "cwd": "/work", "preview": "", "parentThreadId": THREAD}
            window.codex_reply(m["id"], {"thread": thread})


def test_a_sub_agent_of_the_other_windows_turn_goes_on_after_this_window_closed() -> None:
    """Codex sends a sub-agent's events to every connection: a window that closed the session
    stops the late work of its own turns' sub-agents, never of another window's."""
    w = _windows()
    rid = w.b.client_request("session/close", {"sessionId": THREAD})
    w.b.codex_reply(w.b.codex_request("thread/unsubscribe")["id"], {})
    assert w.b.client_response(rid) is not None
    before = len(w.b.to_codex)
    # a's next turn spawns a child; its first events reach b too.
    _child_of_turn_2_starts(w.b, before)
    assert not [m for m in w.b.to_codex[before:] if m.get("method") == "turn/interrupt"]


def test_a_sub_agent_of_a_closed_windows_own_turn_is_still_stopped() -> None:
    w = _windows()
    w.b.start_prompt(THREAD, "spawn", "turn-2")
    rid = w.b.client_request("session/close", {"sessionId": THREAD})
    w.b.codex_reply(w.b.codex_request("turn/interrupt")["id"], {})
    w.b.complete_turn(THREAD, "turn-2", "interrupted")
    w.b.codex_reply(w.b.codex_request("thread/unsubscribe")["id"], {})
    assert w.b.client_response(rid) is not None
    before = len(w.b.to_codex)
    _child_of_turn_2_starts(w.b, before)
    interrupts = [m["params"] for m in w.b.to_codex[before:] if m.get("method") == "turn/interrupt"]
    assert interrupts and all(
        params == {"threadId": "child-1", "turnId": "child-turn"} for params in interrupts
    )
