"""Codex dies under the bridge: it is brought back, and every session keeps working.

The real bridge spawns the real ``codex app-server``; the test kills Codex with
SIGKILL (the process doing the work, not only its Node launcher) in the middle
of a streamed answer or of a sub-agent's work, and checks what a user relies
on: the prompt in flight fails with the reason, the same session id takes the
next prompt, a sub-agent's ``unknown`` is replaced by a fresh state, and a
Codex that keeps dying is given up on while the bridge stays up.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.jsonrpc import RpcError
from tests.support.app_server import app_server, crash
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation
from tests.support.reading import Ended
from tests.support.scenarios import prompt_outcome
from tests.support.scenarios import subagents as scenario
from tests.support.scenarios.recovery import codex_processes, kill_codex

# Version-sensitive: run against both ends of the tested Codex range.
pytestmark = [pytest.mark.e2e, pytest.mark.codex_versions]


async def logged(path: Path, text: str) -> None:
    """Until the bridge's log says ``text`` (a file has no event to wait on: poll it)."""
    while text not in path.read_text():  # noqa: ASYNC110
        await trio.sleep(0.05)


async def test_codex_killed_mid_answer_comes_back_and_the_same_session_answers(
    open_conversation: OpenConversation, stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, session, process = talk.client, talk.sid, talk.process
            outcome: dict[str, Any] = {}
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    prompt_outcome, client, session, "@@ words 3000 delay_ms=10", outcome
                )
                await client.wait_for(lambda _m: len(client.text_of(session).split()) >= 20)
                old = kill_codex(process.pid)
            error = outcome["error"]
            assert "Codex app-server" in error.message and "status" in error.message
            # Asked right away: it waits for the new Codex instead of failing.
            assert await client.prompt(session, "@@ words 3") == Ended({"stopReason": "end_turn"})
            assert set(codex_processes(process.pid)).isdisjoint(old)
            assert process.poll() is None
    log_text = stderr_file.read_text()
    assert "restarting in" in log_text and "Codex restarted" in log_text
    assert "Traceback" not in log_text


async def test_codex_killed_during_a_childs_work_the_child_gets_a_fresh_state(
    open_conversation: OpenConversation, stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(capabilities=scenario.SUBAGENTS, unstable=True) as talk:
            client, root, process = talk.client, talk.sid, talk.process
            outcome: dict[str, Any] = {}
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt_outcome, client, root, scenario.CANCEL_PARENT, outcome)
                kid = await scenario.words_from_first_child(client, 20)
                kill_codex(process.pid)
            assert "error" in outcome
            await client.wait_for(lambda _m: scenario.has_state(client, kid, "unknown"))
            # Once Codex is back, the child's unknown is replaced by what Codex says now.
            await client.wait_for(lambda _m: scenario.states(client, kid)[-1]["state"] != "unknown")
            fresh = scenario.states(client, kid)[-1]
            assert fresh["state"] in ("idle", "running", "requires_action"), fresh
            # The same root takes the next prompt.
            assert await client.prompt(root, "@@ say still here") == Ended(
                {"stopReason": "end_turn"}
            )
            assert client.text_of(root).endswith("still here")
    assert "Traceback" not in stderr_file.read_text()


async def test_a_codex_that_keeps_dying_is_given_up_on_and_the_bridge_stays_up(
    open_conversation: OpenConversation, codex_bin: str, stderr_file: Path, tmp_path: Path
) -> None:
    """The first Codex works; every later start dies at once (a broken upgrade, say)."""
    started = tmp_path / "started-once"
    wrapper = tmp_path / "codex-once"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ -e "{started}" ]; then echo "codex: cannot start" >&2; exit 1; fi\n'
        f'touch "{started}"\n'
        f'exec "{codex_bin}" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    argv = [sys.executable, "-m", "bridge", "serve", "--codex-bin", str(wrapper)]
    argv += ["--log-level", "info"]
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(argv=argv) as talk:
            client, session, process = talk.client, talk.sid, talk.process
            assert await client.prompt(session, "@@ words 3") == Ended({"stopReason": "end_turn"})
            kill_codex(process.pid)
            await logged(stderr_file, "restarting in")
            # Waits through the restarts, then fails with why the bridge stopped trying.
            with pytest.raises(RpcError) as gave_up:
                await client.prompt(session, "@@ words 3")
            assert "not restarting" in gave_up.value.message
            assert "cannot start" in gave_up.value.message
            # The bridge is still there and answers, with the same reason.
            with pytest.raises(RpcError) as later:
                await client.request("session/list", {})
            assert "not restarting" in later.value.message
            assert process.poll() is None
    log_text = stderr_file.read_text()
    assert "not restarting" in log_text and "Traceback" not in log_text


async def test_a_dropped_websocket_to_codex_is_reconnected_and_the_session_resumed(
    open_conversation: OpenConversation,
    codex_bin: str,
    codex_home: Path,
    stderr_file: Path,
    tmp_path: Path,
) -> None:
    """Attached with ``--codex-url``: the app-server dies and comes back on the same port (a
    service manager restarting it); the bridge reconnects and the session goes on, its
    history read back from Codex's own store."""
    async with app_server(codex_bin, codex_home, tmp_path) as (url, token, first):
        port = int(url.rsplit(":", 1)[1])
        argv = [sys.executable, "-m", "bridge", "serve", "--codex-url", url]
        argv += ["--codex-token-file", str(token), "--log-level", "info"]
        with trio.fail_after(SCENARIO_SECONDS):
            async with open_conversation(argv=argv, env=dict(os.environ)) as talk:
                client, session, process = talk.client, talk.sid, talk.process
                assert await client.prompt(session, "@@ say before") == Ended(
                    {"stopReason": "end_turn"}
                )
                crash(first)
                await first.wait()
                await logged(stderr_file, "restarting in")
                async with app_server(codex_bin, codex_home, tmp_path, port=port):
                    reply = await client.prompt(session, "@@ say after")
                    assert reply == Ended({"stopReason": "end_turn"})
                    assert client.text_of(session).endswith("after")
                    assert process.poll() is None
    log_text = stderr_file.read_text()
    assert "WebSocket connection to Codex" in log_text and "Traceback" not in log_text
