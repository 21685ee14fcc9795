"""A client that stops reading mid-answer, against the real Codex: the bridge keeps reading
Codex, merges the deltas it cannot send yet, and the client catches up with the whole text,
what streamed during the pause in a few merged messages. Over ``--codex-url`` the WebSocket to Codex stays open meanwhile.

The merging rules themselves are unit-tested in tests/test_outbox.py; the numbers (memory,
time to catch up, 200,000 deltas) are in bench/slow_client.py.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge.shell.streams import LineStream
from tests.support.acp_schema import ConversationValidator
from tests.support.app_server import app_server
from tests.support.daemon import StartDaemon
from tests.support.e2e import SCENARIO_SECONDS, words
from tests.support.reading import Ended, text_of

pytestmark = pytest.mark.e2e

WORDS = 30_000
PAUSE = 6.0
#: Deltas one merged chunk holds at least after the pause (Codex streams some 5,000 a second).
MERGED_AT_LEAST = 1_000


async def paused_answer(
    argv: list[str], env: dict[str, str], cwd: Path, stderr: Path
) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    """Prompt for ``WORDS`` words, read one chunk, read nothing for ``PAUSE`` s, then the rest.

    Returns the chunks, the prompt's answer, and how long the rest took once reading resumed.
    """
    with stderr.open("ab") as log:
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env
        )
    assert process.stdin and process.stdout
    stream = LineStream(process.stdout, process.stdin)
    validator = ConversationValidator()

    async def send(rid: int, method: str, params: object) -> None:
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        validator.client_sent(message)
        await stream.send(msgspec.json.encode(message))

    async def receive() -> dict[str, Any]:
        message: dict[str, Any] = msgspec.json.decode(await stream.receive())
        validator.agent_sent(message)  # merged chunks are valid ACP too
        return message

    async def answer(rid: int) -> dict[str, Any]:
        while (message := await receive()).get("id") != rid:
            pass
        return message

    try:
        await send(1, "initialize", {"protocolVersion": 1})
        await answer(1)
        await send(2, "session/new", {"cwd": str(cwd), "mcpServers": []})
        session = (await answer(2))["result"]["sessionId"]
        prompt = [{"type": "text", "text": f"@@ words {WORDS}"}]
        await send(3, "session/prompt", {"sessionId": session, "prompt": prompt})
        chunks: list[dict[str, Any]] = []
        resumed = 0.0
        while True:
            message = await receive()
            if message.get("id") == 3:
                return chunks, message, time.monotonic() - resumed
            if message.get("method") != "session/update":
                continue  # the account's usage limits, pushed to every client
            update = message["params"]["update"]
            assert message["params"]["sessionId"] == session
            if update["sessionUpdate"] == "agent_message_chunk":
                chunks.append(update)
                if len(chunks) == 1:
                    await trio.sleep(PAUSE)  # an editor busy elsewhere: the pipe fills up
                    resumed = time.monotonic()
    finally:
        await process.stdin.aclose()
        with trio.move_on_after(10):
            await process.wait()
        if process.poll() is None:
            process.kill()


def assert_caught_up_whole(chunks: list[dict[str, Any]], answer: dict[str, Any]) -> None:
    assert answer.get("result") == Ended({"stopReason": "end_turn"}), answer
    assert text_of(chunks) == words(WORDS)
    assert {c["messageId"] for c in chunks} == {chunks[0]["messageId"]}
    # What Codex streamed during the pause came merged: one chunk carries what was many
    # deltas (a word each). How much streamed in the pause is up to Codex and the machine's
    # load (bench/slow_client.py has the numbers), so the bound is what any pause of
    # PAUSE seconds holds; a bridge that does not merge sends a word a chunk.
    largest = max(len(c["content"]["text"].split()) for c in chunks)
    assert largest >= MERGED_AT_LEAST, f"{len(chunks)} chunks for {WORDS} deltas, largest {largest}"
    assert len(chunks) <= WORDS - largest + 1


# Version-sensitive (Codex's delta shape, its WebSocket's patience): both ends of the
# tested range. Through the daemon: the pinned Codex only, as for the other daemon routes.
@pytest.mark.codex_versions
async def test_a_paused_client_catches_up_with_the_whole_answer_in_a_few_messages(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path, stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        chunks, answer, _ = await paused_answer(
            [*bridge_argv, "--no-daemon"], bridge_env, workspace, stderr_file
        )
    assert_caught_up_whole(chunks, answer)


@pytest.mark.codex_versions
async def test_over_a_websocket_a_paused_client_keeps_its_codex_connection(
    codex_bin: str,
    codex_home: Path,
    tmp_path: Path,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    workspace: Path,
    stderr_file: Path,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with app_server(codex_bin, codex_home, tmp_path) as (url, token, _process):
            argv = [*bridge_argv, "--codex-url", url, "--codex-token-file", str(token)]
            chunks, answer, _ = await paused_answer(argv, bridge_env, workspace, stderr_file)
    assert_caught_up_whole(chunks, answer)
    log = stderr_file.read_text()
    assert "Codex" not in log or "lost" not in log, log


async def test_through_the_daemon_a_paused_client_keeps_its_session(
    start_daemon: StartDaemon,
    runtime: Path,
    bridge_env: dict[str, str],
    workspace: Path,
    stderr_file: Path,
) -> None:
    from tests.support.daemon import serve_argv

    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon():
            chunks, answer, _ = await paused_answer(
                serve_argv(runtime), bridge_env, workspace, stderr_file
            )
    assert_caught_up_whole(chunks, answer)
