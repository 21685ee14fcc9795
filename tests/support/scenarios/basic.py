"""The foundation's scenarios: answers, reasoning, cancel, failure, bad input."""

from __future__ import annotations

import contextlib

import trio

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError

from . import Scenario, open_session, streaming


async def streamed_answer(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace)
    await client.prompt(session, "@@ words 40")


async def reasoning(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace)
    await client.prompt(session, "@@ reason 8\n@@ words 12")


async def cancel_mid_stream(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace)
    async with streaming(client, session, "@@ words 2000 delay_ms=10", 15):
        await client.notify("session/cancel", {"sessionId": session})
    await client.prompt(session, "@@ words 3")


async def prompt_queued(client: AcpClient, workspace: str) -> None:
    """A prompt sent while the first streams waits for it, then runs; a cancel with one
    more queued answers that one ``cancelled`` at once."""
    session = await open_session(client, workspace)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt, session, "@@ words 200 delay_ms=5")
        await client.wait_for(lambda _m: len(client.text_of(session).split()) >= 10)
        nursery.start_soon(client.prompt, session, "@@ say queued answer")
    before = len(client.text_of(session))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt, session, "@@ words 2000 delay_ms=10")
        await client.wait_for(lambda _m: len(client.text_of(session)) > before + 50)
        nursery.start_soon(client.prompt, session, "@@ say never")
        await trio.sleep(0.2)
        await client.notify("session/cancel", {"sessionId": session})


async def steer_into_turn(client: AcpClient, workspace: str) -> None:
    """``_session/steering`` into a streaming answer (injected: the model answers it in the
    same turn), then on the idle session: ``promptRequired`` when asked, else a new turn."""
    session = await open_session(client, workspace)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt, session, "@@ words 300 delay_ms=5")
        await client.wait_for(lambda _m: len(client.text_of(session).split()) >= 20)
        steer = {"sessionId": session, "prompt": [{"type": "text", "text": "@@ say steered"}]}
        await client.request("_session/steering", steer)
    required = {"steering": {"idleBehavior": "promptRequired"}}
    await client.request(
        "_session/steering",
        {"sessionId": session, "prompt": [{"type": "text", "text": "x"}], "_meta": required},
    )
    steer = {"sessionId": session, "prompt": [{"type": "text", "text": "@@ say new turn"}]}
    await client.request("_session/steering", steer)
    await client.wait_for(lambda _m: client.text_of(session).endswith("new turn"))


async def failed_turn(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace)
    try:
        await client.prompt(session, "@@ words 3\n@@ fail")
    except RpcError:
        pass
    else:
        raise AssertionError("the turn was expected to fail")


async def bad_input(client: AcpClient, workspace: str) -> None:
    await client.send_raw(b'{"jsonrpc":"2.0","id":"x","method":')
    session = await open_session(client, workspace)
    for method, params in [
        ("session/teleport", {}),
        ("session/new", {"cwd": "relative/path", "mcpServers": []}),
        (
            "session/prompt",
            {"sessionId": "no-such-session", "prompt": [{"type": "text", "text": "x"}]},
        ),
        (
            "session/prompt",
            {
                "sessionId": session,
                "prompt": [{"type": "audio", "data": "", "mimeType": "audio/wav"}],
            },
        ),
    ]:
        with contextlib.suppress(RpcError):  # each answers with an error: that is the point
            await client.request(method, params)
    await client.prompt(session, "@@ say still here")


SCENARIOS = [
    Scenario("streamed_answer", "a plain streamed answer of 40 words", streamed_answer),
    Scenario("reasoning", "a reasoning summary streamed before the answer", reasoning),
    Scenario(
        "cancel_mid_stream", "session/cancel mid-stream, then another prompt", cancel_mid_stream
    ),
    Scenario(
        "prompt_queued",
        "prompts sent mid-turn: queued and run in order; a cancel answers the queue cancelled",
        prompt_queued,
    ),
    Scenario(
        "steer_into_turn",
        "_session/steering: injected into a streaming turn, then promptRequired, then a new turn",
        steer_into_turn,
    ),
    Scenario(
        "failed_turn", "the model stream breaks: the turn fails with Codex's message", failed_turn
    ),
    Scenario(
        "bad_input", "malformed JSON, unknown method, invalid params, unknown session", bad_input
    ),
]
