"""``serve`` and the bridge's ``daemon`` on Codex's own daemon (``codex app-server daemon``),
against the real one in a temporary ``CODEX_HOME``.

Each test starts Codex's daemon, and ends with none of its processes left (its updater,
which ``codex app-server daemon stop`` leaves running, included).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
import trio

from bridge.engine.features.prompts._input import MAX_INPUT_BYTES, MAX_INPUT_CHARS
from bridge.jsonrpc import RpcError
from tests.support.codex_daemon import (
    CodexDaemon,
    codex_client,
    codex_daemon,
    codex_home_processes,
    codex_requests,
)
from tests.support.daemon import StartDaemon, serve_argv
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation
from tests.support.reading import Ended
from tests.test_e2e_daemon import status_json

pytestmark = pytest.mark.e2e

JOINED = "Codex: Codex's daemon on "

OnCodexDaemon = Callable[..., AbstractAsyncContextManager[tuple[CodexDaemon, Conversation]]]


@pytest.fixture
def on_codex_daemon(
    open_conversation: OpenConversation,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    codex_home: Path,
    codex_bin: str,
) -> OnCodexDaemon:
    """``async with on_codex_daemon() as (daemon, talk)``: Codex's daemon on the test's
    ``CODEX_HOME``, and a conversation with ``serve``, which finds it (or, with
    ``codex_url``, is told where it is)."""

    @asynccontextmanager
    async def start(*, codex_url: bool = False) -> AsyncIterator[tuple[CodexDaemon, Conversation]]:
        async with codex_daemon(codex_home, codex_bin, bridge_env) as daemon:
            # ``--codex-url`` naming the daemon's socket, or nothing: serve finds it.
            argv = [*bridge_argv, "--codex-url", daemon.url] if codex_url else bridge_argv
            async with open_conversation(argv=argv) as talk:
                yield daemon, talk

    return start


async def test_serve_finds_codex_s_daemon_and_its_sessions_live_there(
    on_codex_daemon: OnCodexDaemon, codex_home: Path, stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_codex_daemon() as (daemon, talk):
            assert len((await talk.said("@@ words 30")).split()) == 30
            [loaded] = await codex_requests(daemon.url, ("thread/loaded/list", {}))
            assert talk.sid in loaded["data"]
        said = [line for line in stderr_file.read_text().splitlines() if "Codex:" in line]
        assert said and said[0].startswith(f"codex-acp-bridge: {JOINED}{daemon.socket}")
        assert not codex_home_processes(codex_home)


async def test_codex_url_names_codex_s_daemon_socket(on_codex_daemon: OnCodexDaemon) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_codex_daemon(codex_url=True) as (daemon, talk):
            assert await talk.prompt("@@ say hello") == Ended({"stopReason": "end_turn"})
            [loaded] = await codex_requests(daemon.url, ("thread/loaded/list", {}))
            assert talk.sid in loaded["data"]


async def test_a_session_outlives_a_restart_of_codex_s_daemon(
    on_codex_daemon: OnCodexDaemon,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_codex_daemon() as (daemon, talk):
            client, session, process = talk.client, talk.sid, talk.process
            assert await client.prompt(session, "@@ say one") == Ended({"stopReason": "end_turn"})
            before = daemon.started["pid"]
            restarted = await daemon.command("restart")
            assert restarted["status"] == "restarted" and restarted["pid"] != before
            assert await client.prompt(session, "@@ say two") == Ended({"stopReason": "end_turn"})
            assert client.text_of(session).endswith("two")
            assert process.poll() is None
            [loaded] = await codex_requests(daemon.url, ("thread/loaded/list", {}))
            assert session in loaded["data"]


async def test_the_bridge_s_daemon_uses_codex_s_daemon_and_shows_every_thread(
    start_daemon: StartDaemon,
    runtime: Path,
    open_conversation: OpenConversation,
    bridge_env: dict[str, str],
    codex_home: Path,
    codex_bin: str,
    workspace: Path,
    stderr_file: Path,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with (
            codex_daemon(codex_home, codex_bin, bridge_env) as daemon,
            # Another client of Codex's daemon (as Codex's TUI is), with a thread it started
            # before the bridge's daemon came, and never prompted: loaded, not stored.
            codex_client(daemon.url) as tui,
        ):
            started = await tui("thread/start", {"cwd": str(workspace)})
            other = started["thread"]["id"]
            async with start_daemon() as (
                ours,
                info,
            ):
                assert info.url == daemon.url  # no second app-server on this CODEX_HOME
                assert codex_processes_of(ours.pid) == []
                while not any(  # noqa: ASYNC110 (polls status)
                    t["threadId"] == other
                    for t in (await status_json(bridge_env, runtime))["threads"]
                ):
                    await trio.sleep(0.1)
                # An editor through the bridge's daemon works on Codex's daemon too.
                async with open_conversation(argv=serve_argv(runtime)) as talk:
                    client, session = talk.client, talk.sid
                    assert await client.prompt(session, "@@ say hi") == Ended(
                        {"stopReason": "end_turn"}
                    )
                    [loaded] = await codex_requests(daemon.url, ("thread/loaded/list", {}))
                    assert session in loaded["data"]
                    # Codex's daemon restarts: the editor goes on, the watcher follows it.
                    assert (await daemon.command("restart"))["status"] == "restarted"
                    assert await client.prompt(session, "@@ say again") == Ended(
                        {"stopReason": "end_turn"}
                    )
                    while not any(  # noqa: ASYNC110 (polls status)
                        t["threadId"] == session and t["state"] == "idle"
                        for t in (await status_json(bridge_env, runtime))["threads"]
                    ):
                        await trio.sleep(0.1)
                assert ours.poll() is None
    assert f"Codex: the daemon's at {daemon.url}" in stderr_file.read_text()


def codex_processes_of(pid: int) -> list[int]:
    from tests.support.scenarios.recovery import codex_processes

    return codex_processes(pid)


async def test_a_prompt_larger_than_codex_accepts_is_refused_and_the_connection_lives(
    on_codex_daemon: OnCodexDaemon, workspace: Path, stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_codex_daemon() as (_, talk):
            client, session, process = talk.client, talk.sid, talk.process
            other = await client.new_session(str(workspace))  # never prompted
            image = base64.b64encode(b"\0" * (MAX_INPUT_BYTES * 3 // 4 + 1024)).decode()
            big = [
                [{"type": "text", "text": "x" * (MAX_INPUT_CHARS + 1)}],
                [{"type": "image", "mimeType": "image/png", "data": image}],
            ]
            for prompt, limit in zip(big, (MAX_INPUT_CHARS, MAX_INPUT_BYTES), strict=True):
                with pytest.raises(RpcError) as refused:
                    await client.request("session/prompt", {"sessionId": session, "prompt": prompt})
                assert refused.value.code == -32602 and str(limit) in refused.value.message
            assert await client.prompt(session, "@@ say fine") == Ended({"stopReason": "end_turn"})
            assert await client.prompt(other, "@@ say also") == Ended({"stopReason": "end_turn"})
            assert process.poll() is None
    # Nothing about a lost Codex: the connection never broke.
    assert "restarting in" not in stderr_file.read_text()


async def test_codex_s_daemon_stopped_under_a_session_is_an_error_not_a_hang(
    on_codex_daemon: OnCodexDaemon, codex_home: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_codex_daemon() as (daemon, talk):
            assert await talk.prompt("@@ say one") == Ended({"stopReason": "end_turn"})
            assert (await daemon.command("stop"))["status"] == "stopped"
            # The bridge tries to reconnect, then says why it stopped trying.
            with pytest.raises(RpcError) as refused:
                await talk.prompt("@@ say two")
            assert "not restarting it" in refused.value.message
            assert talk.process.poll() is None  # the bridge stays for its editor
        assert not codex_home_processes(codex_home)
