"""The engine alone: ACP and Codex messages in, messages out (no trio, no processes)."""

from __future__ import annotations

import dataclasses
import logging

import msgspec
import pytest

from bridge.acp.types import NewSessionResult
from tests.support.acp_schema import ConversationValidator
from tests.support.engine_harness import Harness


def test_client_messages_wait_for_the_codex_handshake_and_keep_their_order() -> None:
    h = Harness(ready=False)
    init = h.codex_request("initialize")
    assert init["params"]["clientInfo"]["name"] == "codex-acp-bridge"
    first = h.client_request("initialize", {"protocolVersion": 1})
    second = h.client_request("session/new", {"cwd": "/w", "mcpServers": []})
    # initialize needs nothing from Codex: answered at once (see the test below).
    assert [m.get("id") for m in h.to_client] == [first]
    assert [m.get("method") for m in h.to_codex] == ["initialize"]

    h.codex_reply(init["id"], {})
    # The model catalog is asked for at once, beside the client's own handshake; a
    # session opens once it is in (its answer lists every model).
    assert [m.get("method") for m in h.to_codex] == ["initialize", "initialized", "model/list"]
    h.codex_reply(h.codex_request("model/list")["id"], {"data": []})
    assert [m.get("method") for m in h.to_codex][-1] == "thread/start"
    assert "params" not in h.to_codex[1]  # a notification without params, as Codex expects
    assert h.client_response(first) is not None
    assert h.client_response(second) is None  # waits on thread/start


def test_initialize_is_answered_before_codex_handshake_completes_and_session_new_waits() -> None:
    h = Harness(ready=False)
    rid = h.client_request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": {"terminal": True}}
    )
    answer = h.client_response(rid)
    assert answer is not None and answer["result"]["protocolVersion"] == 1
    assert answer["result"]["agentCapabilities"]["loadSession"] is True
    assert [m["id"] for m in answer["result"]["authMethods"]] == ["chatgpt", "api-key"]
    assert h.engine.hub.handshake.client_capabilities.terminal is True
    opened = h.client_request("session/new", {"cwd": "/w", "mcpServers": []})
    assert h.client_response(opened) is None
    assert [m.get("method") for m in h.to_codex] == ["initialize"]  # nothing before the handshake
    h.codex_reply(h.codex_request("initialize")["id"], {"userAgent": "codex/0.169.0"})
    h.codex_reply(h.codex_request("model/list")["id"], {"data": []})
    start = h.codex_request("thread/start")
    h.codex_reply(start["id"], {"thread": {"id": "thread-1", "cwd": "/w"}, "model": "mock"})
    assert h.result(opened, NewSessionResult).sessionId == "thread-1"
    assert h.client_response(rid) == answer  # answered once


def test_initialize_is_answered_while_codex_is_brought_back() -> None:
    h = Harness()
    sid = h.new_session()
    h._collect(h.engine.codex_lost("Codex app-server exited with status 137", retrying=True))
    again = h.client_request("initialize", {"protocolVersion": 1})  # Codex away
    assert "result" in h.client_response(again)  # type: ignore[operator]
    h._collect(h.engine.codex_restarted())
    during = h.client_request("initialize", {"protocolVersion": 1})  # its handshake under way
    assert "result" in h.client_response(during)  # type: ignore[operator]
    listed = h.client_request("session/list", {})
    assert h.client_response(listed) is None  # waits for the new Codex
    restart_methods = [m.get("method") for m in h.to_codex if "method" in m]
    assert restart_methods[-1] == "initialize" and "thread/list" not in restart_methods
    h.codex_reply(h.codex_request("initialize")["id"], {"userAgent": "codex/0.169.0"})
    assert h.codex_request("thread/resume")["params"]["threadId"] == sid
    assert h.codex_request("thread/list")  # what waited goes on, once Codex is ready


def test_initialize_behind_a_waiting_message_keeps_its_place() -> None:
    h = Harness(ready=False)
    [] = h.client_raw(b'{"jsonrpc": "2.0", "id": 1, "method": ')  # waits, as before
    rid = h.client_request("initialize", {"protocolVersion": 1})
    assert h.to_client == []
    h.codex_reply(h.codex_request("initialize")["id"], {"userAgent": "codex/0.169.0"})
    assert h.to_client[0]["error"]["code"] == -32700
    assert h.to_client[1]["id"] == rid and "result" in h.to_client[1]


def test_once_codex_is_lost_for_good_initialize_is_answered_and_each_request_gets_the_reason() -> (
    None
):
    # Whether the client's initialize comes before or after Codex fails to start, it is
    # answered the same way, and the reason comes with the first request that needs Codex.
    h = Harness(ready=False)
    h._collect(h.engine.codex_lost("Codex app-server exited with status 1: bad config"))
    rid = h.client_request("initialize", {"protocolVersion": 1})
    assert "result" in h.client_response(rid)  # type: ignore[operator]
    new = h.client_request("session/new", {"cwd": "/w", "mcpServers": []})
    assert "bad config" in h.error(new).message


def test_initialize_advertises_protocol_1_and_only_what_works() -> None:
    h = Harness()
    rid = h.client_request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    result = h.result(rid)
    assert result["protocolVersion"] == 1
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True  # see tests/test_lifecycle.py
    assert caps["promptCapabilities"] == {"image": True, "embeddedContext": True}
    assert result["agentInfo"]["name"] == "codex-acp-bridge"
    v = ConversationValidator()
    v.client_sent({"id": rid, "method": "initialize"})
    v.agent_sent(h.client_response(rid))  # type: ignore[arg-type]


def test_codex_refusing_initialize_fails_waiting_requests_with_its_reason() -> None:
    h = Harness(ready=False)
    rid = h.client_request("initialize", {"protocolVersion": 1})
    assert "result" in h.client_response(rid)  # type: ignore[operator]  # at once, see above
    waiting = h.client_request("session/new", {"cwd": "/w", "mcpServers": []})
    h.codex_error(h.codex_request("initialize")["id"], "bad config")
    # What waited learns why nothing can work, and so does what comes later.
    assert "bad config" in h.error(waiting).message
    rid2 = h.client_request("session/new", {"cwd": "/w", "mcpServers": []})
    assert "bad config" in h.error(rid2).message


def test_session_new_starts_a_thread_and_the_thread_id_is_the_session_id() -> None:
    h = Harness()
    rid = h.client_request("session/new", {"cwd": "/repo", "mcpServers": []})
    start = h.codex_request("thread/start")
    assert start["params"] == {"cwd": "/repo"}
    h.codex_reply(start["id"], {"thread": {"id": "019a-thread"}})
    assert h.result(rid) == {"sessionId": "019a-thread"}


def test_config_overrides_reach_thread_start_when_given() -> None:
    h = Harness(thread_config={"model": "o3"})
    h.client_request("session/new", {"cwd": "/repo", "mcpServers": []})
    assert h.codex_request("thread/start")["params"]["config"] == {"model": "o3"}


def test_codex_error_on_thread_start_reaches_the_client_with_codex_message() -> None:
    h = Harness()
    rid = h.client_request("session/new", {"cwd": "/repo", "mcpServers": []})
    h.codex_error(h.codex_request("thread/start")["id"], "cwd does not exist")
    error = h.error(rid)
    assert error.code == -32603 and "cwd does not exist" in error.message


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"mcpServers": []}, "`cwd`"),
        ({"cwd": 5, "mcpServers": []}, "params.cwd"),
        ({"cwd": "relative", "mcpServers": []}, "absolute"),
    ],
)
def test_invalid_session_new_params_name_the_field(params: dict[str, object], needle: str) -> None:
    h = Harness()
    rid = h.client_request("session/new", params)
    error = h.error(rid)
    assert error.code == -32602
    assert needle in error.message
    assert not [m for m in h.to_codex if m.get("method") == "thread/start"]


def test_malformed_json_gets_a_parse_error_and_the_connection_keeps_working() -> None:
    h = Harness()
    [reply] = h.client_raw(b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert reply["error"]["code"] == -32700 and reply["id"] is None
    [reply] = h.client_raw(b"[1, 2]")
    assert reply["error"]["code"] == -32600
    rid = h.client_request("initialize", {"protocolVersion": 1})
    assert "result" in h.client_response(rid)  # type: ignore[operator]


def test_unknown_method_is_method_not_found_and_unknown_notification_is_ignored() -> None:
    h = Harness()
    rid = h.client_request("session/teleport", {})
    assert h.error(rid).code == -32601
    before = len(h.to_client)
    h.client_notify("$/whatever", {})
    assert len(h.to_client) == before


def test_prompt_for_an_unknown_session_is_a_clear_not_found_error() -> None:
    h = Harness()
    rid = h.client_request(
        "session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}
    )
    error = h.error(rid)
    assert error.code == -32002 and "nope" in error.message
    assert not [m for m in h.to_codex if m.get("method") == "turn/start"]


def test_prompt_content_becomes_codex_input() -> None:
    h = Harness()
    sid = h.new_session()
    prompt = [
        {"type": "text", "text": "look at"},
        {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"},
        {"type": "resource", "resource": {"uri": "file:///w/b.txt", "text": "B"}},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        {
            "type": "resource",
            "resource": {"uri": "file:///w/c.png", "blob": "BBBB", "mimeType": "image/png"},
        },
    ]
    h.client_request("session/prompt", {"sessionId": sid, "prompt": prompt})
    params = h.codex_request("turn/start")["params"]
    assert params["threadId"] == sid
    assert params["input"] == [
        {"type": "text", "text": "look at"},
        {"type": "text", "text": "[@a.py](file:///w/a.py)"},
        {"type": "text", "text": '<context ref="file:///w/b.txt">\nB\n</context>'},
        {"type": "image", "url": "data:image/png;base64,AAAA"},
        {"type": "image", "url": "data:image/png;base64,BBBB"},
    ]


@pytest.mark.parametrize(
    ("block", "needle"),
    [
        ({"type": "audio", "data": "AA", "mimeType": "audio/wav"}, "prompt[1]: audio"),
        ({"type": "hologram"}, "prompt[1]: unknown content block type 'hologram'"),
        ({"type": "text"}, "prompt[1]"),
        ({"type": "resource", "resource": {"uri": "file:///x.bin", "blob": "AA"}}, "not supported"),
    ],
)
def test_unsupported_prompt_content_is_invalid_params_and_starts_no_turn(
    block: dict[str, object], needle: str
) -> None:
    h = Harness()
    sid = h.new_session()
    rid = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "ok"}, block]}
    )
    error = h.error(rid)
    assert error.code == -32602 and needle in error.message
    assert not [m for m in h.to_codex if m.get("method") == "turn/start"]
    # The session is not left busy by the refused prompt.
    h.start_prompt(sid)


def test_streamed_answer_arrives_in_order_with_the_item_as_message_id() -> None:
    h, sid, rid = prompting()
    for word in ["Hello ", "there ", "friend"]:
        h.codex_notify(
            "item/agentMessage/delta",
            {"threadId": sid, "turnId": "turn-1", "itemId": "msg_1", "delta": word},
        )
    h.turn_notify(
        "item/completed",
        sid,
        item={"type": "agentMessage", "id": "msg_1", "text": "Hello there friend"},
    )
    h.complete_turn(sid)
    assert h.updates(sid) == [
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": w},
            "messageId": "msg_1",
        }
        for w in ["Hello ", "there ", "friend"]
    ]
    assert h.result(rid) == {"stopReason": "end_turn"}


def test_an_answer_that_arrives_whole_is_sent_once() -> None:
    h, sid, _ = prompting()
    h.turn_notify("item/completed", sid, item={"type": "agentMessage", "id": "m2", "text": "whole"})
    assert h.updates(sid) == [
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "whole"},
            "messageId": "m2",
        }
    ]


def test_reasoning_summary_streams_as_thought_chunks_with_paragraph_breaks() -> None:
    h, sid, _ = prompting()
    base = {"threadId": sid, "turnId": "turn-1", "itemId": "rs_1"}
    h.codex_notify("item/reasoning/summaryPartAdded", {**base, "summaryIndex": 0})
    h.codex_notify("item/reasoning/summaryTextDelta", {**base, "summaryIndex": 0, "delta": "Think"})
    h.codex_notify("item/reasoning/summaryPartAdded", {**base, "summaryIndex": 1})
    h.codex_notify("item/reasoning/summaryTextDelta", {**base, "summaryIndex": 1, "delta": "More"})
    h.turn_notify(
        "item/completed",
        sid,
        item={"type": "reasoning", "id": "rs_1", "summary": ["Think", "More"]},
    )
    texts = [(u["sessionUpdate"], u["content"]["text"]) for u in h.updates(sid)]
    assert texts == [
        ("agent_thought_chunk", "Think"),
        ("agent_thought_chunk", "\n\n"),
        ("agent_thought_chunk", "More"),
    ]


def test_token_usage_becomes_usage_update_only_when_the_window_is_known() -> None:
    h, sid, _ = prompting()
    usage = {
        "last": {
            "totalTokens": 1200,
            "inputTokens": 1000,
            "cachedInputTokens": 0,
            "outputTokens": 200,
            "reasoningOutputTokens": 0,
        },
        "total": {
            "totalTokens": 5000,
            "inputTokens": 4000,
            "cachedInputTokens": 0,
            "outputTokens": 1000,
            "reasoningOutputTokens": 0,
        },
    }
    h.codex_notify(
        "thread/tokenUsage/updated", {"threadId": sid, "turnId": "turn-1", "tokenUsage": usage}
    )
    assert h.updates(sid) == []
    usage["modelContextWindow"] = 272000  # type: ignore[assignment]
    h.codex_notify(
        "thread/tokenUsage/updated", {"threadId": sid, "turnId": "turn-1", "tokenUsage": usage}
    )
    assert h.updates(sid) == [{"sessionUpdate": "usage_update", "used": 1200, "size": 272000}]


def test_failed_turn_is_a_json_rpc_error_carrying_codex_message() -> None:
    h, sid, rid = prompting()
    h.turn_notify("error", sid, willRetry=False, error={"message": "stream disconnected"})
    h.complete_turn(sid, status="failed")
    error = h.error(rid)
    assert error.code == -32603
    assert error.message == "stream disconnected"
    assert error.data["status"] == "failed"
    # The session takes the next prompt.
    h.start_prompt(sid, turn_id="turn-2")


def test_turn_error_message_wins_over_an_earlier_error_notification() -> None:
    h, sid, rid = prompting()
    h.codex_notify(
        "error",
        {"threadId": sid, "turnId": "turn-1", "willRetry": True, "error": {"message": "retrying"}},
    )
    h.complete_turn(
        sid,
        status="failed",
        error={"message": "quota exceeded", "codexErrorInfo": "usageLimitExceeded"},
    )
    error = h.error(rid)
    assert error.message == "quota exceeded"
    assert error.data["codexErrorInfo"] == "usageLimitExceeded"


def test_cancel_interrupts_and_resolves_cancelled_only_when_codex_confirms() -> None:
    h, sid, rid = prompting()
    h.client_notify("session/cancel", {"sessionId": sid})
    interrupt = h.codex_request("turn/interrupt")
    assert interrupt["params"] == {"threadId": sid, "turnId": "turn-1"}
    h.codex_reply(interrupt["id"], {})
    assert h.client_response(rid) is None  # an acknowledgement is not the end of the turn
    h.client_notify("session/cancel", {"sessionId": sid})  # repeated: no second interrupt
    assert len([m for m in h.to_codex if m.get("method") == "turn/interrupt"]) == 1
    h.complete_turn(sid, status="interrupted")
    assert h.result(rid) == {"stopReason": "cancelled"}


def prompting() -> tuple[Harness, str, int]:
    """A new session whose prompt's turn (``turn-1``) Codex has started."""
    h = Harness()
    sid = h.new_session()
    return h, sid, h.start_prompt(sid)


def prompt_sent() -> tuple[Harness, str, int]:
    """A new session's prompt, sent; Codex has not answered its ``turn/start`` yet."""
    h = Harness()
    sid = h.new_session()
    rid = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
    )
    return h, sid, rid


def test_cancel_before_codex_names_the_turn_interrupts_as_soon_as_it_does() -> None:
    h, sid, rid = prompt_sent()
    h.client_notify("session/cancel", {"sessionId": sid})
    assert not [m for m in h.to_codex if m.get("method") == "turn/interrupt"]
    h.codex_notify(
        "turn/started",
        {"threadId": sid, "turn": {"id": "turn-9", "status": "inProgress", "items": []}},
    )
    assert h.codex_request("turn/interrupt")["params"]["turnId"] == "turn-9"
    # The turn/start response naming the same turn changes nothing.
    h.codex_reply(
        h.codex_request("turn/start")["id"],
        {"turn": {"id": "turn-9", "status": "inProgress", "items": []}},
    )
    assert len([m for m in h.to_codex if m.get("method") == "turn/interrupt"]) == 1
    h.complete_turn(sid, turn_id="turn-9", status="interrupted")
    assert h.result(rid) == {"stopReason": "cancelled"}


def test_a_turn_that_completes_despite_a_cancel_keeps_its_outcome() -> None:
    h, sid, rid = prompting()
    h.client_notify("session/cancel", {"sessionId": sid})
    h.complete_turn(sid, status="completed")
    assert h.result(rid) == {"stopReason": "end_turn"}


def test_turn_start_refused_by_codex_fails_the_prompt_and_frees_the_session() -> None:
    h, sid, rid = prompt_sent()
    h.codex_error(h.codex_request("turn/start")["id"], "thread not loaded")
    assert "thread not loaded" in h.error(rid).message
    h.start_prompt(sid)


def test_losing_codex_fails_pending_work_and_later_requests_explain_why() -> None:
    h, _, rid = prompting()
    pending_new = h.client_request("session/new", {"cwd": "/x", "mcpServers": []})
    h._collect(h.engine.codex_lost("Codex app-server exited with status 1"))
    for r in (rid, pending_new):
        error = h.error(r)
        assert "exited with status 1" in error.message
    later = h.client_request("session/new", {"cwd": "/x", "mcpServers": []})
    assert "exited with status 1" in h.error(later).message


def test_codex_server_requests_are_answered_at_once_never_left_waiting() -> None:
    h, _, _ = prompting()
    h.engine.receive_codex(b"")  # an empty frame is invalid, and ignored
    effects = h.engine.receive_codex(
        b'{"id": 0, "method": "item/tool/requestUserInput", "params": {"threadId": "thread-1"}}'
    )
    [answer] = [e for e in effects]
    assert b'"id":0' in answer.data and b"error" in answer.data


def test_unknown_codex_notifications_and_items_do_not_disturb_the_session() -> None:
    h, sid, rid = prompting()
    h.codex_notify("thread/realtime/sdp", {"whatever": True})
    h.turn_notify("item/completed", sid, item={"type": "brandNewThing", "id": "x1", "payload": [1]})
    h.codex_notify("item/agentMessage/delta", {"threadId": sid})  # malformed: logged, skipped
    h.codex_notify(
        "item/agentMessage/delta",
        {"threadId": "other-thread", "turnId": "t", "itemId": "i", "delta": "x"},
    )
    h.complete_turn(sid)
    assert h.updates(sid) == []
    assert h.result(rid) == {"stopReason": "end_turn"}


def test_every_message_to_the_client_in_a_full_turn_is_valid_acp() -> None:
    h = Harness()
    v = ConversationValidator()
    init = h.client_request("initialize", {"protocolVersion": 1})
    v.client_sent({"id": init, "method": "initialize"})
    sid = h.new_session()
    rid = h.start_prompt(sid)
    h.codex_notify(
        "item/agentMessage/delta",
        {"threadId": sid, "turnId": "turn-1", "itemId": "m", "delta": "x"},
    )
    h.complete_turn(sid)
    for message in h.to_client:
        if "method" not in message:
            method = (
                "initialize"
                if message["id"] == init
                else "session/new"
                if message["id"] != rid
                else "session/prompt"
            )
            v.client_sent({"id": message["id"], "method": method})
        v.agent_sent(message)


# -- a Codex answer that does not fit, a handler that fails -----------------------------------------


@pytest.mark.parametrize(
    ("method", "result"),
    [
        ("thread/start", {"thread": {"idd": "x"}}),  # the reported defect
        ("thread/start", {"thread": "nope"}),
        ("thread/start", []),
        ("turn/start", {"turn": {"id": 5}}),
    ],
)
def test_a_malformed_codex_answer_fails_the_waiting_request_naming_it(
    method: str, result: object
) -> None:
    """Regression: a thread/start answered with the wrong shape raised out of the engine."""
    h = Harness()
    if method == "thread/start":
        rid = h.client_request("session/new", {"cwd": "/w", "mcpServers": []})
    else:
        sid = h.new_session()
        rid = h.client_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
        )
    h.codex_reply(h.codex_request(method)["id"], result)
    error = h.error(rid)
    assert error.code == -32603
    assert method in error.message and "malformed" in error.message
    # The connection goes on: a new session opens, a prompt runs to its end.
    sid = h.new_session("thread-2")
    prompt = h.start_prompt(sid, turn_id="turn-2")
    h.complete_turn(sid, "turn-2")
    assert h.result(prompt) == {"stopReason": "end_turn"}


def test_a_defect_in_a_handler_answers_its_request_and_the_engine_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness()

    def broken(_rid: object, _raw: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setitem(h.engine._client_requests, "session/list", broken)
    rid = h.client_request("session/list", {})
    error = h.error(rid)
    assert error.code == -32603 and "internal error" in error.message
    assert "a bug" in caplog.text  # the traceback is in the log, not lost
    assert h.new_session() == "thread-1"


def test_a_codex_request_whose_handler_fails_is_answered_once() -> None:
    h = Harness()
    h.new_session()
    routes = h.engine.codex_router.routes
    method = "item/commandExecution/requestApproval"
    routes[method] = dataclasses.replace(routes[method], answer=lambda rid, p: 1 / 0)
    params = {"threadId": "thread-1", "turnId": "t", "itemId": "i", "command": "ls", "cwd": "/w"}
    message = {"id": 7, "method": "item/commandExecution/requestApproval", "params": params}
    h._collect(h.engine.receive_codex(msgspec.json.encode(message)))
    answers = [m for m in h.to_codex if m.get("id") == 7 and "method" not in m]
    assert len(answers) == 1 and answers[0]["error"]["code"] == -32603


@pytest.mark.parametrize("method", ["session/new", "session/load", "session/resume"])
def test_a_cwd_that_is_no_directory_is_refused_naming_it(method: str) -> None:
    h = Harness(is_directory=lambda path: path == "/exists")
    params: dict[str, object] = {"cwd": "/nowhere", "mcpServers": []}
    if method != "session/new":
        params["sessionId"] = "thread-9"
    rid = h.client_request(method, params)
    error = h.error(rid)
    assert error.code == -32602 and "/nowhere" in error.message
    assert [m.get("method") for m in h.to_codex if "method" in m] == [
        "initialize",
        "initialized",
        "model/list",  # the handshake's
    ]
    ok = h.client_request("session/new", {"cwd": "/exists", "mcpServers": []})
    assert h.client_response(ok) is None  # on its way to Codex
    assert h.codex_request("thread/start")["params"]["cwd"] == "/exists"


# -- Codex lost and brought back --------------------------------------------------------------------


def restart(h: Harness) -> None:
    """The shell brought Codex back: the new connection's handshake, answered."""
    h._collect(h.engine.codex_restarted())
    init = h.codex_request("initialize")
    assert init["id"] == 0  # a new connection: ids start again
    h.codex_reply(init["id"], {"userAgent": "codex/0.169.0"})


def test_a_session_outlives_its_codex_when_the_shell_brings_codex_back() -> None:
    h = Harness()
    sid = h.new_session()
    lost_prompt = h.start_prompt(sid)
    h._collect(h.engine.codex_lost("Codex app-server exited with status 137", retrying=True))
    error = h.error(lost_prompt)
    assert "exited with status 137" in error.message
    # Asked while Codex is away: it waits instead of failing.
    waiting = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}
    )
    assert h.client_response(waiting) is None
    sent = len(h.to_codex)
    restart(h)
    methods = [m.get("method") for m in h.to_codex[sent:]]
    assert methods == ["initialize", "initialized", "thread/resume", "turn/start"]
    assert h.codex_request("thread/resume")["params"] == {
        "threadId": sid,
        "cwd": "/work",
        "excludeTurns": True,
    }
    # The same session id works: the prompt that waited runs to its end.
    h.codex_reply(h.codex_request("thread/resume")["id"], {"thread": {"id": sid}})
    start = h.codex_request("turn/start")
    h.codex_reply(start["id"], {"turn": {"id": "turn-9", "status": "inProgress", "items": []}})
    h.complete_turn(sid, "turn-9")
    assert h.result(waiting) == {"stopReason": "end_turn"}


def test_a_prompt_the_user_cancelled_is_cancelled_when_codex_is_lost() -> None:
    h, sid, rid = prompting()
    h.client_notify("session/cancel", {"sessionId": sid})
    h._collect(h.engine.codex_lost("gone", retrying=True))
    assert h.result(rid) == {"stopReason": "cancelled"}


def test_when_the_shell_gives_up_what_waited_fails_with_its_reason() -> None:
    h = Harness()
    sid = h.new_session()
    h._collect(h.engine.codex_lost("gone", retrying=True))
    rid = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
    )
    why = "Codex failed to start 5 times in 60 s; not retrying: exited with status 1"
    h._collect(h.engine.codex_gave_up(why))
    assert h.error(rid).message == why
    later = h.client_request("session/list", {})
    assert h.error(later).message == why


def test_a_codex_answer_with_neither_result_nor_error_fails_the_request_waiting_on_it() -> None:
    """Found by tests/test_engine_robustness.py: the answer consumed the waiting request,
    whose client request then never got one."""
    h = Harness()
    rid = h.client_request("session/new", {"cwd": "/w", "mcpServers": []})
    start = h.codex_request("thread/start")["id"]
    h._collect(h.engine.receive_codex(b'{"id":%d}' % start))
    error = h.error(rid)
    assert "neither result nor error" in error.message


def test_a_defect_handling_codexs_answer_still_answers_the_client() -> None:
    """Found by the robustness property (seed 2): a thread/start answer whose sandbox type is
    no string made the settings code raise while opening the session, and session/new was
    never answered. A defect in handling an answer now fails what waits on it, with -32603."""
    h = Harness()
    rid = h.thread_started("/w", "m", {"type": ["not", "a", "string"]})
    response = h.client_response(rid)
    assert response is not None, "session/new left unanswered"
    assert response["error"]["code"] == -32603
    assert "internal error" in response["error"]["message"]


DELTA_SHAPES = [
    # As Codex writes them (the one-pass way), then every way that must fall back to
    # the general one and still give the same chunk.
    b'{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"turn-1","itemId":"m","delta":"a\\u00e9\\"b"}}',
    b'{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"turn-1","itemId":"m","delta":"a\\u00e9\\"b","newField":[1]}}',
    b'{"method":"item/agentMessage/delta","jsonrpc":"2.0","params":{"threadId":"T","turnId":"turn-1","itemId":"m","delta":"a\\u00e9\\"b"}}',
    b'{"params":{"threadId":"T","turnId":"turn-1","itemId":"m","delta":"a\\u00e9\\"b"},"method":"item/agentMessage/delta"}',
    b'{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"turn-1","itemId":"m","delta":"a\\u00e9\\"b"},"method":"item/agentMessage/delta"}',
]


@pytest.mark.parametrize("data", DELTA_SHAPES)
def test_a_delta_gives_the_same_chunk_whichever_way_it_is_decoded(data: bytes) -> None:
    h = Harness()
    sid = h.new_session("T")
    h.start_prompt(sid)
    out = h._collect(h.engine.receive_codex(data))
    assert [m["params"]["update"] for m in out] == [
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": 'aé"b'},
            "messageId": "m",
        }
    ]


#: Deltas byte for byte as Codex 0.169.0 and 0.171.0 write them (app-server over stdio):
#: both stamp every notification with ``emittedAtMs`` after its params.
REAL_DELTAS = {
    "0.169.0": b'{"method":"item/agentMessage/delta","params":{"threadId":"01a23282-42cd-7030-a2ba-d8af011f6cf9","turnId":"01a23282-42db-7fe2-a7a4-be48ebe36c0d","itemId":"msg_resp_1_0","delta":"word1 "},"emittedAtMs":1796143727379}',
    "0.171.0": b'{"method":"item/agentMessage/delta","params":{"threadId":"01a23282-4423-7402-a965-f83448cd6b83","turnId":"01a23282-4434-7dc2-84b2-575b10ec0975","itemId":"msg_resp_1_0","delta":"word1 "},"emittedAtMs":1796143727730}',
}


@pytest.mark.parametrize("version", sorted(REAL_DELTAS))
def test_a_delta_as_the_real_codex_writes_it_takes_the_one_pass_way(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = REAL_DELTAS[version]
    params = msgspec.json.decode(data)["params"]
    h = Harness()
    sid = h.new_session(params["threadId"])
    h.start_prompt(sid, turn_id=params["turnId"])

    def general_way(data: bytes) -> None:
        raise AssertionError(f"took the general way: {data!r}")

    monkeypatch.setattr(h.engine.hub.codex.peer, "receive", general_way)
    out = h._collect(h.engine.receive_codex(data))
    assert [m["params"]["update"] for m in out] == [
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "word1 "},
            "messageId": "msg_resp_1_0",
        }
    ]


@pytest.mark.parametrize(
    "data",
    [
        b'{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"turn-1"}}',
        b'{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"turn-1","itemId":"m","delta":7}}',
        b'{"method":"item/agentMessage/delta","params":',
        b'{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"turn-1","itemId":"m","delta":"x"},"id":5}',
    ],
)
def test_a_malformed_delta_is_reported_as_before(data: bytes) -> None:
    h = Harness()
    sid = h.new_session("T")
    h.start_prompt(sid)
    out = h._collect(h.engine.receive_codex(data))
    assert not any(m.get("method") == "session/update" for m in out), out


@pytest.mark.parametrize(
    ("agent", "warned"),
    [
        ("codex-acp-bridge/0.169.0 (Debian 12.0.0; x86_64) xterm", False),
        ("codex-acp-bridge/0.171.0 (Debian 12.0.0; x86_64) xterm", False),
        ("codex-acp-bridge/0.171.2 (Debian 12.0.0; x86_64) xterm", True),
        ("codex-acp-bridge/0.150.0 (Mac OS 15.1.0; arm64)", True),
        ("something without a version", False),
    ],
)
def test_a_codex_outside_the_tested_versions_is_one_warning_naming_both(
    agent: str, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness(ready=False)
    with caplog.at_level(logging.WARNING, logger="bridge.engine.engine"):
        h.codex_reply(h.codex_request("initialize")["id"], {"userAgent": agent})
    warnings = [r.getMessage() for r in caplog.records if "outside the versions" in r.getMessage()]
    if warned:
        [warning] = warnings
        assert agent.split("/")[1].split()[0] in warning and "(0.169.0 to 0.171.0)" in warning
    else:
        assert warnings == []
    # Codex is used either way.
    assert h.engine.codex_ready


@pytest.mark.parametrize("where", ["turn", "error notification"])
def test_a_turn_stopped_for_biological_risk_fails_the_prompt_saying_why(where: str) -> None:
    h, sid, rid = prompting()
    codex_error = {
        "message": "This request has been flagged for possible biological risk.",
        "codexErrorInfo": "bioPolicy",
        "additionalDetails": None,
    }
    if where == "turn":
        h.complete_turn(sid, status="failed", error=codex_error)
    else:
        h.codex_notify(
            "error", {"threadId": sid, "turnId": "turn-1", "willRetry": False, "error": codex_error}
        )
        h.complete_turn(sid, status="failed")
    error = h.error(rid)
    assert error.code == -32603
    assert error.message.startswith("Codex stopped: this request was flagged for possible")
    assert "biological risk, which OpenAI's usage policies do not allow" in error.message
    assert error.message.endswith(f"(Codex: {codex_error['message']})")
    assert error.data["codexErrorInfo"] == "bioPolicy"
    h.start_prompt(sid, turn_id="turn-2")  # the session goes on


@pytest.mark.parametrize("thread", ["thread-1", "thread-of-a-sub-agent-not-shown", ""])
def test_codexs_clock_read_is_answered_with_the_time_the_shell_reads(thread: str) -> None:
    h = Harness()
    h.new_session()
    h.to_codex.clear()
    data = msgspec.json.encode(
        {"id": 9, "method": "currentTime/read", "params": {"threadId": thread}}
    )
    h._collect(h.engine.receive_codex(data))
    # The engine keeps no clock: it asks the shell, whatever thread is named.
    assert h.clock_reads == [9] and h.to_codex == []
    h._collect(h.engine.clock_read(9, 1796053601))
    assert h.to_codex == [{"id": 9, "result": {"currentTimeAt": 1796053601}}]
    h._collect(h.engine.clock_read(9, 1796053602))  # answered once
    assert len(h.to_codex) == 1


def test_a_clock_read_after_codex_was_lost_answers_nothing() -> None:
    h = Harness()
    h._collect(h.engine.receive_codex(b'{"id": 3, "method": "currentTime/read", "params": {}}'))
    assert h.clock_reads == [3]
    h._collect(h.engine.codex_lost("gone", retrying=True))
    h.to_codex.clear()
    h._collect(h.engine.clock_read(3, 1796053601))
    assert h.to_codex == []
