"""Scenarios of what a client gets by declaring an extension: ACP's quotas and session-list
proposals, and JetBrains AIR's presentation keys (``_meta.jetbrains.air``)."""

from __future__ import annotations

import contextlib
from typing import Any

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError

from ..air import declaring
from . import Scenario

#: A client of both proposals: quota pools pushed and read, rows with their state, hints.
PROPOSALS: dict[str, Any] = {"session": {"quota": {}, "listChanged": {}}}


async def quotas_and_rows(client: AcpClient, workspace: str) -> None:
    await client.initialize(PROPOSALS)
    session = await client.new_session(workspace)
    # Rate-limit headers on the response: a pool with one meter.
    await client.prompt(session, "@@ limits 42 window_minutes=300 resets_in=3600\n@@ say hi")
    await client.request("session/list", {"cwd": workspace})  # the row, idle; watches the cwd
    # A response without the headers reports no window.
    await client.prompt(session, "@@ say again")
    await client.request("session/list", {"cwd": workspace})
    await client.request("quota/read", {"sessionId": session})
    with contextlib.suppress(RpcError):  # -32003 quotaExceeded, the reset in its data
        await client.prompt(session, "@@ usage_limit resets_in=7200")


async def air_presentation(client: AcpClient, workspace: str) -> None:
    await client.initialize(declaring("sessionIndex"))
    session = await client.new_session(workspace)
    # The model marks a progress note and the answer: each chunk carries its phase.
    await client.prompt(
        session, "@@ phase commentary\n@@ say Looking around\n@@ phase final_answer\n@@ say Done"
    )
    await client.request("session/list", {"cwd": workspace})  # AIR's row: its state, times


SCENARIOS = [
    Scenario(
        "quotas_and_rows",
        "ACP's quota and session-list proposals: pools pushed, read and spent; rows with state",
        quotas_and_rows,
    ),
    Scenario(
        "air_presentation",
        "AIR's answer phases on each chunk and its session index rows",
        air_presentation,
    ),
]
