"""A session never prompted, opened again while the Codex that made it runs, against the real Codex.

Codex 0.169 writes a thread to ``CODEX_HOME`` at its first turn: until then ``thread/resume`` on a
connection that did not create it fails ("no rollout found"), yet Codex holds the thread. The
bridge opens such a session all the same (see ``bridge/engine/lifecycle.py``): through the daemon
from a second ``serve`` after the first one left (acpx's ``sessions new`` then a prompt), and within
one bridge after ``session/close``. Each opened session then takes a prompt that streams and ends.
Once that Codex is gone (the daemon restarted it), the session's prompts say exactly that.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
import trio

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError
from tests.support.daemon import ATTACHED, StartDaemon, daemon_info, serve_argv
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation
from tests.support.reading import Ended
from tests.support.scenarios.recovery import codex_processes

pytestmark = pytest.mark.e2e

METHODS = ["session/resume", "session/load"]


async def _open_and_prompt(client: AcpClient, method: str, session: str, workspace: Path) -> None:
    """``method`` of ``session`` succeeds with its modes and no history; a prompt on it streams
    its answer and ends ``end_turn``."""
    start = len(client.updates)
    result = await client.request(
        method, {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
    )
    # The policies of the thread (config.toml: on-request, workspace-write) and its model.
    assert result["modes"]["currentModeId"] == "auto"
    options = {option["id"]: option["currentValue"] for option in result["configOptions"]}
    assert options["model"] == "mock-model"
    replayed = [u for u in client.updates[start:] if u["sessionId"] == session]
    assert not [u for u in replayed if "chunk" in u["update"]["sessionUpdate"]]  # no history
    assert await client.prompt(session, "@@ words 3") == Ended({"stopReason": "end_turn"})
    assert client.text_of(session).split() == ["word1", "word2", "word3"]


@pytest.mark.parametrize("method", METHODS)
async def test_a_second_serve_on_the_daemon_opens_a_session_the_first_never_prompted(
    start_daemon: StartDaemon,
    runtime: Path,
    method: str,
    open_conversation: OpenConversation,
    workspace: Path,
    stderr_file: Path,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon():
            async with open_conversation(argv=serve_argv(runtime)) as first:
                pass
            # The first editor is gone; the daemon's Codex still holds the thread.
            async with open_conversation(argv=serve_argv(runtime), session=False) as second:
                await _open_and_prompt(second.client, method, first.sid, workspace)
    assert ATTACHED in stderr_file.read_text()


@pytest.mark.parametrize("method", METHODS)
async def test_one_bridge_opens_again_a_session_it_closed_before_prompting_it(
    method: str, conversation: Conversation, workspace: Path
) -> None:
    client, session = conversation.client, conversation.sid
    await client.request("session/close", {"sessionId": session})
    await _open_and_prompt(client, method, session, workspace)


async def test_after_the_daemons_codex_restarted_a_session_never_prompted_says_it_is_gone(
    start_daemon: StartDaemon, runtime: Path, open_conversation: OpenConversation, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with (
            start_daemon() as (daemon, info),
            open_conversation(argv=serve_argv(runtime)) as talk,
        ):
            client, session = talk.client, talk.sid
            for pid in codex_processes(daemon.pid):
                # Codex's launcher exits by itself once the binary under it dies.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            await daemon_info(runtime, old=info.codexPid)
            for _ in range(2):  # the prompt that may wait for the new Codex, and the next
                with pytest.raises(RpcError) as failure:
                    await client.prompt(session, "@@ say one")
                assert failure.value.code == -32002
                assert session in failure.value.message
                assert "does not survive a restart of Codex" in failure.value.message
            # A new session works on the new Codex.
            other = await client.new_session(str(workspace))
            assert await client.prompt(other, "@@ say two") == Ended({"stopReason": "end_turn"})
