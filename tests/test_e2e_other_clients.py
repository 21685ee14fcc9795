"""A thread another Codex client made (Codex's TUI, Codex Desktop, another program), against the
real Codex through the bridge's daemon.

The other client here speaks Codex's JSON-RPC itself on a connection of its own to the daemon's
Codex, as Codex's own clients do: it starts a thread and runs turns on it. An ACP window lists the
thread, loads it while a turn runs (the history, then the rest of the turn live, each once),
prompts it, and is shown the sub-agents the other client's turn spawns.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge.acp_client import AcpClient, open_agent
from bridge.daemon.runtime import DaemonInfo
from bridge.shell.codex_transport import connect_codex
from tests.support.daemon import running_daemon, serve_argv
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp, words
from tests.support.reading import Ended
from tests.support.scenarios.subagents import SUBAGENTS, script, spawn, wait

pytestmark = pytest.mark.e2e


class CodexClient:
    """Another Codex client: plain JSON-RPC on a WebSocket to the daemon's Codex."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.received: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._arrived = trio.Event()

    async def run(self) -> None:
        while True:
            try:
                data = await self.stream.receive()
            except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                return
            self.received.append(msgspec.json.decode(data))
            self._arrived.set()
            self._arrived = trio.Event()

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        seen = 0
        while True:
            for message in self.received[seen:]:
                if predicate(message):
                    return message
            seen = len(self.received)
            await self._arrived.wait()

    async def request(self, method: str, params: Any) -> Any:
        rid = next(self._ids)
        await self.stream.send(msgspec.json.encode({"id": rid, "method": method, "params": params}))
        answer = await self.wait_for(lambda m: m.get("id") == rid and "method" not in m)
        assert "result" in answer, answer
        return answer["result"]

    async def turn(self, thread: str, text: str) -> str:
        started = await self.request(
            "turn/start", {"threadId": thread, "input": [{"type": "text", "text": text}]}
        )
        return str(started["turn"]["id"])

    async def turn_completed(self, turn: str) -> None:
        await self.wait_for(
            lambda m: m.get("method") == "turn/completed" and m["params"]["turn"]["id"] == turn
        )


@asynccontextmanager
async def codex_client(info: DaemonInfo) -> AsyncIterator[CodexClient]:
    async with connect_codex(info.url, token_file=info.tokenFile) as connection:
        client = CodexClient(connection.stream)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await client.request("initialize", {"clientInfo": {"name": "other", "version": "1"}})
            await connection.stream.send(msgspec.json.encode({"method": "initialized"}))
            yield client
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def setting(
    env: dict[str, str], tmp_path: Path, capabilities: dict[str, Any] | None = None
) -> AsyncIterator[tuple[CodexClient, AcpClient]]:
    runtime = tmp_path / "runtime"
    with (tmp_path / "bridge.log").open("ab") as out:
        async with (
            running_daemon(env, runtime, tmp_path / "daemon.log") as (_daemon, info),
            codex_client(info) as other,
            open_agent(serve_argv(runtime), env=env, stderr=out.fileno()) as (window, _),
        ):
            await window.initialize(capabilities)
            yield other, window


async def test_another_clients_thread_is_listed_loaded_live_and_takes_prompts(
    bridge_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with setting(bridge_env, tmp_path) as (other, window):
            started = await other.request("thread/start", {"cwd": str(workspace)})
            thread = started["thread"]["id"]
            await other.turn_completed(await other.turn(thread, "@@ say first"))
            listed = await window.request("session/list", {})
            assert thread in [s["sessionId"] for s in listed["sessions"]]
            # A turn of the other client's runs as the window opens the thread.
            turn = await other.turn(thread, "@@ words 60 delay_ms=40")
            await other.wait_for(
                lambda m: (
                    m.get("method") == "item/agentMessage/delta" and "word5" in m["params"]["delta"]
                )
            )
            await window.request(
                "session/load", {"sessionId": thread, "cwd": str(workspace), "mcpServers": []}
            )
            await other.turn_completed(turn)
            await window.wait_for(lambda _m: window.text_of(thread).endswith("word60"))
            # The history, then the rest of the running turn: each once.
            assert window.text_of(thread) == "first" + words(60)
            assert window.text_of(thread, "user_message_chunk") == (
                "@@ say first@@ words 60 delay_ms=40"
            )
            # The window's prompt: a turn of the thread the other client sees too.
            assert await window.prompt(thread, "@@ say mine") == Ended({"stopReason": "end_turn"})
            assert window.text_of(thread).endswith("mine")
            await other.wait_for(
                lambda m: (
                    m.get("method") == "item/completed"
                    and m["params"]["item"].get("text") == "mine"
                )
            )
            # The other client's next turn streams into the window, its prompt first.
            at = len(window.updates)
            await other.turn_completed(await other.turn(thread, "@@ say theirs"))
            await window.wait_for(lambda _m: window.text_of(thread).endswith("theirs"))
            kinds = [
                u["update"]["sessionUpdate"]
                for u in window.updates[at:]
                if u["update"]["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
            ]
            assert kinds == ["user_message_chunk", "agent_message_chunk"]
    assert_valid_acp(window)


async def test_a_sub_agent_of_another_clients_turn_is_announced_in_the_window(
    bridge_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with setting(bridge_env, tmp_path, SUBAGENTS) as (other, window):
            started = await other.request("thread/start", {"cwd": str(workspace)})
            thread = started["thread"]["id"]
            await other.turn_completed(await other.turn(thread, "@@ say first"))
            await window.request(
                "session/load", {"sessionId": thread, "cwd": str(workspace), "mcpServers": []}
            )
            spawning = script(spawn("@@ say alpha reporting"), wait(), "@@ say all reported")
            await other.turn_completed(await other.turn(thread, spawning))
            await window.wait_for(lambda _m: window.text_of(thread).endswith("all reported"))
            [child] = {
                u["update"]["sessionId"]
                for u in window.updates
                if u["sessionId"] == thread and u["update"]["sessionUpdate"] == "subagent_update"
            }
            await window.wait_for(lambda _m: window.text_of(child) == "alpha reporting")
    assert_valid_acp(window, unstable=True)
