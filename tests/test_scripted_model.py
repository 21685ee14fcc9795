"""The scripted model: its directive language (pure) and its HTTP server over a loopback socket."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from bridge.scripted_model import (
    ScriptedModel,
    parse_directives,
    reply_for_request,
    serve_scripted_model,
    write_codex_home,
)
from bridge.scripted_model.directives import (
    DEFAULT_TEXT,
    INTERNAL_TEXT,
    Directive,
    SseEvent,
    codex_internal_purpose,
    encode_sse,
    find_user_turn,
    reasoning_words,
    step_index,
    words_text,
)
from bridge.scripted_model.server import HttpError, parse_request_head

REPO = Path(__file__).resolve().parents[1]

# -------------------------------------------------------------------------------------------------
# Requests shaped like the ones Codex 0.169 sends


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def call_output(call_id: str, output: str = "done") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


PREAMBLE: list[dict[str, Any]] = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nx"},
            {"type": "input_text", "text": "<environment_context>\n  <cwd>/w</cwd>\n"},
        ],
    },
    user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
]


def body(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "mock-model", "stream": True, "input": [*PREAMBLE, *items], **extra}


def metadata(**fields: str) -> dict[str, str]:
    return {"x-codex-turn-metadata": json.dumps({"request_kind": "turn", **fields})}


def types(events: Sequence[SseEvent]) -> list[str]:
    return [e.type for e in events]


def deltas(events: Sequence[SseEvent], kind: str = "response.output_text.delta") -> list[str]:
    return [e.data["delta"] for e in events if e.type == kind]


def done_items(events: Sequence[SseEvent]) -> list[dict[str, Any]]:
    return [e.data["item"] for e in events if e.type == "response.output_item.done"]


def message_text(events: Sequence[SseEvent]) -> str:
    texts = [i["content"][0]["text"] for i in done_items(events) if i["type"] == "message"]
    assert len(texts) == 1, texts
    return str(texts[0])


# -------------------------------------------------------------------------------------------------
# Parsing


def test_parse_reads_leading_directive_lines_and_splits_steps() -> None:
    script = parse_directives(
        "@@ reason 2\n\n@@ Words 3 delay_ms=5\n@@ then\n@@ say hi there\nprose"
    )
    assert script.steps == (
        (Directive("reason", "2"), Directive("words", "3 delay_ms=5")),
        (Directive("say", "hi there"),),
    )


@pytest.mark.parametrize(
    "text", ["", "hello", " @@ words 3", "@@words 3", "please\n@@ words 3", "<x>@@ words</x>"]
)
def test_parse_finds_no_script_unless_the_text_starts_with_a_directive(text: str) -> None:
    assert not parse_directives(text)


def test_parse_stops_at_the_first_other_line() -> None:
    script = parse_directives("@@ words 1\nnot a directive\n@@ words 2")
    assert script.steps == ((Directive("words", "1"),),)


@given(st.text())
def test_parse_and_reply_never_raise(text: str) -> None:
    parse_directives(text)
    events = reply_for_request(body(user(text)), response_id="r")
    assert events[0].type == "response.created"


# -------------------------------------------------------------------------------------------------
# Replies


def test_words_stream_one_delta_per_word_then_complete_with_usage() -> None:
    events = reply_for_request(body(user("@@ words 4")), response_id="r1")
    assert types(events) == [
        "response.created",
        "response.output_item.added",
        *["response.output_text.delta"] * 4,
        "response.output_item.done",
        "response.completed",
    ]
    assert deltas(events) == ["word1 ", "word2 ", "word3 ", "word4"]
    assert message_text(events) == words_text(4) == "word1 word2 word3 word4"
    usage = events[-1].data["response"]["usage"]
    assert usage["output_tokens"] == 4
    assert 0 < usage["input_tokens_details"]["cached_tokens"] < usage["input_tokens"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}
    # Every event carries its type in the data too, as the Responses API does.
    assert all(e.data["type"] == e.type for e in events)


def test_words_delay_applies_between_deltas_only() -> None:
    events = reply_for_request(body(user("@@ words 3 delay_ms=250")), response_id="r")
    assert [e.delay for e in events if e.type.endswith(".delta")] == [0.0, 0.25, 0.25]
    assert sum(e.delay for e in events) == 0.5


def test_reason_then_words_gives_a_reasoning_item_before_the_message() -> None:
    events = reply_for_request(body(user("@@ reason 3\n@@ words 2")), response_id="r")
    summary = deltas(events, "response.reasoning_summary_text.delta")
    assert summary == ["thought1 ", "thought2 ", "thought3"]
    items = done_items(events)
    assert [i["type"] for i in items] == ["reasoning", "message"]
    assert items[0]["summary"] == [{"type": "summary_text", "text": reasoning_words(3)}]
    assert len({i["id"] for i in items}) == 2
    usage = events[-1].data["response"]["usage"]
    assert usage["output_tokens_details"]["reasoning_tokens"] == 3


@pytest.mark.parametrize(
    ("line", "text"),
    [
        ("@@ say Hello, world: it works", "Hello, world: it works"),
        ('@@ say "two\\nlines "', "two\nlines "),
        ("@@ say a b c d e f g h i j", "a b c d e f g h i j"),
    ],
)
def test_say_streams_exactly_the_text_in_a_few_deltas(line: str, text: str) -> None:
    events = reply_for_request(body(user(line)), response_id="r")
    assert "".join(deltas(events)) == text
    assert message_text(events) == text
    assert 1 <= len(deltas(events)) <= 4


def test_phase_marks_the_messages_after_it_from_their_start() -> None:
    events = reply_for_request(
        body(
            user(
                "@@ say before\n@@ phase commentary\n@@ say note\n@@ phase final_answer\n@@ say end"
            )
        ),
        response_id="r",
    )
    added = [e.data["item"] for e in events if e.type == "response.output_item.added"]
    assert [item.get("phase") for item in added] == [None, "commentary", "final_answer"]
    assert [item.get("phase") for item in done_items(events)] == [
        None,
        "commentary",
        "final_answer",
    ]


def test_call_makes_a_function_call_with_namespace_and_completes() -> None:
    events = reply_for_request(
        body(user('@@ call multi_agent_v1/spawn_agent {"message": "@@ words 3"}')),
        response_id="r",
    )
    (item,) = done_items(events)
    assert item["type"] == "function_call"
    assert item["name"] == "spawn_agent"
    assert item["namespace"] == "multi_agent_v1"
    assert json.loads(item["arguments"]) == {"message": "@@ words 3"}
    assert item["call_id"]
    assert events[-1].type == "response.completed"


def test_call_without_namespace_or_arguments() -> None:
    (item,) = done_items(reply_for_request(body(user("@@ call get_goal")), response_id="r"))
    assert "namespace" not in item
    assert (item["name"], item["arguments"]) == ("get_goal", "{}")


def test_then_steps_follow_the_tool_results_of_the_turn() -> None:
    script = user('@@ call exec_command {"cmd": "echo hi"}\n@@ then\n@@ say done')
    first = reply_for_request(body(script), response_id="r1")
    (call,) = done_items(first)
    second = reply_for_request(body(script, call, call_output(call["call_id"])), response_id="r2")
    assert message_text(second) == "done"


def test_a_step_with_several_calls_waits_for_all_their_results() -> None:
    script = user("@@ call a\n@@ call b\n@@ then\n@@ say both")
    assert step_index(parse_directives(script["content"][0]["text"]), 1) == 0
    calls = done_items(reply_for_request(body(script), response_id="r"))
    assert [c["name"] for c in calls] == ["a", "b"]
    results = [call_output(c["call_id"]) for c in calls]
    assert message_text(reply_for_request(body(script, *calls, *results))) == "both"


def test_after_the_last_step_and_without_a_script_the_reply_is_ok() -> None:
    script = user("@@ call exec_command {}")
    events = reply_for_request(body(script, call_output("c1")))
    assert message_text(events) == DEFAULT_TEXT
    assert message_text(reply_for_request(body(user("hello")))) == DEFAULT_TEXT
    assert message_text(reply_for_request({"input": []})) == DEFAULT_TEXT


def test_a_new_user_message_restarts_the_script() -> None:
    old = user("@@ call x\n@@ then\n@@ say old")
    events = reply_for_request(body(old, call_output("c"), user("@@ say new")))
    assert message_text(events) == "new"


@pytest.mark.parametrize(
    "injected",
    [
        "<subagent_notification>\n{}\n</subagent_notification>",
        "<turn_aborted>\nThe user interrupted the previous turn.\n</turn_aborted>",
        "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nx\n</INSTRUCTIONS>",
        "Another language model started to solve this problem and produced a summary",
    ],
)
def test_messages_codex_injects_are_not_the_users(injected: str) -> None:
    request = body(user("@@ call x\n@@ then\n@@ say second"), call_output("c"), user(injected))
    turn = find_user_turn(request)
    assert turn is not None
    assert turn.tool_outputs == 1
    assert message_text(reply_for_request(request)) == "second"


def test_fail_ends_the_stream_without_completed() -> None:
    events = reply_for_request(body(user("@@ words 2\n@@ fail\n@@ words 5")), response_id="r")
    assert deltas(events) == ["word1 ", "word2"]
    assert "response.completed" not in types(events)
    assert types(events)[-1] == "response.output_item.done"


def test_sleep_delays_the_next_event_even_before_a_failure() -> None:
    events = reply_for_request(body(user("@@ sleep 300\n@@ say hi")), response_id="r")
    assert events[1].delay == 0.3
    failing = reply_for_request(body(user("@@ say hi\n@@ sleep 200\n@@ fail")), response_id="r")
    assert failing[-1].type == ""
    assert failing[-1].delay == 0.2
    assert encode_sse(failing[-1:]) == b":\n\n"


def test_placeholders_take_fields_of_the_newest_tool_result() -> None:
    script = user(
        '@@ call multi_agent_v1/spawn_agent {"message": "hi"}\n@@ then\n'
        '@@ call multi_agent_v1/wait_agent {"targets": ["{{agent_id}}"], "timeout_ms": 10000}'
    )
    spawned = call_output("c1", json.dumps({"agent_id": "thread-7", "nickname": "Ada"}))
    (item,) = done_items(reply_for_request(body(script, spawned)))
    assert json.loads(item["arguments"]) == {"targets": ["thread-7"], "timeout_ms": 10000}


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("@@ wrods 3", "unknown directive"),
        ("@@ words many", "count must be a non-negative integer"),
        ("@@ reason 1000001", "count 1000001 is over 1000000"),
        ("@@ words 3 speed=2", "unknown option speed="),
        ("@@ words", "expected 1 argument(s)"),
        ("@@ call exec_command {not json", "arguments are not JSON"),
        ("@@ call exec_command [1]", "arguments must be a JSON object"),
        ("@@ call /x {}", "missing tool name"),
        ('@@ call x {"a": "{{nope}}"}', "no tool result so far has a field 'nope'"),
        ('@@ say "unterminated', "bad JSON string"),
        ('@@ say "a" "b"', "bad JSON string"),
        ("@@ fail now", "expected 0 argument(s)"),
        ("@@ phase final", "PHASE is one of commentary, final_answer"),
    ],
)
def test_a_bad_directive_becomes_a_message_naming_it(line: str, complaint: str) -> None:
    events = reply_for_request(body(user(f"@@ words 2\n{line}")), response_id="r")
    text = message_text(events)
    assert text.startswith(f"scripted model: bad directive `{line}`")
    assert complaint in text
    assert events[-1].type == "response.completed"


def test_response_ids_make_unique_item_ids_and_default_to_a_digest() -> None:
    request = body(user("@@ words 1\n@@ call x"))
    a = done_items(reply_for_request(request, response_id="resp_1"))
    b = done_items(reply_for_request(request, response_id="resp_2"))
    assert {i["id"] for i in a}.isdisjoint(i["id"] for i in b)
    assert reply_for_request(request) == reply_for_request(request)


def test_twenty_thousand_words_are_twenty_thousand_deltas() -> None:
    # How fast a long reply is built is the benches' to say (bench/slow_client.py streams
    # 200,000), never a timed assertion on a shared machine.
    events = reply_for_request(body(user("@@ words 20000")), response_id="r")
    wire = encode_sse(events)
    assert len(deltas(events)) == 20000
    assert wire.count(b"event: response.output_text.delta\n") == 20000


# -------------------------------------------------------------------------------------------------
# Codex's own requests


TITLE_FORMAT = {
    "format": {
        "type": "json_schema",
        "strict": True,
        "name": "codex_output_schema",
        "schema": {
            "type": "object",
            "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 6}},
            "required": ["title"],
            "additionalProperties": False,
        },
    }
}
REVIEW_FORMAT = {
    "format": {
        "type": "json_schema",
        "schema": {
            "type": "object",
            "properties": {
                "risk_level": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
                "user_authorization": {"type": "string", "enum": ["unknown", "low"]},
                "outcome": {"type": "string", "enum": ["allow", "deny"]},
                "rationale": {"type": "string"},
            },
            "required": ["outcome"],
        },
    }
}
QUOTING = user("Generate a concise title.\n\nUser prompt:\n@@ call exec_command {}")


def test_the_tuis_title_request_gets_json_and_no_call() -> None:
    headers = metadata(thread_source="thread_title")
    request = body(QUOTING, text=TITLE_FORMAT, tools=[])
    assert codex_internal_purpose(request, headers) == "thread_title"
    events = reply_for_request(request, headers)
    assert json.loads(message_text(events)) == {"title": INTERNAL_TEXT[:6]}


def test_the_title_request_is_recognised_from_the_body_alone() -> None:
    meta = json.dumps({"request_kind": "turn", "thread_source": "thread_title"})
    request = body(user("@@ call x"), client_metadata={"x-codex-turn-metadata": meta})
    assert codex_internal_purpose(request) == "thread_title"
    assert done_items(reply_for_request(request))[0]["type"] == "message"


def test_the_approval_reviewer_is_answered_allow() -> None:
    headers = {**metadata(subagent_kind="guardian"), "x-openai-subagent": "guardian"}
    events = reply_for_request(body(user("@@ call x"), text=REVIEW_FORMAT), headers)
    verdict = json.loads(message_text(events))
    assert verdict["outcome"] == "allow"
    assert verdict["risk_level"] == "low"


def test_compaction_gets_plain_text() -> None:
    headers = {"x-codex-turn-metadata": json.dumps({"request_kind": "compaction"})}
    events = reply_for_request(body(user("@@ call x")), headers)
    assert message_text(events) == INTERNAL_TEXT


@pytest.mark.parametrize(
    "fields",
    [{}, {"thread_source": "user"}, {"thread_source": "subagent", "subagent_kind": "thread_spawn"}],
)
def test_user_and_spawned_agent_turns_are_scripted(fields: dict[str, str]) -> None:
    headers = metadata(**fields)
    assert codex_internal_purpose(body(), headers) is None
    assert message_text(reply_for_request(body(user("@@ say hi")), headers)) == "hi"


def test_a_user_turn_asking_for_json_gets_json_by_default() -> None:
    assert json.loads(message_text(reply_for_request(body(user("hi"), text=TITLE_FORMAT)))) == {
        "title": "ok"
    }


# -------------------------------------------------------------------------------------------------
# CODEX_HOME


def test_codex_home_points_codex_at_the_model_and_merges_extra_toml(tmp_path: Path) -> None:
    path = write_codex_home(
        tmp_path / "home",
        "http://127.0.0.1:4321/v1",
        extra_toml='approval_policy = "never"\n[features]\nmulti_agent = true\n'
        "[tools]\nupdate_plan = { enabled = true }\n",
    )
    assert path == tmp_path / "home" / "config.toml"
    config = tomllib.loads(path.read_text())
    assert config["model_provider"] == "mock"
    provider = config["model_providers"]["mock"]
    assert provider["base_url"] == "http://127.0.0.1:4321/v1"
    assert provider["wire_api"] == "responses"
    assert provider["stream_max_retries"] == provider["request_max_retries"] == 0
    assert config["approval_policy"] == "never"
    assert config["features"] == {"plugins": False, "shell_snapshot": False, "multi_agent": True}
    assert config["tools"] == {"update_plan": {"enabled": True}}
    assert config["check_for_update_on_startup"] is False


# -------------------------------------------------------------------------------------------------
# HTTP


def test_request_head_parsing() -> None:
    head = parse_request_head(b"POST /v1/responses?x=1 HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nx-a: 2")
    assert (head.method, head.path) == ("POST", "/v1/responses")
    assert head.headers == {"host": "a", "x-a": "1, 2"}
    for bad in [b"GET /", b"GET / HTTP/2", b"GET / HTTP/1.1\r\nno colon", b"G T / HTTP/1.1"]:
        with pytest.raises(HttpError):
            parse_request_head(bad)


async def http(
    model: ScriptedModel, raw: bytes, *, stop_after: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` and read the whole response (or close as soon as ``stop_after`` arrives)."""
    stream = await trio.open_tcp_stream("127.0.0.1", model.port)
    async with stream:
        await stream.send_all(raw)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
            if stop_after is not None and stop_after in data:
                break
    head, _, payload = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return int(status_line.split(" ")[1]), headers, payload


def post(payload: bytes, path: str = "/v1/responses", *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(payload)}"]
    return ("\r\n".join([*lines, *extra, "", ""])).encode() + payload


def sse_events(payload: bytes) -> list[dict[str, Any]]:
    """The ``data`` of each event, checking that its ``event:`` line names the same type."""
    events = []
    for block in payload.split(b"\n\n"):
        if not block or block.startswith(b":"):
            continue
        event_line, data_line = block.split(b"\n")
        data = msgspec.json.decode(data_line.removeprefix(b"data: "))
        assert event_line == b"event: " + data["type"].encode()
        events.append(data)
    return events


async def test_server_streams_a_scripted_reply_and_records_the_request(
    nursery: trio.Nursery,
) -> None:
    with trio.fail_after(10):
        model: ScriptedModel = await nursery.start(serve_scripted_model)
        assert model.base_url == f"http://127.0.0.1:{model.port}/v1"
        request = body(user("@@ reason 2\n@@ words 3"))
        status, headers, payload = await http(
            model, post(msgspec.json.encode(request), "/v1/responses", "thread-id: t1")
        )
        assert status == 200
        assert headers["content-type"] == "text/event-stream"
        assert headers["connection"] == "close"
        events = sse_events(payload)
        assert events[0] == {"type": "response.created", "response": events[0]["response"]}
        assert events[0]["response"]["id"] == "resp_1"
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        assert text == words_text(3)
        assert events[-1]["type"] == "response.completed"
        assert model.requests == [request]
        assert model.request_headers[0]["thread-id"] == "t1"


async def test_server_accepts_a_chunked_body(nursery: trio.Nursery) -> None:
    with trio.fail_after(10):
        model: ScriptedModel = await nursery.start(serve_scripted_model)
        payload = msgspec.json.encode(body(user("@@ say chunked")))
        half = len(payload) // 2
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(part), part) for part in (payload[:half], payload[half:])
        )
        raw = (
            b"POST /v1/responses HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunks
            + b"0\r\n\r\n"
        )
        status, _, reply = await http(model, raw)
        assert status == 200
        assert b'"delta":"chunked"' in reply


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /v1/models HTTP/1.1\r\n\r\n", 404),
        (b"GET /v1/responses HTTP/1.1\r\n\r\n", 405),
        (b"nonsense\r\n\r\n", 400),
        (b"POST /v1/responses HTTP/1.1\r\nContent-Length: 3\r\n\r\n{x}", 400),
        (b"POST /v1/responses HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]", 400),
        (b"POST /v1/responses HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400),
        (
            b"POST /v1/responses HTTP/1.1\r\nContent-Encoding: zstd\r\nContent-Length: 2\r\n\r\n{}",
            415,
        ),
    ],
)
async def test_server_rejects_what_it_cannot_serve(
    nursery: trio.Nursery, raw: bytes, status: int
) -> None:
    with trio.fail_after(10):
        model: ScriptedModel = await nursery.start(serve_scripted_model)
        got, headers, payload = await http(model, raw)
        assert got == status
        assert headers["content-type"] == "application/json"
        assert msgspec.json.decode(payload)["error"]["code"] == status
        assert model.requests == []


async def test_server_drops_a_stream_the_client_closes_and_keeps_serving(
    nursery: trio.Nursery,
) -> None:
    with trio.fail_after(10):
        model: ScriptedModel = await nursery.start(serve_scripted_model)
        slow = msgspec.json.encode(body(user("@@ words 100 delay_ms=1000")))
        start = trio.current_time()
        await http(model, post(slow), stop_after=b'"delta":"word1 "')
        # The stream would last 99 s; the server notices the closed socket without writing.
        await model.wait_until(lambda m: m.cut_short == ["resp_1"])
        assert trio.current_time() - start < 5
        status, _, payload = await http(model, post(msgspec.json.encode(body(user("hi")))))
        assert status == 200
        assert b'"delta":"ok"' in payload
        assert model.cut_short == ["resp_1"]


async def test_server_streams_twenty_thousand_words(nursery: trio.Nursery) -> None:
    with trio.fail_after(20):
        model: ScriptedModel = await nursery.start(serve_scripted_model)
        status, _, payload = await http(
            model, post(msgspec.json.encode(body(user("@@ words 20000"))))
        )
        assert status == 200
        events = sse_events(payload)
        assert len(events) == 20004
        assert events[-2]["item"]["content"][0]["text"] == words_text(20000)


async def test_server_refuses_addresses_other_than_loopback() -> None:
    with trio.fail_after(5):
        for host in ["0.0.0.0", "10.0.0.1", "::1", "localhost"]:
            with pytest.raises(ValueError, match=r"127\.x\.x\.x only"):
                await serve_scripted_model(host=host)


async def test_module_runs_the_server_standalone() -> None:
    with trio.fail_after(20):
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "bridge.scripted_model", "--port", "0"],
            stderr=subprocess.PIPE,
            cwd=REPO,
        )
        assert process.stderr is not None
        try:
            line = b""
            while not line.endswith(b"\n"):
                line += await process.stderr.receive_some(1)
            prefix = "listening on http://127.0.0.1:"
            text = line.decode().strip()
            assert text.startswith(prefix)
            assert text.endswith("/v1")
            port = int(text.removeprefix(prefix).removesuffix("/v1"))
            model = ScriptedModel("127.0.0.1", port)
            status, _, payload = await http(
                model, post(msgspec.json.encode(body(user("@@ say up"))))
            )
            assert status == 200
            assert b'"delta":"up"' in payload
        finally:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
                await process.stderr.aclose()
