"""The session lifecycle end to end: the real bridge, the real Codex 0.169, the scripted model.

Load and resume run in a *new* bridge process (so a new Codex) on the same ``CODEX_HOME``:
what a user gets after restarting their editor.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from msgspec import Raw

from bridge.acp_client import AcpClient
from bridge.codex.messages import decode_item
from bridge.engine.features.sessions._listing import LIST_PAGE
from bridge.engine.views import tool_views as tools
from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.e2e import (
    SCENARIO_SECONDS,
    Conversation,
    OpenConversation,
    earlier_session,
    returning_client,
    words,
)
from tests.support.loopback import http_requests
from tests.support.oauth_mcp_server import mcp_answer
from tests.support.reading import Ended, text_of
from tests.support.scenarios.sessions import probe_mcp_server

pytestmark = pytest.mark.e2e

HISTORY_KINDS = {"user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call"}
COMMAND_PROMPT = '@@ call exec_command {"cmd": "echo from-the-shell"}\n@@ then\n@@ say ran it'


def _answer_of(client: AcpClient, rid: Any) -> int:
    """Index in ``client.received`` of the response to request ``rid``."""
    for index, message in enumerate(client.received):
        if message.get("id") == rid and "method" not in message:
            return index
    raise AssertionError(f"no response to {rid}")


def _rid_of(client: AcpClient, method: str, session_id: str | None = None) -> Any:
    """The id of the last request of ``method`` (for ``session_id``) the client sent."""
    found = [
        rid
        for rid, m in client.sent_requests.items()
        if m == method
        and (session_id is None or client.sent_params[rid].get("sessionId") == session_id)
    ]
    assert found, f"no {method} sent"
    return found[-1]


def _updates_between(
    client: AcpClient, start: int, end: int, session_id: str
) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in client.received[start:end]
        if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
    ]


async def refused(client: AcpClient, method: str, params: dict[str, Any]) -> RpcError:
    """The error ``method`` is answered with (it must be one)."""
    with pytest.raises(RpcError) as refusal:
        await client.request(method, params)
    return refusal.value


def _tools_replay_commands() -> bool:
    """Whether the tools feature shows a finished command in a replay (its work may land later)."""
    sample = {
        "type": "commandExecution",
        "id": "call_x",
        "command": "/bin/bash -lc 'echo x'",
        "cwd": "/w",
        "status": "completed",
        "commandActions": [{"type": "unknown", "command": "echo x"}],
        "aggregatedOutput": "x\n",
        "exitCode": 0,
    }
    return bool(tools.history_updates(decode_item(Raw(msgspec.json.encode(sample)))))


async def test_load_in_a_new_bridge_replays_the_history_before_its_response(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    first = await earlier_session(open_conversation, "@@ reason 4\n@@ words 5", COMMAND_PROMPT)
    sid = first.sid
    live = [u["update"] for u in first.client.updates if u["sessionId"] == sid]
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(session=False) as talk:
            client = talk.client
            assert talk.init["agentCapabilities"]["loadSession"] is True
            sent_at = len(client.received)
            result = await client.request(
                "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            )
            assert isinstance(result, dict)
            answered_at = _answer_of(client, _rid_of(client, "session/load"))
            replay = _updates_between(client, sent_at, answered_at, sid)
            history_after = [
                u["update"]["sessionUpdate"]
                for u in client.updates[len(replay) :]
                if u["update"]["sessionUpdate"] in ("user_message_chunk", "agent_thought_chunk")
            ]
            assert history_after == [], "the whole history comes before the load's response"

            # The user's two prompts, then what Codex answered, in order, with item ids.
            kinds = [u["sessionUpdate"] for u in replay]
            users = [u for u in replay if u["sessionUpdate"] == "user_message_chunk"]
            assert [u["content"]["text"] for u in users] == [
                "@@ reason 4\n@@ words 5",
                COMMAND_PROMPT,
            ]
            assert users[0]["messageId"] != users[1]["messageId"]
            assert kinds.index("agent_thought_chunk") < kinds.index("agent_message_chunk")
            assert text_of(replay, "agent_thought_chunk") == "thought1 thought2 thought3 thought4"
            assert text_of(replay, "agent_message_chunk") == words(5) + "ran it"
            # The same message ids the live session used.
            live_ids = {u.get("messageId") for u in live if u["sessionUpdate"] in HISTORY_KINDS}
            replay_ids = {
                u.get("messageId")
                for u in replay
                if u["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")
            }
            assert replay_ids <= live_ids
            command_at = kinds.index("user_message_chunk", kinds.index("user_message_chunk") + 1)
            if _tools_replay_commands():
                tool_calls = [u for u in replay if u["sessionUpdate"] == "tool_call"]
                assert tool_calls, "the command shows in the replay"
                assert kinds.index("tool_call") > command_at
                assert "from-the-shell" in json.dumps(tool_calls + replay)

            # The loaded session takes new prompts.
            assert await client.prompt(sid, "@@ words 3") == Ended({"stopReason": "end_turn"})
            assert client.text_of(sid).endswith(words(3))

            # A second load of the open session is refused and changes nothing.
            with pytest.raises(RpcError) as again:
                await client.request(
                    "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
                )
            assert again.value.code == -32600 and "already open" in again.value.message
            assert await client.prompt(sid, "@@ words 2") == Ended({"stopReason": "end_turn"})


async def test_load_of_a_thread_that_does_not_exist_is_not_found(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    missing = "019a0000-0000-7000-8000-000000000000"
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(session=False) as talk:
            client = talk.client
            for method in ("session/load", "session/resume"):
                params = {"sessionId": missing, "cwd": str(workspace), "mcpServers": []}
                failure = await refused(client, method, params)
                assert failure.code == -32002 and missing in failure.message
            with pytest.raises(RpcError) as prompt:
                await client.prompt(missing, "@@ words 1")
            assert prompt.value.code == -32002
            # An id that is not a thread id at all is said to be one, not a never-prompted one.
            with pytest.raises(RpcError) as malformed:
                await client.request(
                    "session/load",
                    {"sessionId": "not-a-thread-id", "cwd": str(workspace), "mcpServers": []},
                )
            assert malformed.value.code == -32002
            assert "not-a-thread-id is not a Codex thread id" in malformed.value.message
            assert malformed.value.data["codex"].startswith("invalid thread id")
            sid = await client.new_session(str(workspace))
            assert await client.prompt(sid, "@@ words 2") == Ended({"stopReason": "end_turn"})


async def test_a_session_never_prompted_cannot_be_loaded_by_a_new_bridge_and_says_why(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    """Codex stores a thread at its first turn: one never prompted is gone with its Codex."""
    async with returning_client(open_conversation) as (sid, talk):
        params = {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        for method in ("session/load", "session/resume"):
            failure = await refused(talk.client, method, params)
            assert failure.code == -32002
            assert sid in failure.message
            assert "never prompted" in failure.message
            assert failure.data == {
                "sessionId": sid,
                "codex": f"thread not loaded: {sid}",  # Codex 0.169's words
            }
        # Nor is it listed; new sessions work.
        client = talk.client
        listed = await client.request("session/list", {})
        assert sid not in {s["sessionId"] for s in listed["sessions"]}
        other = await client.new_session(str(workspace))
        assert await client.prompt(other, "@@ words 2") == Ended({"stopReason": "end_turn"})


async def test_resume_in_a_new_bridge_has_no_replay_and_the_session_works(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    async with returning_client(open_conversation, "@@ words 4") as (sid, talk):
        client = talk.client
        assert talk.init["agentCapabilities"]["sessionCapabilities"]["resume"] == {}
        sent_at = len(client.received)
        await client.request("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        answered_at = _answer_of(client, _rid_of(client, "session/resume"))
        kinds = {u["sessionUpdate"] for u in _updates_between(client, sent_at, answered_at, sid)}
        assert not kinds & HISTORY_KINDS, "resume does not replay"
        assert await client.prompt(sid, "@@ words 3") == Ended({"stopReason": "end_turn"})
        assert client.text_of(sid) == words(3)
        with pytest.raises(RpcError) as again:
            await client.request("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        assert again.value.code == -32600 and "already open" in again.value.message


async def test_list_pages_through_root_threads_and_filters_by_cwd(
    open_conversation: OpenConversation, workspace: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # More than one page (the bridge asks Codex for pages of LIST_PAGE).
    count = LIST_PAGE + 2
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(session=False) as talk:
            client = talk.client
            assert talk.init["agentCapabilities"]["sessionCapabilities"]["list"] == {}
            made: list[str] = []
            for n in range(count):
                sid = await client.new_session(str(workspace))
                await client.prompt(sid, f"@@ say session {n}")
                made.append(sid)
            # A session whose model spawns a sub-agent: the sub-agent is no session of its own.
            parent = await client.new_session(str(elsewhere))
            spawn = (
                '@@ call multi_agent_v1/spawn_agent {"message": "@@ words 2"}\n@@ then\n@@ say ok'
            )
            await client.prompt(parent, spawn)
            # Never listed: a session with no turn (Codex stores a thread at its first turn).
            await client.new_session(str(workspace))

            pages: list[dict[str, Any]] = [await client.request("session/list", {})]
            while "nextCursor" in pages[-1]:
                pages.append(
                    await client.request("session/list", {"cursor": pages[-1]["nextCursor"]})
                )
            assert len(pages) >= 2, "more than one page"
            listed = [s for page in pages for s in page["sessions"]]
            ids = [s["sessionId"] for s in listed]
            assert len(ids) == len(set(ids)), "no session on two pages"
            assert set(ids) == {*made, parent}, "every root thread, and no sub-agent thread"
            by_id = {s["sessionId"]: s for s in listed}
            assert by_id[made[3]]["title"] == "@@ say session 3"
            assert by_id[made[3]]["cwd"] == str(workspace)
            for info in listed:
                assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", info["updatedAt"])
            stamps = [s["updatedAt"] for s in listed]
            assert stamps == sorted(stamps, reverse=True), "most recently active first"

            filtered = await client.request("session/list", {"cwd": str(elsewhere)})
            assert [s["sessionId"] for s in filtered["sessions"]] == [parent]
            assert by_id[parent]["cwd"] == str(elsewhere)

            with pytest.raises(RpcError) as bad:
                await client.request("session/list", {"cursor": "not-a-cursor"})
            assert bad.value.code == -32602 and "cursor" in bad.value.message
            with pytest.raises(RpcError) as relative:
                await client.request("session/list", {"cwd": "relative"})
            assert relative.value.code == -32602
            assert await client.prompt(made[0], "@@ words 1") == Ended({"stopReason": "end_turn"})


async def test_close_while_a_prompt_runs_cancels_it_then_forgets_the_session(
    conversation: Conversation, workspace: Path
) -> None:
    client, sid = conversation.client, conversation.sid
    assert conversation.init["agentCapabilities"]["sessionCapabilities"]["close"] == {}
    outcome: dict[str, Any] = {}

    async def prompt() -> None:
        outcome["prompt"] = await client.prompt(sid, "@@ words 3000 delay_ms=10")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prompt)
        await client.wait_for(lambda _m: len(client.text_of(sid).split()) >= 20)
        outcome["close"] = await client.request("session/close", {"sessionId": sid})
        closed_at = len(client.received)
    assert outcome["prompt"] == Ended({"stopReason": "cancelled"})
    assert outcome["close"] == {}
    assert _answer_of(client, _rid_of(client, "session/prompt")) < _answer_of(
        client, _rid_of(client, "session/close")
    )
    streamed = len(client.text_of(sid).split())
    assert 20 <= streamed < 3000
    # Forgotten: nothing more arrives for it, and requests for it are not found.
    with pytest.raises(RpcError) as gone:
        await client.prompt(sid, "@@ words 1")
    assert gone.value.code == -32002
    with pytest.raises(RpcError) as unknown:
        await client.request("session/close", {"sessionId": sid})
    assert unknown.value.code == -32002
    assert not [
        m
        for m in client.received[closed_at:]
        if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
    ]

    # Closed here, it can be loaded again on the same connection, history and all.
    sent_at = len(client.received)
    await client.request(
        "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
    )
    answered_at = _answer_of(client, _rid_of(client, "session/load"))
    replay = _updates_between(client, sent_at, answered_at, sid)
    assert text_of(replay, "user_message_chunk") == "@@ words 3000 delay_ms=10"
    assert await client.prompt(sid, "@@ words 2") == Ended({"stopReason": "end_turn"})


async def test_fork_makes_a_new_session_with_the_same_history(
    open_conversation: OpenConversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(session=False) as stable:
            assert "fork" not in stable.init["agentCapabilities"]["sessionCapabilities"]

        async with open_conversation(capabilities={"subagents": {}}, unstable=True) as talk:
            client, sid = talk.client, talk.sid
            assert talk.init["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
            assert await client.prompt(sid, "@@ say remember ZEBRA-42") == Ended(
                {"stopReason": "end_turn"}
            )
            forked = await client.request(
                "session/fork", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            )
            fork = forked["sessionId"]
            assert fork != sid
            requests_before = len(scripted_model.requests)
            assert await client.prompt(fork, "@@ say in the fork") == Ended(
                {"stopReason": "end_turn"}
            )
            assert client.text_of(fork) == "in the fork"
            # The fork's model request carries the original conversation.
            fork_requests = str(scripted_model.requests[requests_before:])
            assert "ZEBRA-42" in fork_requests and "in the fork" in fork_requests
            # The original goes on independently.
            assert await client.prompt(sid, "@@ say still the original") == Ended(
                {"stopReason": "end_turn"}
            )
            assert "in the fork" not in client.text_of(sid)


# -- MCP servers ----------------------------------------------------------------------

MCP_STDIO_SERVER = probe_mcp_server(
    "probe_stdio_tool",
    prelude="""\
import json, os, sys
with open(os.environ["MARKER"], "a") as marker:
    marker.write(json.dumps({"argv": sys.argv[1:], "greeting": os.environ.get("GREETING")}) + "\\n")
""",
)


async def serve_http_mcp(
    seen: list[dict[str, Any]], *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    """A minimal streamable-HTTP MCP server on 127.0.0.1 (JSON responses, no SSE stream)."""

    async def handle(stream: trio.SocketStream) -> None:
        async for method, _path, headers, body in http_requests(stream):
            message = json.loads(body) if method == "POST" and body else {}
            seen.append({"http": method, "headers": headers, "message": message})
            status, payload = "405 Method Not Allowed", b""
            if method == "POST" and "id" not in message:
                status = "202 Accepted"
            elif method == "POST":
                status = "200 OK"
                payload = json.dumps(mcp_answer(message, "probe-http", "probe_http_tool")).encode()
            await stream.send_all(
                f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(payload)}\r\n\r\n".encode()
                + payload
            )

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


async def _eventually(check: Callable[[], bool], what: str) -> None:
    """Poll (the file system and a server's log have no event to wait on), 20 s at most."""
    for _ in range(400):
        if check():
            return
        await trio.sleep(0.05)
    raise AssertionError(what)


async def test_client_mcp_servers_reach_codex_next_to_the_users_own(
    open_conversation: OpenConversation,
    codex_home: Path,
    workspace: Path,
    tmp_path: Path,
    scripted_model: ScriptedModel,
    nursery: trio.Nursery,
) -> None:
    script = tmp_path / "mcp_probe.py"
    script.write_text(MCP_STDIO_SERVER)
    marker = tmp_path / "mcp-started.jsonl"
    # The user's own config.toml names a server too: the client's must not replace it.
    write_codex_home(
        codex_home,
        scripted_model.base_url,
        extra_toml=(
            f"[mcp_servers.users_own]\ncommand = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(str(script))}, 'from-config']\n"
            f"env = {{ MARKER = {json.dumps(str(marker))} }}\n"
        ),
    )
    seen: list[dict[str, Any]] = []
    port = await nursery.start(serve_http_mcp, seen)
    servers = [
        {
            "name": "probe stdio",
            "command": sys.executable,
            "args": [str(script), "from-client"],
            "env": [
                {"name": "MARKER", "value": str(marker)},
                {"name": "GREETING", "value": "hello"},
            ],
        },
        {
            "type": "http",
            "name": "probe-http",
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": [{"name": "X-Probe", "value": "yes"}],
        },
    ]
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(session=False) as talk:
            client = talk.client
            assert talk.init["agentCapabilities"]["mcpCapabilities"] == {"http": True}
            result = await client.request(
                "session/new", {"cwd": str(workspace), "mcpServers": servers}
            )
            sid = result["sessionId"]

            def started() -> list[Any]:
                text = marker.read_text() if marker.exists() else ""
                return [json.loads(line) for line in text.splitlines()]

            await _eventually(
                lambda: {"from-client", "from-config"} <= {s["argv"][0] for s in started()},
                "both stdio MCP servers started",
            )
            assert {"argv": ["from-client"], "greeting": "hello"} in started()
            await _eventually(
                lambda: any(s["message"].get("method") == "tools/list" for s in seen),
                "Codex listed the HTTP server's tools",
            )
            initialize = next(s for s in seen if s["message"].get("method") == "initialize")
            assert initialize["headers"]["x-probe"] == "yes"

            assert await client.prompt(sid, "@@ say tools?") == Ended({"stopReason": "end_turn"})
            offered = str(scripted_model.requests[-1])
            assert "probe_stdio_tool" in offered and "probe_http_tool" in offered


async def test_close_while_a_permission_request_is_open_still_closes(
    open_conversation: OpenConversation,
) -> None:
    asked = trio.Event()

    async def never_answer(method: str, params: Any) -> Any:
        # A user who walks away from the question and closes the session instead.
        asked.set()
        await trio.sleep_forever()

    escalated = (
        '@@ call exec_command {"cmd": "echo hi", "sandbox_permissions": "require_escalated", '
        '"justification": "to test"}'
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(on_request=never_answer) as talk:
            client, sid = talk.client, talk.sid
            outcome: dict[str, Any] = {}

            async def prompt() -> None:
                outcome["prompt"] = await client.prompt(sid, escalated)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt)
                await asked.wait()
                outcome["close"] = await client.request("session/close", {"sessionId": sid})
            assert outcome == {"prompt": Ended({"stopReason": "cancelled"}), "close": {}}
            with pytest.raises(RpcError) as gone:
                await client.prompt(sid, "@@ words 1")
            assert gone.value.code == -32002
