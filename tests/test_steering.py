"""``_session/steering``: input injected into the running turn (engine level).

The end-to-end proof against the real Codex is in ``tests/test_e2e_prompt.py``; here the
rules: which outcome when, one steer at a time, the race with the turn's end, restrictions.
"""

from __future__ import annotations

from typing import Any

from bridge.acp.types import NewSessionResult
from tests.support.engine_harness import Harness

STEER = "_session/steering"
IDLE_PROMPT_REQUIRED = {"steering": {"idleBehavior": "promptRequired"}}


def steer(h: Harness, sid: str, text: str, meta: Any = None) -> int:
    params: dict[str, Any] = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    if meta is not None:
        params["_meta"] = meta
    return h.client_request(STEER, params)


def sent(h: Harness, method: str) -> list[dict[str, Any]]:
    return [m for m in h.to_codex if m.get("method") == method and "id" in m]


def test_initialize_says_steering_is_supported() -> None:
    h = Harness()
    rid = h.client_request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert h.result(rid)["_meta"]["steering"] == {"supported": True}


def test_a_steer_into_a_running_turn_is_injected_with_the_turns_id() -> None:
    h = Harness()
    sid = h.new_session()
    prompt = h.start_prompt(sid, turn_id="turn-1")
    rid = steer(h, sid, "also check the tests")
    [request] = sent(h, "turn/steer")
    assert request["params"] == {
        "threadId": sid,
        "input": [{"type": "text", "text": "also check the tests"}],
        "expectedTurnId": "turn-1",
    }
    assert h.client_response(rid) is None  # answered once Codex took it
    h.codex_reply(request["id"], {"turnId": "turn-1"})
    assert h.result(rid) == {"outcome": "injected"}
    h.complete_turn(sid, "turn-1")
    assert h.result(prompt) == {"stopReason": "end_turn"}  # the prompt covers the steer


def test_a_steer_waits_for_codex_to_name_the_turn() -> None:
    h = Harness()
    sid = h.new_session()
    h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    )
    rid = steer(h, sid, "more")
    assert not sent(h, "turn/steer")
    start = h.codex_request("turn/start")
    h.codex_reply(start["id"], {"turn": {"id": "turn-9", "status": "inProgress", "items": []}})
    [request] = sent(h, "turn/steer")
    assert request["params"]["expectedTurnId"] == "turn-9"
    h.codex_reply(request["id"], {"turnId": "turn-9"})
    assert h.result(rid) == {"outcome": "injected"}


def test_steers_go_one_at_a_time_in_order() -> None:
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid)
    first, second = steer(h, sid, "one"), steer(h, sid, "two")
    assert [r["params"]["input"][0]["text"] for r in sent(h, "turn/steer")] == ["one"]
    h.codex_reply(sent(h, "turn/steer")[0]["id"], {"turnId": "turn-1"})
    assert [r["params"]["input"][0]["text"] for r in sent(h, "turn/steer")] == ["one", "two"]
    h.codex_reply(sent(h, "turn/steer")[1]["id"], {"turnId": "turn-1"})
    assert h.result(first) == h.result(second) == {"outcome": "injected"}


def test_on_an_idle_session_prompt_required_when_asked_for() -> None:
    h = Harness()
    sid = h.new_session()
    rid = steer(h, sid, "hello", IDLE_PROMPT_REQUIRED)
    assert h.result(rid) == {"outcome": "promptRequired", "reason": "noRunningTurn"}
    assert not sent(h, "turn/start") and not sent(h, "turn/steer")


def test_on_an_idle_session_a_new_turn_starts_and_streams_as_a_prompts_would() -> None:
    h = Harness()
    sid = h.new_session()
    rid = steer(h, sid, "hello")
    assert h.result(rid) == {"outcome": "startedNewTurn"}
    [start] = sent(h, "turn/start")
    assert start["params"]["input"] == [{"type": "text", "text": "hello"}]
    h.codex_reply(start["id"], {"turn": {"id": "turn-s", "status": "inProgress", "items": []}})
    h.codex_notify(
        "item/agentMessage/delta",
        {"threadId": sid, "turnId": "turn-s", "itemId": "msg-1", "delta": "hi there"},
    )
    assert h.updates(sid)[-1]["content"]["text"] == "hi there"
    # A prompt sent while the steer's turn runs queues behind it.
    queued = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "next"}]}
    )
    assert len(sent(h, "turn/start")) == 1
    h.complete_turn(sid, "turn-s")
    assert len(sent(h, "turn/start")) == 2
    h.codex_reply(sent(h, "turn/start")[1]["id"], {"turn": {"id": "t2", "status": "inProgress"}})
    h.complete_turn(sid, "t2")
    assert h.result(queued) == {"stopReason": "end_turn"}


def test_a_steer_racing_the_end_of_its_turn_is_never_lost() -> None:
    for meta, outcome in ((IDLE_PROMPT_REQUIRED, "promptRequired"), (None, "startedNewTurn")):
        h = Harness()
        sid = h.new_session()
        prompt = h.start_prompt(sid, turn_id="turn-1")
        rid = steer(h, sid, "late words", meta)
        # The turn ends before Codex handles the steer, which it then refuses.
        h.complete_turn(sid, "turn-1")
        assert h.result(prompt) == {"stopReason": "end_turn"}
        h.codex_error(sent(h, "turn/steer")[0]["id"], "expected active turn id turn-1")
        assert h.result(rid)["outcome"] == outcome
        if outcome == "startedNewTurn":
            assert sent(h, "turn/start")[-1]["params"]["input"][0]["text"] == "late words"


def test_a_steer_racing_into_a_queued_prompts_turn_goes_into_it() -> None:
    """The steer's turn ends and the prompt queued behind it starts before Codex refuses
    the steer: the words go into the turn that now runs, and the queued prompt is
    answered when its turn ends (a new turn over it left it unanswered for ever)."""
    h = Harness()
    sid = h.new_session()
    first = h.start_prompt(sid, turn_id="turn-1")
    queued = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "second"}]}
    )
    rid = steer(h, sid, "late words")
    h.complete_turn(sid, "turn-1")
    assert h.result(first) == {"stopReason": "end_turn"}
    [start] = sent(h, "turn/start")[1:]
    assert start["params"]["input"][0]["text"] == "second"
    h.codex_error(sent(h, "turn/steer")[0]["id"], "expected active turn id turn-1")
    assert h.client_response(rid) is None  # waits for the queued prompt's turn to be named
    h.codex_reply(start["id"], {"turn": {"id": "turn-2", "status": "inProgress", "items": []}})
    again = sent(h, "turn/steer")[1]
    assert again["params"]["expectedTurnId"] == "turn-2"
    assert again["params"]["input"][0]["text"] == "late words"
    h.codex_reply(again["id"], {"turnId": "turn-2"})
    assert h.result(rid) == {"outcome": "injected"}
    assert len(sent(h, "turn/start")) == 2  # no turn of its own
    h.complete_turn(sid, "turn-2")
    assert h.result(queued) == {"stopReason": "end_turn"}


def test_codex_refusing_a_steer_for_another_reason_is_failed_with_its_words() -> None:
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid)
    rid = steer(h, sid, "x")
    h.codex_error(sent(h, "turn/steer")[0]["id"], "input too large")
    assert h.result(rid) == {"outcome": "failed", "reason": "input too large"}


def test_cancel_fails_the_steers_still_waiting() -> None:
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid)
    first, second = steer(h, sid, "one"), steer(h, sid, "two")
    h.client_notify("session/cancel", {"sessionId": sid})
    assert h.result(second) == {"outcome": "failed", "reason": "cancelled"}
    h.codex_reply(sent(h, "turn/steer")[0]["id"], {"turnId": "turn-1"})
    assert h.result(first) == {"outcome": "injected"}
    assert len(sent(h, "turn/steer")) == 1


def test_an_image_for_a_text_only_model_is_refused_naming_why() -> None:
    catalog = {
        "data": [
            {
                "id": "mock-model",
                "model": "mock-model",
                "inputModalities": ["text"],
                "supportedReasoningEfforts": [],
            }
        ]
    }
    h = Harness(catalog=catalog)
    rid = h.thread_started("/work", "mock-model", {"type": "workspaceWrite"})
    assert h.result(rid, NewSessionResult).sessionId == "thread-1"
    image = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
    bad = h.client_request(STEER, {"sessionId": "thread-1", "prompt": [image]})
    error = h.error(bad)
    assert error.code == -32602 and "mock-model" in error.message
    assert "image" in error.message and not sent(h, "turn/steer")


def test_bad_steering_requests_are_clear_errors() -> None:
    h = Harness()
    sid = h.new_session()
    unknown = steer(h, "no-such-session", "x")
    assert h.error(unknown).code == -32002
    missing = h.client_request(STEER, {"sessionId": sid})
    assert h.error(missing).code == -32602


def user_message(h: Harness, sid: str, turn: str, item_id: str, text: str) -> None:
    item = {"type": "userMessage", "id": item_id, "content": [{"type": "text", "text": text}]}
    h.codex_notify("item/completed", {"threadId": sid, "turnId": turn, "item": item})


def test_steered_input_shows_as_the_users_message_where_it_entered_the_turn() -> None:
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid, turn_id="turn-1")
    user_message(h, sid, "turn-1", "u-1", "the prompt")  # the client's own: not echoed
    assert not [u for u in h.updates(sid) if u["sessionUpdate"] == "user_message_chunk"]
    rid = steer(h, sid, "and the docs")
    h.codex_reply(sent(h, "turn/steer")[0]["id"], {"turnId": "turn-1"})
    assert h.result(rid) == {"outcome": "injected"}
    user_message(h, sid, "turn-1", "u-2", "and the docs")
    [shown] = [u for u in h.updates(sid) if u["sessionUpdate"] == "user_message_chunk"]
    assert shown == {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": "and the docs"},
        "messageId": "u-2",
    }


def test_a_turn_a_steer_started_shows_its_input_as_the_users_message() -> None:
    h = Harness()
    sid = h.new_session()
    steer(h, sid, "hello")
    start = sent(h, "turn/start")[0]
    h.codex_reply(start["id"], {"turn": {"id": "turn-s", "status": "inProgress", "items": []}})
    user_message(h, sid, "turn-s", "u-1", "hello")
    chunks = [u for u in h.updates(sid) if u["sessionUpdate"] == "user_message_chunk"]
    assert [c["content"]["text"] for c in chunks] == ["hello"]
