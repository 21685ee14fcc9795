"""End to end: the client's ``$/cancel_request`` for its load (v1) or resume (v2) and its
list, with the real Codex, plain and through the daemon: answered -32800 at once, and the
session opens as before when asked again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError
from tests.support.e2e import OpenConversation, returning_client

pytestmark = pytest.mark.e2e


async def cancelled(client: AcpClient, method: str, params: Any) -> RpcError:
    """Send ``method`` and cancel it at once (before Codex can have answered what it asks):
    the error it is answered with."""
    with pytest.raises(RpcError) as failure:
        await client.request_and_cancel(method, params)
    return failure.value


@pytest.mark.acp_versions(1, 2)
@pytest.mark.transports("stdio", "daemon")
async def test_a_cancelled_open_and_list_are_answered_cancelled_and_the_session_opens_after(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    async with returning_client(open_conversation, "@@ say remembered") as (sid, talk):
        client = talk.client
        method = "session/load" if talk.version == 1 else "session/resume"
        params: dict[str, Any] = {"sessionId": sid, "cwd": str(workspace)}
        if talk.version == 1:
            params["mcpServers"] = []
        else:
            params["replayFrom"] = {"type": "start"}
        assert (await cancelled(client, method, params)).code == -32800
        assert (await cancelled(client, "session/list", {})).code == -32800
        assert [u for u in client.updates if u["sessionId"] == sid] == []
        # Asked again, the session opens with its history, and the list lists it.
        await client.request(method, params)
        assert "remembered" in client.text_of(sid)
        listed = await client.request("session/list", {})
        assert sid in [s["sessionId"] for s in listed["sessions"]]
