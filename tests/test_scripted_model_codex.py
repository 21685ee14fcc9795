"""The scripted model against the real Codex: ``codex app-server`` on stdio runs scripted turns.

These tests speak Codex's app-server protocol directly (one JSON object per line, no ``"jsonrpc"``
member), so that they check the scripted model alone, not the bridge.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.scripted_model.directives import reasoning_words, words_text

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 60


def codex_binary() -> Path:
    """The pinned Codex: ``$CODEX_ACP_BRIDGE_CODEX_BIN``, else the copy the setup puts in tools/."""
    configured = os.environ.get("CODEX_ACP_BRIDGE_CODEX_BIN")
    path = Path(configured) if configured else REPO / "tools/node/node_modules/.bin/codex"
    if not path.exists():
        pytest.fail(
            f"the Codex binary is missing at {path}: install @openai/codex@0.169.0 into "
            "tools/node (npm install --prefix tools/node) or set CODEX_ACP_BRIDGE_CODEX_BIN"
        )
    return path


class AppServer:
    """A minimal app-server client: requests with ids, notifications kept in arrival order."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._buffer = b""
        self._next_id = 0
        self.notifications: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        await self._stdin.send_all(msgspec.json.encode(message) + b"\n")

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            data = await self._stdout.receive_some(65536)
            if not data:
                raise EOFError("codex app-server closed its stdout")
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = msgspec.json.decode(line)
        if "method" in message and "id" in message:
            # A server request (an approval): these tests accept whatever Codex asks.
            await self.send({"id": message["id"], "result": {"decision": "accept"}})
        elif "method" in message:
            self.notifications.append(message)
        return message

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        request_id = self._next_id
        await self.send({"id": request_id, "method": method, "params": params})
        while True:
            message = await self.receive()
            if message.get("id") == request_id and "method" not in message:
                assert "error" not in message, message
                result: dict[str, Any] = message["result"]
                return result

    @staticmethod
    def _ends_turn(message: dict[str, Any], thread_id: str) -> bool:
        return bool(
            message.get("method") == "turn/completed" and message["params"]["threadId"] == thread_id
        )

    async def run_turn(self, thread_id: str, text: str) -> list[dict[str, Any]]:
        """Start a turn with ``text``; return its notifications up to ``turn/completed``."""
        first = len(self.notifications)
        params = {"threadId": thread_id, "input": [{"type": "text", "text": text}]}
        await self.request("turn/start", params)
        # The turn may already have ended while waiting for the response to turn/start.
        ended = any(self._ends_turn(n, thread_id) for n in self.notifications[first:])
        while not ended:
            ended = self._ends_turn(await self.receive(), thread_id)
        return self.notifications[first:]


@asynccontextmanager
async def codex_against_scripted_model(tmp_path: Path) -> AsyncIterator[tuple[AppServer, str]]:
    """A scripted model, a CODEX_HOME pointing at it, an initialized app-server and a thread."""
    binary = codex_binary()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    async with trio.open_nursery() as nursery:
        model: ScriptedModel = await nursery.start(serve_scripted_model)
        home = tmp_path / "codex-home"
        write_codex_home(home, model.base_url)
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        env["CODEX_HOME"] = str(home)
        with (tmp_path / "codex-stderr.log").open("wb") as stderr:
            process = await trio.lowlevel.open_process(
                [str(binary), "app-server"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
            )
        try:
            server = AppServer(process)
            client_info = {"name": "scripted-model-test", "version": "0"}
            await server.request("initialize", {"clientInfo": client_info, "capabilities": {}})
            await server.send({"method": "initialized"})
            started = await server.request("thread/start", {"cwd": str(workspace)})
            yield server, started["thread"]["id"]
        finally:
            # `codex` is a node launcher whose native child shares these pipes: closing stdin
            # lets both exit on their own; the kill is for a Codex that does not.
            with trio.CancelScope(shield=True):
                for pipe in (process.stdin, process.stdout):
                    if pipe is not None:
                        await pipe.aclose()
                with trio.move_on_after(10):
                    await process.wait()
                process.kill()
                await process.wait()
            nursery.cancel_scope.cancel()


def deltas(notifications: list[dict[str, Any]], method: str) -> str:
    return "".join(n["params"]["delta"] for n in notifications if n["method"] == method)


def completed_turn(notifications: list[dict[str, Any]]) -> dict[str, Any]:
    (done,) = [n for n in notifications if n["method"] == "turn/completed"]
    turn: dict[str, Any] = done["params"]["turn"]
    return turn


def completed_items(notifications: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        n["params"]["item"]
        for n in notifications
        if n["method"] == "item/completed" and n["params"]["item"]["type"] == kind
    ]


async def test_codex_streams_scripted_words(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with codex_against_scripted_model(tmp_path) as (server, thread_id):
            turn = await server.run_turn(thread_id, "@@ words 30")
    assert deltas(turn, "item/agentMessage/delta") == words_text(30)
    assert completed_turn(turn)["status"] == "completed"
    (message,) = completed_items(turn, "agentMessage")
    assert message["text"] == words_text(30)
    assert any(n["method"] == "thread/tokenUsage/updated" for n in turn)


async def test_codex_fails_the_turn_on_a_scripted_failure(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with codex_against_scripted_model(tmp_path) as (server, thread_id):
            turn = await server.run_turn(thread_id, "@@ words 2\n@@ fail")
    assert completed_turn(turn)["status"] == "failed"
    assert deltas(turn, "item/agentMessage/delta") == words_text(2)
    (error,) = [n for n in turn if n["method"] == "error"]
    assert error["params"]["willRetry"] is False


async def test_codex_streams_a_scripted_reasoning_summary(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with codex_against_scripted_model(tmp_path) as (server, thread_id):
            turn = await server.run_turn(thread_id, "@@ reason 5\n@@ words 3")
    assert deltas(turn, "item/reasoning/summaryTextDelta") == reasoning_words(5)
    assert deltas(turn, "item/agentMessage/delta") == words_text(3)
    (reasoning,) = completed_items(turn, "reasoning")
    assert reasoning["summary"] == [reasoning_words(5)]
    # The reasoning item ends before the message starts.
    methods = [(n["method"], n["params"].get("item", {}).get("type")) for n in turn]
    assert methods.index(("item/completed", "reasoning")) < methods.index(
        ("item/started", "agentMessage")
    )
    assert completed_turn(turn)["status"] == "completed"


async def test_codex_runs_a_scripted_command_then_the_next_step(tmp_path: Path) -> None:
    script = '@@ call exec_command {"cmd": "echo scripted-hi"}\n@@ then\n@@ say done'
    with trio.fail_after(TIMEOUT):
        async with codex_against_scripted_model(tmp_path) as (server, thread_id):
            turn = await server.run_turn(thread_id, script)
    (command,) = completed_items(turn, "commandExecution")
    assert command["status"] == "completed"
    assert "scripted-hi" in command["aggregatedOutput"]
    assert deltas(turn, "item/agentMessage/delta") == "done"
    assert completed_turn(turn)["status"] == "completed"
