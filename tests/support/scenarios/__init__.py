"""Fixture scenarios, one module per topic; each module defines ``SCENARIOS``.

A scenario drives the real bridge (``codex-acp-bridge record``) with the
project's ACP client; ``scripts/record-fixtures`` runs them all (see
``tests/support/fixture_scenarios.py``). To add one, add a ``Scenario`` to a
module's ``SCENARIOS`` (or a new module here): it is picked up automatically.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError

#: ``drive(client, workspace)``: everything the client does, from ``initialize`` on.
Drive = Callable[[AcpClient, str], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    drive: Drive
    #: Extra Codex config.toml for this scenario (merged over the scripted-model defaults).
    extra_toml: str = ""
    #: Files to create in the workspace before the scenario runs: relative path → text.
    files: tuple[tuple[str, str], ...] = ()
    #: An earlier connection, through its own bridge on the same Codex home and not
    #: recorded, that leaves what the recorded one needs (a history to load).
    prepare: Drive | None = None
    #: Record ``serve --codex-url`` attached to an app-server of the recording's own
    #: (see :data:`APP_SERVER_ENV`), instead of a Codex the bridge spawns.
    attach: bool = False
    #: Record with the machine ``box``: an sshd of the recording's own on loopback
    #: (``tests/support/sshd.py``), its workspace the machine's folder.
    machine: bool = False
    #: Record (and prepare) with the machines-file entry ``sandbox``: a fresh podman container
    #: of the tests' image for each session (``tests/support/containers.py``).
    sandbox: bool = False


#: For an ``attach`` scenario: JSON ``{codexBin, codexHome, dir, port}`` of its app-server, so
#: the scenario can crash it and start another on the same port.
APP_SERVER_ENV = "FIXTURE_APP_SERVER"


@asynccontextmanager
async def streaming(
    client: AcpClient, session: str, text: str, words: int, *, v2: bool = False
) -> AsyncIterator[None]:
    """``text`` prompted in the background (in ACP ``v2``, its work awaited), the body run
    once ``words`` words of the answer have arrived; left when the prompt has ended."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt_v2 if v2 else client.prompt, session, text)
        await client.wait_for(lambda _m: len(client.text_of(session).split()) >= words)
        yield


async def prompt_outcome(
    client: AcpClient, session: str, text: str, outcome: dict[str, Any]
) -> None:
    """Prompt ``text``; its result goes in ``outcome["result"]``, or the error that answered
    it in ``outcome["error"]`` (a prompt Codex's loss may fail)."""
    try:
        outcome["result"] = await client.prompt(session, text)
    except RpcError as exc:
        outcome["error"] = exc


async def open_session(
    client: AcpClient, workspace: str, capabilities: dict[str, Any] | None = None
) -> str:
    """``initialize`` then ``session/new``; returns the session id."""
    await client.initialize(capabilities)
    return await client.new_session(workspace)
