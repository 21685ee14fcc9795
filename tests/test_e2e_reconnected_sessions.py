"""Sessions after the bridge's connection to Codex dropped while Codex lives on, against the real Codex.

The bridge is attached (``--codex-url``) through a relay the test cuts: Codex keeps every thread,
the bridge reconnects to it and resumes each session. A session never prompted is not stored by
Codex ("no rollout found" to a resume on the new connection) yet Codex holds it: the bridge
resumes it all the same, and a prompt on it, even one sent while the bridge reconnects, is
answered. Whatever Codex says, a prompt is never left without an answer.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import pytest
import trio

from bridge.acp_client import open_agent
from tests.support.app_server import app_server
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp
from tests.support.reading import Ended

pytestmark = pytest.mark.e2e


class Relay:
    """A TCP relay to ``port`` on loopback whose connections :meth:`cut` closes at once."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.connections = 0
        self._scopes: list[trio.CancelScope] = []

    async def _handle(self, inbound: trio.SocketStream) -> None:
        self.connections += 1
        with trio.CancelScope() as scope:
            self._scopes.append(scope)
            async with inbound, await trio.open_tcp_stream("127.0.0.1", self.target) as outbound:

                async def pipe(source: trio.SocketStream, sink: trio.SocketStream) -> None:
                    async for chunk in source:
                        await sink.send_all(chunk)
                    scope.cancel()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(pipe, inbound, outbound)
                    nursery.start_soon(pipe, outbound, inbound)

    def cut(self) -> None:
        for scope in self._scopes:
            scope.cancel()
        self._scopes.clear()


@asynccontextmanager
async def relay(target: int) -> AsyncIterator[Relay]:
    relaying = Relay(target)
    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(
            partial(trio.serve_tcp, relaying._handle, 0, host="127.0.0.1")
        )
        relaying.port = listener.socket.getsockname()[1]
        yield relaying
        nursery.cancel_scope.cancel()


async def test_a_session_never_prompted_answers_its_prompts_after_the_connection_to_codex_dropped(
    codex_bin: str, codex_home: Path, workspace: Path, stderr_file: Path, tmp_path: Path
) -> None:
    async with app_server(codex_bin, codex_home, tmp_path) as (url, token, _server):
        port = int(url.rsplit(":", 1)[1])
        async with relay(port) as cutter:
            argv = [sys.executable, "-m", "bridge", "serve", "--log-level", "info"]
            argv += ["--codex-url", f"ws://127.0.0.1:{cutter.port}"]
            argv += ["--codex-token-file", str(token)]
            with trio.fail_after(SCENARIO_SECONDS), stderr_file.open("ab") as log:
                async with open_agent(argv, env=dict(os.environ), stderr=log.fileno()) as (
                    client,
                    process,
                ):
                    await client.initialize()
                    fresh = await client.new_session(str(workspace))
                    later = await client.new_session(str(workspace))
                    cutter.cut()
                    while cutter.connections < 2:  # noqa: ASYNC110 (the relay says nothing)
                        await trio.sleep(0.01)
                    # Sent as the bridge reconnects: it waits for the connection, then is answered.
                    assert await client.prompt(fresh, "@@ say one") == Ended(
                        {"stopReason": "end_turn"}
                    )
                    assert client.text_of(fresh) == "one"
                    assert await client.prompt(later, "@@ say two") == Ended(
                        {"stopReason": "end_turn"}
                    )
                    assert client.text_of(later) == "two"
                    assert process.poll() is None
    assert "Traceback" not in stderr_file.read_text()
    assert_valid_acp(client)
