"""Bad input on the ACP side, through the real process: clear errors, nothing lost."""

from __future__ import annotations

import subprocess
from pathlib import Path

import msgspec
import pytest
import trio

from bridge.jsonrpc import RpcError
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp, running_bridge

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
            assert no_session.value.code == -32002 and "0000-not-a-session" in no_session.value.message

            with pytest.raises(RpcError) as bad_block:
                await client.request(
                    "session/prompt",
                    {"sessionId": sid, "prompt": [{"type": "audio", "data": "AA", "mimeType": "audio/wav"}]},
                )
            assert bad_block.value.code == -32602 and "prompt[0]" in bad_block.value.message

            # After all of that, the session still answers.
            assert await client.prompt(sid, "@@ words 3") == {"stopReason": "end_turn"}
    assert_valid_acp(client)


async def test_stdout_carries_only_protocol_messages(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path
) -> None:
    """Run the bridge with verbose logging and check every stdout line is JSON-RPC."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}},
    ]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            lambda task_status: trio.run_process(
                [*bridge_argv[:-2], "--log-level", "debug"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=bridge_env, check=False, task_status=task_status,
            )
        )
        out = bytearray()
        err = bytearray()

        async def drain(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
            async for chunk in stream:
                into.extend(chunk)

        nursery.start_soon(drain, process.stdout, out)
        nursery.start_soon(drain, process.stderr, err)
        with trio.fail_after(SCENARIO_SECONDS):
            for line in lines:
                await process.stdin.send_all(msgspec.json.encode(line) + b"\n")
            while out.count(b"\n") < 2:
                await trio.sleep(0.05)
            sid = msgspec.json.decode(out.splitlines()[1])["result"]["sessionId"]
            prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                      "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "@@ reason 3\n@@ words 20"}]}}
            await process.stdin.send_all(msgspec.json.encode(prompt) + b"\n")
            while b'"id":3' not in out:
                await trio.sleep(0.05)
            await process.stdin.aclose()
            await process.wait()
    assert process.returncode == 0
    assert len(err) > 0, "debug logging went to stderr"
    messages = [msgspec.json.decode(line) for line in out.splitlines()]
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    assert messages[-1] == {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}
