"""ACP v2 (draft) conversations: the same engine behind the v2 face (bridge/engine/faces/v2.py).

A v2 client needs no ``subagents`` capability; each prompt is answered at insertion and its
work ends with an ``idle`` ``state_update`` (``AcpClient.prompt_v2`` waits for it).
"""

from __future__ import annotations

import contextlib

import trio

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError

from . import Scenario, streaming
from .approvals import ESCALATED, Answers
from .sessions import make_history, only_session
from .subagents import CANCEL_CHILD, SPAWN_THREE, children


async def open_v2_session(client: AcpClient, workspace: str) -> str:
    await client.initialize_v2()
    return await client.new_session(workspace)


async def v2_streamed_answer(client: AcpClient, workspace: str) -> None:
    session = await open_v2_session(client, workspace)
    await client.prompt_v2(session, "@@ words 40")
    await client.prompt_v2(session, "@@ say bye")


async def v2_approval(client: AcpClient, workspace: str) -> None:
    client.on_request = Answers(permission="allow_once")
    session = await open_v2_session(client, workspace)
    await client.prompt_v2(session, ESCALATED)


async def v2_cancel_mid_stream(client: AcpClient, workspace: str) -> None:
    session = await open_v2_session(client, workspace)
    async with streaming(client, session, "@@ words 3000 delay_ms=10", 20, v2=True):
        await client.notify("session/cancel", {"sessionId": session})
    await client.prompt_v2(session, "@@ say again")


async def cancel_offered_call(client: AcpClient, session: str) -> str:
    """Wait for a tool call of ``session`` that offers ``cancel``, then cancel it
    (``tool_call/cancel``); the call's id."""
    offered = await client.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"].get("capabilities") == {"cancel": {}}
        )
    )
    call: str = offered["params"]["update"]["toolCallId"]
    await client.request("tool_call/cancel", {"sessionId": session, "toolCallId": call})
    return call


async def v2_cancel_command(client: AcpClient, workspace: str) -> None:
    session = await open_v2_session(client, workspace)
    script = '@@ call exec_command {"cmd": "sleep 40; echo late"}\n@@ then\n@@ say carried on'
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt_v2, session, script)
        await cancel_offered_call(client, session)


async def v2_subagents(client: AcpClient, workspace: str) -> None:
    session = await open_v2_session(client, workspace)
    await client.prompt_v2(session, SPAWN_THREE)


async def v2_cancel_child(client: AcpClient, workspace: str) -> None:
    session = await open_v2_session(client, workspace)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt_v2, session, CANCEL_CHILD)
        await client.wait_for(
            lambda _m: (
                bool(children(client)) and len(client.text_of(children(client)[0]).split()) >= 10
            )
        )
        await client.notify("session/cancel", {"sessionId": children(client)[0]})


async def v2_resume_replay(client: AcpClient, workspace: str) -> None:
    await client.initialize_v2()
    session = await only_session(client)
    status = await client.request("session/status", {"sessionId": session})
    assert status["status"] == "saved", status
    await client.request(
        "session/resume",
        {"sessionId": session, "cwd": workspace, "replayFrom": {"type": "start"}},
    )
    await client.request("session/status", {"sessionId": session})
    await client.request("session/set_title", {"sessionId": session, "title": "Resumed in v2"})
    await client.prompt_v2(session, "@@ words 3")


async def v2_negotiation(client: AcpClient, workspace: str) -> None:
    with contextlib.suppress(RpcError):  # below every supported version: -32022
        await client.request("initialize", {"protocolVersion": 0})
    with contextlib.suppress(RpcError):  # no uint16: -32602
        await client.request("initialize", {"protocolVersion": "2"})
    await client.initialize_v2()
    session = await client.new_session(workspace)
    with contextlib.suppress(RpcError):  # v1 only: -32601
        await client.request("session/load", {"sessionId": session, "cwd": workspace})
    with contextlib.suppress(RpcError):  # after another request: -32600
        await client.initialize_v2()
    with contextlib.suppress(RpcError):  # nothing advertises cancel: -32602
        await client.request("tool_call/cancel", {"sessionId": session, "toolCallId": "x"})
    await client.prompt_v2(session, "@@ say still v2")


SCENARIOS = [
    Scenario(
        "v2_streamed_answer",
        "ACP v2: two prompts, each answered at insertion, echoed, running then idle end_turn",
        v2_streamed_answer,
    ),
    Scenario(
        "v2_approval",
        "ACP v2: a command needing approval: requires_action while asked, allowed, done",
        v2_approval,
    ),
    Scenario(
        "v2_cancel_mid_stream",
        "ACP v2: session/cancel mid-stream ends the work idle cancelled; the session goes on",
        v2_cancel_mid_stream,
    ),
    Scenario(
        "v2_cancel_command",
        "ACP v2: tool_call/cancel stops one running command; the turn carries on to end_turn",
        v2_cancel_command,
    ),
    Scenario(
        "v2_subagents",
        "ACP v2: three children, no capability asked; each child's state on its own stream too",
        v2_subagents,
    ),
    Scenario(
        "v2_cancel_child",
        "ACP v2: session/cancel on a child stops it alone; the parent's work ends end_turn",
        v2_cancel_child,
    ),
    Scenario(
        "v2_resume_replay",
        "ACP v2: status of a saved session, resume with replayFrom start, then a title and a prompt",
        v2_resume_replay,
        prepare=make_history,
    ),
    Scenario(
        "v2_negotiation",
        "ACP v2: versions refused (-32022, -32602), v1-only and late initialize refused, v2 kept",
        v2_negotiation,
    ),
]
