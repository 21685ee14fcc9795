"""Codex misbehaving, through the real bridge process: the bridge survives and keeps serving.

Codex's output reaches the bridge through :mod:`tests.support.corrupting_codex`, a relay that
runs the real Codex and rewrites chosen lines (malformed responses, garbage, missing fields,
bogus notifications, requests no Codex would send). Whatever arrives, the bridge must stay up,
answer every client request and every Codex request exactly once, and serve the next prompt.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError
from bridge.shell.streams import LineStream
from tests.support.corrupting_codex import read_log, relay_env, write_wrapper
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation, words
from tests.support.reading import Ended

pytestmark = pytest.mark.e2e

Rules = list[dict[str, Any]]
END_TURN = Ended({"stopReason": "end_turn"})
#: A well-formed thread id Codex never gave out.
UNKNOWN_THREAD = "00000000-0000-4000-8000-00000000dead"


@dataclass
class Corrupted:
    """One bridge whose Codex speaks through the relay."""

    client: AcpClient
    #: The session the bridge opened ("" when none was asked for).
    sid: str
    process: trio.Process
    log_path: Path

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in read_log(self.log_path) if e["event"] == name]

    def fired(self, rule: int) -> list[dict[str, Any]]:
        """The messages rule ``rule`` (its index) acted on."""
        return [e["message"] for e in self.events("fired") if e["rule"] == rule]


OpenCorrupted = Callable[..., AbstractAsyncContextManager[Corrupted]]


@pytest.fixture
def corrupted_bridge(
    open_conversation: OpenConversation,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    codex_bin: str,
    tmp_path: Path,
    stderr_file: Path,
) -> OpenCorrupted:
    """``open(rules, session=True)``: a conversation with the bridge, its Codex behind the
    corrupting relay; once over, the bridge's log holds no Python traceback."""

    @asynccontextmanager
    async def open_corrupted(rules: Rules, *, session: bool = True) -> AsyncIterator[Corrupted]:
        wrapper = write_wrapper(tmp_path)
        env = {**bridge_env, **relay_env(codex_bin, rules, tmp_path)}
        argv = [*bridge_argv, "--codex-bin", str(wrapper)]
        async with open_conversation(argv=argv, env=env, session=session) as talk:
            yield Corrupted(talk.client, talk.sid, talk.process, tmp_path / "corrupt-log.jsonl")
        assert_no_traceback(stderr_file)

    return open_corrupted


def assert_still_serving(run: Corrupted) -> None:
    """The bridge process is alive and every client request got exactly one answer."""
    assert run.process.poll() is None, "the bridge process died"
    answers: dict[Any, int] = {}
    for message in run.client.received:
        if "method" not in message and ("result" in message or "error" in message):
            answers[message.get("id")] = answers.get(message.get("id"), 0) + 1
    for rid, method in run.client.sent_requests.items():
        assert answers.get(rid) == 1, (
            f"client request {rid} ({method}) answered {answers.get(rid, 0)} times"
        )


async def serves_the_next_prompt(run: Corrupted, sid: str) -> None:
    """After it all, the bridge streams a next prompt's answer whole and still serves."""
    before = run.client.text_of(sid)
    assert await run.client.prompt(sid, "@@ words 3") == END_TURN
    assert run.client.text_of(sid) == before + words(3)
    assert_still_serving(run)


def assert_no_traceback(stderr_file: Path) -> None:
    log = stderr_file.read_text(errors="replace")
    assert "Traceback" not in log, f"a Python traceback in the bridge's stderr:\n{log[-6000:]}"


# -- the relay itself ----------------------------------------------------------------------------

#: A stand-in Codex for checking the relay alone: answers each request with its method, tells
#: what it received, asks a question of its own on ``fake/ask``, exits 3 when its stdin closes.
FAKE_CODEX = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    out = [{"method": "fake/received", "params": {"threadId": "T1", "message": message}}]
    if "method" in message and "id" in message:
        out.append({"id": message["id"], "result": {"answered": message["method"]}})
        if message["method"] == "fake/ask":
            out.append({"id": 0, "method": "fake/question", "params": {"threadId": "T1"}})
    for item in out:
        sys.stdout.write(json.dumps(item) + "\\n")
    sys.stdout.flush()
sys.exit(3)
"""


async def test_the_relay_applies_each_rule_as_written(tmp_path: Path) -> None:
    """The relay on its own, against a fake Codex: every rule kind, counting, swallowing, exit."""
    fake = tmp_path / "fake-codex"
    fake.write_text(f"#!{sys.executable}\n{FAKE_CODEX}")
    fake.chmod(0o755)
    rules: Rules = [
        {"action": "replace_result", "method": "a/start", "result": {"thread": {"idd": "x"}}},
        {
            "action": "drop_fields",
            "method": "fake/received",
            "fields": ["threadId", "message.id"],
            "skip": 1,
            "times": 1,
        },
        {
            "action": "inject",
            "method": "b/go",
            "position": "before",
            "lines": [{"raw": "not json"}, {"json": [1, 2]}, {"truncated": True}],
        },
        {
            "action": "inject",
            "method": "b/go",
            "times": None,
            "lines": [
                {"json": {"method": "turn/completed", "params": {"turn": "{{result.answered}}"}}},
                {
                    "request": {
                        "method": "item/frobnicate/requestApproval",
                        "params": {"n": "{{id}}"},
                    }
                },
            ],
        },
        {"action": "replace_result", "method": "c/err", "error": {"code": -1, "message": "no"}},
    ]
    process = await trio.lowlevel.open_process(
        [str(write_wrapper(tmp_path)), "app-server", "-c", "x=1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, **relay_env(str(fake), rules, tmp_path)},
    )
    assert process.stdin is not None and process.stdout is not None
    stream = LineStream(process.stdout, process.stdin)

    async def send(message: dict[str, Any]) -> None:
        await stream.send(msgspec.json.encode(message))

    async def lines(n: int) -> list[bytes]:
        return [await stream.receive() for _ in range(n)]

    with trio.fail_after(SCENARIO_SECONDS):
        await send({"id": 1, "method": "a/start"})
        received, answer = await lines(2)
        assert msgspec.json.decode(received)["params"]["threadId"] == "T1"  # skip: 1
        assert msgspec.json.decode(answer) == {"id": 1, "result": {"thread": {"idd": "x"}}}

        await send({"id": 2, "method": "b/go"})
        received, *rest = await lines(7)
        assert msgspec.json.decode(received) == {
            "method": "fake/received",
            "params": {"message": {"method": "b/go"}},  # threadId and message.id dropped
        }
        assert rest[0] == b"not json" and rest[1] == b"[1,2]"
        assert rest[2] == rest[3][: len(rest[3]) // 2].strip()  # half of the fake's line
        assert msgspec.json.decode(rest[3]) == {"id": 2, "result": {"answered": "b/go"}}
        assert msgspec.json.decode(rest[4]) == {
            "method": "turn/completed",
            "params": {"turn": "b/go"},
        }
        injected = msgspec.json.decode(rest[5])
        assert injected == {
            "id": 1_000_000,
            "method": "item/frobnicate/requestApproval",
            "params": {"n": 2},
        }

        # The answer to the injected request stops at the relay; one to Codex's own goes on.
        await send({"id": 1_000_000, "error": {"code": -32601, "message": "unknown"}})
        await send({"id": 3, "method": "fake/ask"})
        received, answer, question = await lines(3)
        assert msgspec.json.decode(received)["params"]["message"]["id"] == 3
        assert msgspec.json.decode(question)["method"] == "fake/question"
        await send({"id": 0, "result": {"ok": True}})
        received = (await lines(1))[0]
        assert msgspec.json.decode(received)["params"]["message"] == {
            "id": 0,
            "result": {"ok": True},
        }

        await send({"id": 4, "method": "c/err"})
        answer = (await lines(2))[1]
        assert msgspec.json.decode(answer) == {"id": 4, "error": {"code": -1, "message": "no"}}

        await process.stdin.aclose()
        with pytest.raises(trio.EndOfChannel):
            await stream.receive()
        assert await process.wait() == 3, "Codex's exit status is the relay's"

    events = read_log(tmp_path / "corrupt-log.jsonl")
    assert events[0]["event"] == "start" and events[0]["argv"] == [
        str(fake),
        "app-server",
        "-c",
        "x=1",
    ]
    answers = [e for e in events if e["event"] == "answer"]
    assert answers == [
        {
            "event": "answer",
            "id": 1_000_000,
            "method": "item/frobnicate/requestApproval",
            "message": {"id": 1_000_000, "error": {"code": -32601, "message": "unknown"}},
        }
    ]
    assert events[-1] == {"event": "exit", "code": 3}


async def test_an_unmodified_relay_is_invisible(
    corrupted_bridge: OpenCorrupted, codex_bin: str
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with corrupted_bridge([]) as run:
            client, sid = run.client, run.sid
            assert await client.prompt(sid, "@@ reason 3\n@@ words 40") == END_TURN
            assert client.text_of(sid) == words(40)
            assert await client.prompt(sid, "@@ words 3") == END_TURN
            assert_still_serving(run)
            start = run.events("start")
            assert len(start) == 1 and start[0]["argv"][:2] == [codex_bin, "app-server"]


# -- Codex misbehaving ---------------------------------------------------------------------------


async def test_a_malformed_thread_start_answer_fails_only_that_session_new(
    corrupted_bridge: OpenCorrupted, workspace: Path
) -> None:
    rules: Rules = [
        {"action": "replace_result", "method": "thread/start", "result": {"thread": {"idd": "x"}}}
    ]
    with trio.fail_after(SCENARIO_SECONDS):
        async with corrupted_bridge(rules, session=False) as run:
            client = run.client
            with pytest.raises(RpcError) as malformed:
                await client.new_session(str(workspace))
            assert len(run.fired(0)) == 1
            message = malformed.value.message
            # Not the client's fault: an internal error that says what Codex got wrong.
            assert malformed.value.code == -32603, message
            assert "thread/start" in message, message
            assert "malformed" in message.lower() or "`id`" in message or "thread.id" in message, (
                message
            )

            sid = await client.new_session(str(workspace))
            await serves_the_next_prompt(run, sid)


async def test_garbage_lines_from_codex_mid_turn_are_skipped(
    corrupted_bridge: OpenCorrupted,
) -> None:
    garbage = [
        {"raw": "this is not JSON"},
        {"raw": "   "},
        {"raw": "{"},
        {"truncated": True},
        {"json": [1, 2, 3]},
        {"json": "a string"},
        {"json": 42},
        {"json": None},
        {"json": {}},
        {"json": {"jsonrpc": "1.0", "method": "item/agentMessage/delta"}},
        {"json": {"id": 999999, "result": {}}},  # an answer to a request nobody made
        {"json": {"id": 0, "result": {}}},  # a second answer to `initialize`
        {"json": {"id": None, "error": {"code": -32700, "message": "Parse error"}}},
        {"json": {"method": 5, "params": {}}},
    ]
    rules: Rules = [
        {"action": "inject", "method": "thread/started", "lines": garbage},
        {
            "action": "inject",
            "method": "item/agentMessage/delta",
            "skip": 2,
            "times": 3,
            "lines": garbage,
        },
        {"action": "inject", "method": "turn/completed", "position": "before", "lines": garbage},
    ]
    with trio.fail_after(SCENARIO_SECONDS):
        async with corrupted_bridge(rules) as run:
            client, sid = run.client, run.sid
            assert await client.prompt(sid, "@@ words 30 delay_ms=5") == END_TURN
            assert [len(run.fired(i)) for i in range(3)] == [1, 3, 1]
            assert client.text_of(sid) == words(30)
            await serves_the_next_prompt(run, sid)


async def test_deltas_missing_fields_are_skipped_and_the_rest_arrive(
    corrupted_bridge: OpenCorrupted,
) -> None:
    rules: Rules = [
        {
            "action": "drop_fields",
            "method": "item/agentMessage/delta",
            "fields": ["delta"],
            "skip": 2,
            "times": 2,
        },
        {
            "action": "drop_fields",
            "method": "item/agentMessage/delta",
            "fields": ["threadId"],
            "skip": 6,
        },
        {
            "action": "drop_fields",
            "method": "item/agentMessage/delta",
            "fields": ["delta", "threadId", "itemId"],
            "skip": 9,
        },
        {
            "action": "drop_fields",
            "method": "item/reasoning/summaryTextDelta",
            "fields": ["delta"],
            "skip": 1,
        },
    ]
    with trio.fail_after(SCENARIO_SECONDS):
        async with corrupted_bridge(rules) as run:
            client, sid = run.client, run.sid
            assert await client.prompt(sid, "@@ reason 4\n@@ words 12") == END_TURN

            fired = [run.fired(i) for i in range(4)]
            assert [len(f) for f in fired] == [2, 1, 1, 1]
            dropped = {m["params"]["delta"].strip() for f in fired for m in f}
            assert len(dropped) == 5
            # Every well-formed delta arrived, in order, and nothing else did (a bridge
            # may fill in the skipped words from item/completed, which is fine too).
            expected = words(12).split()
            got = client.text_of(sid).split()
            assert set(got) <= set(expected), got
            kept = [w for w in expected if w not in dropped]
            assert [w for w in got if w in kept] == kept
            chunks = [f"{w} " for w in expected[:-1]] + expected[-1:]
            skipped = "".join(c for c in chunks if c.strip() not in dropped)
            assert client.text_of(sid) in (words(12), skipped)
            thoughts = client.text_of(sid, "agent_thought_chunk").split()
            assert [t for t in thoughts if t not in dropped] == [
                f"thought{i}" for i in range(1, 5) if f"thought{i}" not in dropped
            ]

            await serves_the_next_prompt(run, sid)


async def test_a_bogus_turn_completed_does_not_end_the_real_turn(
    corrupted_bridge: OpenCorrupted,
) -> None:
    bogus = [
        # A thread nobody knows.
        {
            "json": {
                "method": "turn/completed",
                "params": {
                    "threadId": UNKNOWN_THREAD,
                    "turn": {"id": "bogus-turn", "items": [], "status": "completed"},
                },
            }
        },
        # The real thread, a turn that is not running (and a failure, to be noticed).
        {
            "json": {
                "method": "turn/completed",
                "params": {
                    "threadId": "{{params.threadId}}",
                    "turn": {
                        "id": "bogus-turn",
                        "items": [],
                        "status": "failed",
                        "error": {"message": "bogus"},
                    },
                },
            }
        },
        # The real thread, a `turn` of the wrong type.
        {
            "json": {
                "method": "turn/completed",
                "params": {"threadId": "{{params.threadId}}", "turn": "completed"},
            }
        },
        {
            "json": {
                "method": "turn/completed",
                "params": {
                    "threadId": "{{params.threadId}}",
                    "turn": {"id": 42, "status": "completed"},
                },
            }
        },
        {"json": {"method": "turn/completed", "params": {"threadId": "{{params.threadId}}"}}},
        {"json": {"method": "turn/completed", "params": [1, 2]}},
        {"json": {"method": "turn/completed"}},
    ]
    rules: Rules = [{"action": "inject", "method": "turn/started", "lines": bogus}]
    with trio.fail_after(SCENARIO_SECONDS):
        async with corrupted_bridge(rules) as run:
            client, sid = run.client, run.sid
            assert await client.prompt(sid, "@@ words 20 delay_ms=10") == END_TURN
            assert len(run.fired(0)) == 1
            # The prompt ended with the real turn: after all of its text, none of it twice.
            assert client.text_of(sid) == words(20)
            await serves_the_next_prompt(run, sid)


async def test_unknown_and_malformed_codex_requests_are_each_answered_once(
    corrupted_bridge: OpenCorrupted,
) -> None:
    def request(method: str, params: Any = None, **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"method": method}
        if params is not None:
            body["params"] = params
        return {"request": body, **extra}

    real = {"threadId": "{{params.threadId}}", "turnId": "{{params.turn.id}}"}
    malformed = [
        request("item/frobnicate/requestApproval", {**real, "itemId": "item-x"}),
        request("item/commandExecution/requestApproval", {"threadId": 5}),
        request("item/fileChange/requestApproval", [1, 2]),
        request("item/tool/requestUserInput"),
        request(
            "item/commandExecution/requestApproval",
            {"threadId": "{{params.threadId}}", "turnId": 7, "itemId": None, "command": ["ls"]},
            id="corrupt-string-id",
        ),
    ]
    # Well-formed, but for a thread nobody has: nobody can approve it.
    stranger = request(
        "item/commandExecution/requestApproval",
        {
            "threadId": UNKNOWN_THREAD,
            "turnId": "turn-x",
            "itemId": "item-x",
            "command": "rm -rf /",
            "cwd": "/",
            "commandActions": [],
            "reason": None,
        },
    )
    rules: Rules = [{"action": "inject", "method": "turn/started", "lines": [*malformed, stranger]}]
    with trio.fail_after(SCENARIO_SECONDS):
        async with corrupted_bridge(rules) as run:
            client, sid = run.client, run.sid
            assert await client.prompt(sid, "@@ words 8 delay_ms=10") == END_TURN
            assert client.text_of(sid) == words(8)
            injected = run.events("injected")
            assert len(injected) == 6
            # Every injected request gets its answer (it may come after the turn).
            # (The relay logs to a file: poll it, for up to 15 s.)
            for _ in range(300):
                if len({str(a["id"]) for a in run.events("answer")}) >= len(injected):
                    break
                await trio.sleep(0.05)
            answered = {str(a["id"]) for a in run.events("answer")}
            unanswered = [i for i in injected if str(i["id"]) not in answered]
            assert not unanswered, f"never answered: {unanswered}"
            await serves_the_next_prompt(run, sid)

        answers = run.events("answer")
        by_id: dict[str, list[dict[str, Any]]] = {}
        for answer in answers:
            by_id.setdefault(str(answer["id"]), []).append(answer["message"])
        assert sorted(by_id) == sorted(str(i["id"]) for i in injected)
        for rid, messages in by_id.items():
            assert len(messages) == 1, f"request {rid} answered {len(messages)} times: {messages}"
        for sent in injected[: len(malformed)]:
            (message,) = by_id[str(sent["id"])]
            assert "error" in message and "result" not in message, (sent, message)
            assert isinstance(message["error"].get("code"), int), message
            assert isinstance(message["error"].get("message"), str), message
        (stranger_answer,) = by_id[str(injected[-1]["id"])]
        assert "error" in stranger_answer or stranger_answer["result"].get("decision") in (
            "decline",
            "cancel",
        ), stranger_answer
        frobnicate = by_id[str(injected[0]["id"])][0]
        assert frobnicate["error"]["code"] == -32601
        # Nothing here is a question for the user.
        assert not [m for m in client.received if m.get("method") == "session/request_permission"]
