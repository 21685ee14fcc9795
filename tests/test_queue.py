"""Prompts typed while the agent works are queued, not refused (engine level).

A ``session/prompt`` that arrives while a turn runs waits; it starts when the turn ends, in
arrival order, and gets its own response and stop reason. ``session/cancel`` cancels the
running turn and answers every queued prompt ``cancelled``; queued prompts never reach Codex
before their turn (so they show in the transcript when they start, as Codex reports them).
"""

from __future__ import annotations

from typing import Any

from tests.support.engine_harness import Harness


def prompt(h: Harness, sid: str, text: str) -> int:
    return h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    )


def turn_starts(h: Harness) -> list[dict[str, Any]]:
    return [m for m in h.to_codex if m.get("method") == "turn/start"]


def started_texts(h: Harness) -> list[str]:
    return [m["params"]["input"][0]["text"] for m in turn_starts(h)]


def answer_turn_start(h: Harness, turn_id: str) -> None:
    h.codex_reply(
        turn_starts(h)[-1]["id"], {"turn": {"id": turn_id, "status": "inProgress", "items": []}}
    )


def prompted(text: str) -> tuple[Harness, str, int]:
    """A new session and its first prompt, ``text`` (its request's id)."""
    h = Harness()
    sid = h.new_session()
    return h, sid, prompt(h, sid, text)


def test_prompts_sent_mid_turn_run_in_order_each_with_its_own_answer() -> None:
    h, sid, first = prompted("one")
    answer_turn_start(h, "turn-1")
    second = prompt(h, sid, "two")
    third = prompt(h, sid, "three")
    assert started_texts(h) == ["one"], "queued prompts wait for the turn"
    assert h.client_response(second) is None and h.client_response(third) is None
    h.complete_turn(sid, "turn-1")
    assert h.result(first) == {"stopReason": "end_turn"}
    assert started_texts(h) == ["one", "two"]
    answer_turn_start(h, "turn-2")
    h.complete_turn(sid, "turn-2", status="failed", error={"message": "model broke"})
    assert "model broke" in h.error(second).message
    assert started_texts(h) == ["one", "two", "three"]
    answer_turn_start(h, "turn-3")
    h.complete_turn(sid, "turn-3")
    assert h.result(third) == {"stopReason": "end_turn"}


def test_cancel_cancels_the_turn_and_answers_the_queue_cancelled() -> None:
    h, sid, first = prompted("one")
    answer_turn_start(h, "turn-1")
    queued = [prompt(h, sid, "two"), prompt(h, sid, "three")]
    h.client_notify("session/cancel", {"sessionId": sid})
    assert [h.result(rid) for rid in queued] == [{"stopReason": "cancelled"}] * 2
    assert h.client_response(first) is None  # until Codex confirms
    h.codex_reply(h.codex_request("turn/interrupt")["id"], {})
    h.complete_turn(sid, "turn-1", status="interrupted")
    assert h.result(first) == {"stopReason": "cancelled"}
    assert started_texts(h) == ["one"], "a cancelled queue never starts"
    # The session takes the next prompt as usual.
    later = prompt(h, sid, "four")
    answer_turn_start(h, "turn-4")
    h.complete_turn(sid, "turn-4")
    assert h.result(later) == {"stopReason": "end_turn"}


def test_a_prompt_queued_behind_a_refused_turn_starts() -> None:
    h, sid, first = prompted("one")
    second = prompt(h, sid, "two")  # the turn is not even started yet
    h.codex_error(turn_starts(h)[-1]["id"], "turn refused")
    assert "turn refused" in h.error(first).message
    assert started_texts(h) == ["one", "two"]
    answer_turn_start(h, "turn-2")
    h.complete_turn(sid, "turn-2")
    assert h.result(second) == {"stopReason": "end_turn"}


def test_a_bad_prompt_is_refused_on_arrival_not_queued() -> None:
    h, sid, _ = prompted("one")
    rid = h.client_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "video"}]})
    assert h.error(rid).code == -32602


def test_closing_a_session_answers_its_queue_cancelled() -> None:
    h, sid, first = prompted("one")
    answer_turn_start(h, "turn-1")
    queued = prompt(h, sid, "two")
    close = h.client_request("session/close", {"sessionId": sid})
    assert h.result(queued) == {"stopReason": "cancelled"}
    late = prompt(h, sid, "three")
    assert h.error(late).code == -32600
    h.codex_reply(h.codex_request("turn/interrupt")["id"], {})
    h.complete_turn(sid, "turn-1", status="interrupted")
    assert h.result(first) == {"stopReason": "cancelled"}
    h.codex_reply(h.codex_request("thread/unsubscribe")["id"], {"status": "unsubscribed"})
    assert h.result(close) == {}
    assert started_texts(h) == ["one"]


def test_closing_a_session_whose_turn_another_client_runs_answers_its_queue_cancelled() -> None:
    # Another window (or Codex's own goal) runs the turn: the prompt typed here waits behind
    # it; closing this window leaves that turn alone, and the waiting prompt is answered.
    h = Harness()
    sid = h.new_session()
    h.codex_notify(
        "turn/started",
        {"threadId": sid, "turn": {"id": "turn-x", "status": "inProgress", "items": []}},
    )
    queued = prompt(h, sid, "two")
    assert h.client_response(queued) is None and started_texts(h) == []
    close = h.client_request("session/close", {"sessionId": sid})
    assert h.result(queued) == {"stopReason": "cancelled"}
    assert not [m for m in h.to_codex if m.get("method") == "turn/interrupt"], "theirs goes on"
    h.codex_reply(h.codex_request("thread/unsubscribe")["id"], {"status": "unsubscribed"})
    assert h.result(close) == {}
    assert started_texts(h) == []


def test_codex_lost_fails_the_queue_with_the_reason() -> None:
    h, sid, _ = prompted("one")
    answer_turn_start(h, "turn-1")
    queued = prompt(h, sid, "two")
    h._collect(h.engine.codex_lost("Codex app-server exited (code 9)"))
    assert "exited" in h.error(queued).message


def test_codex_lost_before_it_answered_a_turns_start_fails_that_prompt_then_the_queue() -> None:
    """The start Codex never answered fails first, as it did when its failure was told at
    once: the prompt behind it is taken next, and fails on the lost Codex in its turn."""
    h, sid, first = prompted("one")
    queued = prompt(h, sid, "two")
    h._collect(h.engine.codex_lost("Codex app-server exited (code 9)"))
    answers = [m["id"] for m in h.to_client if m.get("id") in (first, queued) and "error" in m]
    assert answers == [first, queued]
    assert "exited" in h.error(first).message and "exited" in h.error(queued).message
    assert started_texts(h) == ["one"], "nothing goes to a Codex that is gone"
