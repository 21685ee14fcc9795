"""Hostile lines on the ACP side, through the real process: each answered, nothing ends.

A line nested deep enough once ended the bridge with a RecursionError; a
request with a float id was answered under ``id: null``. Here the real bridge,
the real Codex and the scripted model take such lines and then still run a
session and a prompt, with no traceback in the logs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge.acp_client import AcpClient, open_agent
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp
from tests.support.reading import Ended

pytestmark = pytest.mark.e2e

INITIALIZE_PARAMS = {
    "protocolVersion": 1,
    "clientCapabilities": {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
    },
}


@asynccontextmanager
async def running_bridge(
    argv: list[str], env: dict[str, str], log_path: Path
) -> AsyncIterator[tuple[AcpClient, trio.Process]]:
    """As :func:`tests.support.e2e.running_bridge`, with the process, to see it is alive."""
    with log_path.open("ab") as log:
        async with open_agent(argv, env=env, stderr=log.fileno()) as (client, process):
            yield client, process


async def answer_to(client: AcpClient, line: bytes, rid: Any = None) -> dict[str, Any]:
    """Send one raw line; the first response after it that carries ``rid``."""
    seen = len(client.received)
    await client.send_raw(line)

    def fits(message: dict[str, Any]) -> bool:
        return (
            "method" not in message
            and message.get("id") == rid
            and type(message.get("id")) is type(rid)
            and any(message is new for new in client.received[seen:])
        )

    return await client.wait_for(fits)


async def still_works(client: AcpClient, workspace: Path) -> None:
    await client.initialize()
    sid = await client.new_session(str(workspace))
    assert await client.prompt(sid, "@@ words 3") == Ended({"stopReason": "end_turn"})


def assert_no_traceback(stderr_file: Path) -> None:
    log = stderr_file.read_text(errors="replace")
    assert "Traceback" not in log and "RecursionError" not in log, log[-4000:]


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"[" * 1000 + b"]" * 1000, -32600),
        (b"[" * 100_000 + b"]" * 100_000, -32600),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, -32600),
        (b"[" * 100_000, -32700),
    ],
    ids=["arrays-1000", "arrays-100000", "object-100000", "unclosed-100000"],
)
async def test_a_deeply_nested_line_is_answered_and_the_bridge_carries_on(
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    workspace: Path,
    stderr_file: Path,
    line: bytes,
    code: int,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as (client, process):
            answer = await answer_to(client, line)
            assert answer["error"]["code"] == code
            await still_works(client, workspace)
            assert process.poll() is None and not client.closed
    assert_valid_acp(client)
    assert_no_traceback(stderr_file)


async def test_hostile_requests_get_their_answers_and_the_session_keeps_working(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path, stderr_file: Path
) -> None:
    def raw_request(rid: bytes, method: bytes, params: bytes) -> bytes:
        return b'{"jsonrpc":"2.0","id":%s,"method":"%s","params":%s}' % (rid, method, params)

    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as (client, process):
            # A float id is an id: the request is served and answered under it.
            init = msgspec.json.encode(INITIALIZE_PARAMS)
            served = await answer_to(client, raw_request(b"1.5", b"initialize", init), 1.5)
            assert served["result"]["protocolVersion"] == 1
            # The bridge's checks below expect every answered request on record.
            client.sent_requests[1.5] = "initialize"
            client.sent_params[1.5] = INITIALIZE_PARAMS

            # An object, array or bool is no id: -32600, under null.
            for bad_id in (b"{}", b"[1]", b"true"):
                refused = await answer_to(client, raw_request(bad_id, b"initialize", init))
                assert refused["error"]["code"] == -32600

            # Params too deep to decode: refused under the request's own id.
            deep = b"[" * 100_000 + b"]" * 100_000
            refused = await answer_to(client, raw_request(b"2.5", b"session/new", deep), 2.5)
            assert refused["error"]["code"] == -32600
            refused = await answer_to(client, raw_request(b'"deep"', b"initialize", deep), "deep")
            assert refused["error"]["code"] == -32600

            # A huge but shallow string is just a value.
            huge = {**INITIALIZE_PARAMS, "_meta": {"note": "[{" * 2_500_000}}
            line = raw_request(b'"huge"', b"initialize", msgspec.json.encode(huge))
            served = await answer_to(client, line, "huge")
            assert served["result"]["protocolVersion"] == 1
            client.sent_requests["huge"] = "initialize"
            client.sent_params["huge"] = huge

            await still_works(client, workspace)
            assert process.poll() is None and not client.closed
    assert_valid_acp(client)
    assert_no_traceback(stderr_file)
