"""The client's ``$/cancel_request`` for its own long requests: a load, a resume, a list, a
fork answered -32800 at once, and what they still had Codex do stopped; a prompt whose
turn runs cancelled as ``session/cancel`` cancels it; anything else answered as it ends."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_lifecycle import (
    ANSWER_ITEM,
    CWD,
    THREAD,
    Recorder,
    answer,
    codex_methods,
    initialize,
    listed_thread,
    load,
    own,
    resume_result,
    stored_thread,
    validate_all,
)
from tests.test_v2 import V2

OPEN = {"sessionId": THREAD, "cwd": CWD, "mcpServers": []}


def cancel(h: Any, rid: int) -> None:
    h.client_notify("$/cancel_request", {"requestId": rid})


def answers(h: Any, rid: int) -> list[dict[str, Any]]:
    return [m for m in h.to_client if m.get("id") == rid and "method" not in m]


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_an_open_cancelled_while_codex_reads_the_thread_asks_nothing_more(method: str) -> None:
    h = Recorder()
    rid = h.client_request(method, OPEN)
    cancel(h, rid)
    assert h.error(rid).code == -32800  # at once, not when Codex answers
    answer(h, "thread/read", {"thread": stored_thread([[ANSWER_ITEM]])})
    assert "thread/resume" not in codex_methods(h)
    assert len(answers(h, rid)) == 1 and h.updates() == []
    assert THREAD not in h.engine.threads
    # The session opens when asked again.
    assert own(h.result(load(h, [[ANSWER_ITEM]]))) == {}
    validate_all(h)


def test_a_load_cancelled_while_codex_resumes_is_unsubscribed_and_replays_nothing() -> None:
    h = Recorder()
    rid = h.client_request("session/load", OPEN)
    answer(h, "thread/read", {"thread": stored_thread([[ANSWER_ITEM]])})
    cancel(h, rid)
    assert h.error(rid).code == -32800
    answer(h, "thread/resume", resume_result())
    assert h.codex_request("thread/unsubscribe")["params"] == {"threadId": THREAD}
    assert h.updates() == [] and len(answers(h, rid)) == 1
    assert THREAD not in h.engine.threads
    validate_all(h)


def test_a_load_asked_again_right_after_its_cancel_opens_the_session() -> None:
    h = Recorder()
    first = h.client_request("session/load", OPEN)
    cancel(h, first)
    again = h.client_request("session/load", OPEN)
    # Codex answers the first read, then the second one's.
    reads = [m for m in h.to_codex if m.get("method") == "thread/read"]
    assert len(reads) == 2
    for read in reads:
        h.codex_reply(read["id"], {"thread": stored_thread([[ANSWER_ITEM]])})
    answer(h, "thread/resume", resume_result())
    assert h.error(first).code == -32800
    assert own(h.result(again)) == {}
    assert codex_methods(h).count("thread/resume") == 1
    assert "thread/unsubscribe" not in codex_methods(h)
    h.start_prompt(THREAD)  # the session works
    validate_all(h)


def test_a_list_cancelled_is_answered_once_and_codexs_page_dropped() -> None:
    h = Recorder()
    rid = h.client_request("session/list", {})
    cancel(h, rid)
    assert h.error(rid).code == -32800
    answer(h, "thread/list", {"data": [listed_thread("t1")], "nextCursor": None})
    assert len(answers(h, rid)) == 1
    validate_all(h)


def test_a_fork_cancelled_before_codex_forks_asks_for_no_fork() -> None:
    h = Recorder()
    initialize(h, {"subagents": {}})
    rid = h.client_request("session/fork", OPEN)
    cancel(h, rid)
    assert h.error(rid).code == -32800
    answer(h, "thread/read", {"thread": stored_thread([])})
    assert "thread/fork" not in codex_methods(h)
    validate_all(h, unstable=True)


def test_a_fork_cancelled_while_codex_forks_leaves_it_unsubscribed() -> None:
    h = Recorder()
    initialize(h, {"subagents": {}})
    rid = h.client_request("session/fork", OPEN)
    answer(h, "thread/read", {"thread": stored_thread([])})
    cancel(h, rid)
    answer(h, "thread/fork", resume_result("t-fork"))
    assert h.error(rid).code == -32800 and len(answers(h, rid)) == 1
    assert h.codex_request("thread/unsubscribe")["params"] == {"threadId": "t-fork"}
    assert "t-fork" not in h.engine.threads
    validate_all(h, unstable=True)


def test_a_running_prompt_cancelled_so_ends_cancelled_once_codex_confirms() -> None:
    h = Recorder()
    sid = h.new_session()
    rid = h.start_prompt(sid)
    h.codex_notify(
        "turn/started",
        {"threadId": sid, "turn": {"id": "turn-1", "status": "inProgress", "items": []}},
    )
    cancel(h, rid)
    assert h.codex_request("turn/interrupt")["params"]["threadId"] == sid
    assert h.client_response(rid) is None
    h.complete_turn(sid, status="interrupted")
    assert h.result(rid) == {"stopReason": "cancelled"}


def test_a_cancel_of_an_answered_or_unknown_request_changes_nothing() -> None:
    h = Recorder()
    sid = h.new_session()
    sent = (len(h.to_client), len(h.to_codex))
    cancel(h, 999)
    h.client_notify("$/cancel_request", {"requestId": "nope"})
    assert (len(h.to_client), len(h.to_codex)) == sent
    h.start_prompt(sid)


def test_v2_a_resume_cancelled_is_answered_minus_32800() -> None:
    h = V2()
    rid = h.client_request("session/resume", {"sessionId": THREAD, "cwd": CWD})
    cancel(h, rid)
    assert h.error(rid).code == -32800
    answer(h, "thread/read", {"thread": stored_thread([])})
    assert "thread/resume" not in [m.get("method") for m in h.to_codex]
    h.validate()


def test_a_load_cancelled_while_it_waits_for_codexs_models_is_cancelled_once_handled() -> None:
    h = Recorder(catalog=False)  # Codex has not listed its models yet: the load waits
    rid = h.client_request("session/load", OPEN)
    cancel(h, rid)
    assert h.client_response(rid) is None
    answer(h, "model/list", {"data": []})
    assert h.error(rid).code == -32800
    answer(h, "thread/read", {"thread": stored_thread([[ANSWER_ITEM]])})
    assert "thread/resume" not in codex_methods(h)
    validate_all(h)


def test_v2_a_cancel_of_a_prompt_already_answered_leaves_its_turn_running() -> None:
    # v2 answers a prompt once Codex inserts it; the turn it began works on. A cancel of
    # that request arriving after its answer (a client's timeout racing the answer) is of
    # a request that is over: the turn is the session's, stopped only by session/cancel.
    h = V2()
    h.new_session()
    rid = h.prompt("thread-1")
    h.accept_turn()
    assert "result" in (h.client_response(rid) or {})
    cancel(h, rid)
    assert "turn/interrupt" not in [m.get("method") for m in h.to_codex]
    h.validate()


def test_a_list_cancelled_then_refused_by_codex_answers_no_later_request_of_the_same_id() -> None:
    # A client may use an id again once its request was answered (-32800 is an answer):
    # Codex's late refusal of the cancelled list must not answer the new request.
    h = Recorder()
    rid = h.client_request("session/list", {})
    cancel(h, rid)
    first_list = h.codex_request("thread/list")
    h.to_client.clear()
    h.client_raw(f'{{"jsonrpc":"2.0","id":{rid},"method":"session/list","params":{{}}}}'.encode())
    second_list = [m for m in h.to_codex if m.get("method") == "thread/list"][-1]
    assert second_list["id"] != first_list["id"]
    h.codex_error(first_list["id"], "the store is busy")
    assert answers(h, rid) == []
    h.codex_reply(second_list["id"], {"data": [listed_thread("t1")], "nextCursor": None})
    [answered] = answers(h, rid)
    assert [s["sessionId"] for s in answered["result"]["sessions"]] == ["t1"]
    validate_all(h)
