"""Bad input on the ACP side, through the real process: clear errors, nothing lost."""

from __future__ import annotations

import subprocess
from pathlib import Path

import msgspec
import pytest
import trio

from bridge.acp.types import NewSessionResult
from bridge.jsonrpc import RpcError
from bridge.shell.streams import LineStream
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp, running_bridge
from tests.support.reading import Ended

pytestmark = pytest.mark.e2e


async def test_bad_requests_get_typed_errors_and_the_session_keeps_working(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path, stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            await client.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":')
            parse_error = await client.wait_for(lambda m: m.get("id") is None and "error" in m)
            assert parse_error["error"]["code"] == -32700

            await client.initialize()
            sid = await client.new_session(str(workspace))

            with pytest.raises(RpcError) as unknown:
                await client.request("session/summon", {"sessionId": sid})
            assert unknown.value.code == -32601

            with pytest.raises(RpcError) as invalid:
                await client.request("session/new", {"cwd": str(workspace)})
            assert invalid.value.code == -32602 and "mcpServers" in invalid.value.message

            with pytest.raises(RpcError) as no_session:
                await client.prompt("0000-not-a-session", "hello")
            assert (
                no_session.value.code == -32002 and "0000-not-a-session" in no_session.value.message
            )

            with pytest.raises(RpcError) as bad_block:
                await client.request(
                    "session/prompt",
                    {
                        "sessionId": sid,
                        "prompt": [{"type": "audio", "data": "AA", "mimeType": "audio/wav"}],
                    },
                )
            assert bad_block.value.code == -32602 and "prompt[0]" in bad_block.value.message

            # After all of that, the session still answers.
            assert await client.prompt(sid, "@@ words 3") == Ended({"stopReason": "end_turn"})
    assert_valid_acp(client)


async def test_stdout_carries_only_protocol_messages(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path
) -> None:
    """Run the bridge with debug logging and check every stdout line is JSON-RPC."""
    process = await trio.lowlevel.open_process(
        [*bridge_argv[:-2], "--log-level", "debug"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=bridge_env,
    )
    assert process.stdin and process.stdout and process.stderr
    out = LineStream(process.stdout, process.stdin)
    err = bytearray()

    async def drain_stderr() -> None:
        async for chunk in process.stderr:  # type: ignore[union-attr]
            err.extend(chunk)

    lines: list[bytes] = []

    async def until_id(rid: int) -> dict[str, object]:
        while True:
            lines.append(await out.receive())
            message = msgspec.json.decode(lines[-1])
            if message.get("id") == rid:
                return message  # type: ignore[no-any-return]

    with trio.fail_after(SCENARIO_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain_stderr)
            await out.send(
                b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
            )
            await until_id(1)
            await out.send(
                msgspec.json.encode(
                    {
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "session/new",
                        "params": {"cwd": str(workspace), "mcpServers": []},
                    }
                )
            )
            opened = await until_id(2)
            sid = msgspec.convert(opened["result"], NewSessionResult).sessionId
            await out.send(
                msgspec.json.encode(
                    {
                        "jsonrpc": "2.0",
                        "id": 3,
                        "method": "session/prompt",
                        "params": {
                            "sessionId": sid,
                            "prompt": [{"type": "text", "text": "@@ reason 3\n@@ words 20"}],
                        },
                    }
                )
            )
            assert await until_id(3) == {
                "jsonrpc": "2.0",
                "id": 3,
                "result": Ended({"stopReason": "end_turn"}),
            }
            await process.stdin.aclose()
            await process.wait()
    assert process.returncode == 0
    assert b"DEBUG" in err, "debug logging went to stderr"
    messages = [msgspec.json.decode(line) for line in lines]
    assert len(messages) > 20
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
