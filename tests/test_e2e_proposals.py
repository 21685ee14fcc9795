"""ACP's quotas and session-list extensions proposals against the real Codex.

Their shapes (not in the published schema yet) are checked against the fragment in
tests/schemas/acp-proposals by every conversation's validation.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError

from .support.e2e import Conversation

pytestmark = pytest.mark.e2e

DECLARING: dict[str, Any] = {"session": {"quota": {}, "listChanged": {}}}
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def quota_updates(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in client.received
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == sid
        and m["params"]["update"]["sessionUpdate"] == "quota_update"
    ]


async def row(client: AcpClient, cwd: Path, sid: str) -> dict[str, Any]:
    listed = await client.request("session/list", {"cwd": str(cwd)})
    (found,) = [s for s in listed["sessions"] if s["sessionId"] == sid]
    assert "_meta" not in found  # the proposal's fields are the row's own
    return dict(found)


def hinted(client: AcpClient, start: int, cwd: Path) -> bool:
    return any(
        m.get("method") == "session/list_changed" and m["params"] == {"cwd": str(cwd)}
        for m in client.received[start:]
    )


@pytest.mark.conversation(capabilities=DECLARING)
async def test_windows_become_quota_pools_and_a_spent_one_refuses_with_its_reset(
    conversation: Conversation, workspace: Path
) -> None:
    """The scripted model sends OpenAI's rate-limit headers, then refuses for usage; on the
    way, the listed session's row says running, then idle, each change hinted."""
    client, sid, init = conversation.client, conversation.sid, conversation.init
    caps = init["agentCapabilities"]
    assert caps["quota"] == {} and caps["sessionCapabilities"]["list"]["changes"] == {}
    assert caps["_meta"] == {"rateLimits": {}}  # the rate-limits extension: every client's

    before = int(time.time())
    answer = await client.prompt(sid, "@@ limits 42 window_minutes=300 resets_in=3600\n@@ say hi")
    assert answer["stopReason"] == "end_turn"
    # The TypeScript adapter's _meta.quota: the tokens the prompt used, by model.
    quota = answer["_meta"]["quota"]
    assert quota["token_count"]["totalTokens"] > 0, quota
    (model,) = quota["model_usage"]
    assert model["token_count"] == quota["token_count"] and model["model"], quota
    (pushed,) = quota_updates(client, sid)
    assert STAMP.fullmatch(pushed["updatedAt"])
    (pool,) = pushed["pools"]
    assert pool["id"] == "codex" and "state" not in pool
    (meter,) = pool["meters"]
    assert meter["id"] == "primary" and meter["usedPercent"] == 42 and meter["window"] == "PT5H"
    resets = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(before + 3600))
    assert resets <= meter["resetsAt"]

    first = await row(client, workspace, sid)  # watches the cwd
    assert first["state"] == "idle" and first["lastTurnEndedAt"] >= first["lastPromptAt"]
    start = len(client.received)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt, sid, "@@ sleep 1500\n@@ say done")
        await client.wait_for_index(start, lambda m: hinted(client, start, workspace))
        assert (await row(client, workspace, sid))["state"] == "running"
    ended = await row(client, workspace, sid)
    assert ended["state"] == "idle" and ended["lastTurnEndedAt"] >= first["lastTurnEndedAt"]
    # Codex reports each response's windows: one without the headers reports none.
    (_, unknown) = quota_updates(client, sid)
    assert unknown["pools"] == [{"id": "codex", "meters": []}]
    assert unknown["updatedAt"] > pushed["updatedAt"]

    # Codex cannot read an API key's windows: the read answers what was pushed, as of then.
    read = await client.request("quota/read", {"sessionId": sid})
    assert read == {"updatedAt": unknown["updatedAt"], "pools": unknown["pools"]}

    with pytest.raises(RpcError) as refused:
        await client.prompt(sid, "@@ usage_limit resets_in=7200")
    assert refused.value.code == -32003
    data = refused.value.data
    assert data["poolId"] == "codex" and data["meterId"] == "primary"
    assert data["codexErrorInfo"] == "usageLimitExceeded"
    spent = quota_updates(client, sid)[-1]
    assert spent["updatedAt"] > unknown["updatedAt"]
    (pool,) = spent["pools"]
    assert pool["state"] == "exhausted"
    assert pool["meters"][0]["status"] == "exceeded"
    assert data["resetsAt"] == pool["meters"][0]["resetsAt"] > meter["resetsAt"]
