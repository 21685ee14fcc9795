"""One session in two windows: the recorded bridge and another ``serve`` on one app-server.

The recording attaches to an app-server of its own (``attach``); the scenario opens a second
window on it (``serve --codex-url``, not recorded) that loads the recorded window's session. Codex
sends each of them every event of the thread, whoever started the turn: the recording holds
what the recorded window saw of the other's turns.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from bridge.acp_client import AcpClient, open_agent
from tests.support.reading import Ended

from . import APP_SERVER_ENV, Scenario, open_session

#: A turn long enough to be cancelled while it streams.
LONG = "@@ words 400 delay_ms=40"


@asynccontextmanager
async def other_window(workspace: str, session: str) -> AsyncIterator[AcpClient]:
    """A second window (``serve`` attached to the recording's app-server) with ``session``
    loaded."""
    server = json.loads(os.environ[APP_SERVER_ENV])
    directory = Path(server["dir"])
    argv = [sys.executable, "-m", "bridge", "serve", "--log-level", "info"]
    argv += ["--codex-url", f"ws://127.0.0.1:{server['port']}"]
    argv += ["--codex-token-file", str(directory / "token")]
    env = {**os.environ, "CODEX_HOME": server["codexHome"]}
    with (directory / "other-window.log").open("ab") as log:
        async with open_agent(argv, env=env, stderr=log.fileno()) as (other, _process):
            await other.initialize()
            await other.request(
                "session/load", {"sessionId": session, "cwd": workspace, "mcpServers": []}
            )
            yield other


def _has(client: AcpClient, session: str, text: str) -> bool:
    return text in client.text_of(session)


async def mirrored_turn(client: AcpClient, workspace: str) -> None:
    """The other window prompts: the recorded one shows its prompt as the user's message, then
    the answer. Then the recorded window prompts, and the other sees it."""
    session = await open_session(client, workspace)
    assert await client.prompt(session, "@@ say hello") == Ended({"stopReason": "end_turn"})
    async with other_window(workspace, session) as other:
        assert await other.prompt(session, "@@ words 5") == Ended({"stopReason": "end_turn"})
        await client.wait_for(lambda _m: _has(client, session, "word5"))
        # Sent here once the other's turn ended (else it waits for that turn's end).
        assert await client.prompt(session, "@@ say mine") == Ended({"stopReason": "end_turn"})
        await other.wait_for(lambda _m: _has(other, session, "mine"))


async def cancelled_by_the_other_window(client: AcpClient, workspace: str) -> None:
    """The recorded window's turn, cancelled from the other window: its prompt ends
    ``cancelled``."""
    session = await open_session(client, workspace)
    assert await client.prompt(session, "@@ say hello") == Ended({"stopReason": "end_turn"})
    async with other_window(workspace, session) as other:
        result = {}

        async def prompt() -> None:
            result["stop"] = await client.prompt(session, LONG)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            await other.wait_for(lambda _m: _has(other, session, "word3"))
            await other.notify("session/cancel", {"sessionId": session})
        assert result == {"stop": Ended({"stopReason": "cancelled"})}
    assert await client.prompt(session, "@@ say again") == Ended({"stopReason": "end_turn"})


async def cancelling_the_other_windows_turn(client: AcpClient, workspace: str) -> None:
    """The other window's turn, cancelled from the recorded window, whose own prompt waited
    behind that turn: both prompts end ``cancelled``."""
    session = await open_session(client, workspace)
    assert await client.prompt(session, "@@ say hello") == Ended({"stopReason": "end_turn"})
    async with other_window(workspace, session) as other:
        result = {}

        async def prompt(name: str, window: AcpClient, text: str) -> None:
            result[name] = await window.prompt(session, text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt, "other", other, LONG)
            await client.wait_for(lambda _m: _has(client, session, "word3"))
            nursery.start_soon(prompt, "recorded", client, "@@ say queued")
            await client.wait_for(lambda _m: _has(client, session, "word5"))
            await client.notify("session/cancel", {"sessionId": session})
        cancelled = Ended({"stopReason": "cancelled"})
        assert result == {"other": cancelled, "recorded": cancelled}
        assert await client.prompt(session, "@@ say again") == Ended({"stopReason": "end_turn"})


SCENARIOS = [
    Scenario(
        "windows_mirrored_turn",
        "two windows on one session: the other window's turn shows its prompt then streams "
        "here; this window's turn streams there",
        mirrored_turn,
        attach=True,
    ),
    Scenario(
        "windows_cancelled_by_the_other",
        "two windows on one session: this window's turn, cancelled from the other, ends cancelled",
        cancelled_by_the_other_window,
        attach=True,
    ),
    Scenario(
        "windows_cancel_the_others_turn",
        "two windows on one session: this window cancels the other's turn; its own prompt "
        "queued behind it ends cancelled too",
        cancelling_the_other_windows_turn,
        attach=True,
    ),
]
