"""Both ways to reach Codex, and what a user sees when Codex cannot be reached."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
import trio

from bridge.shell.streams import LineStream
from tests.support.app_server import app_server

pytestmark = pytest.mark.e2e


@pytest.fixture
async def ws_app_server(
    codex_bin: str, codex_home: Path, tmp_path: Path
) -> AsyncIterator[tuple[str, Path]]:
    """A real ``codex app-server --listen ws://127.0.0.1:PORT`` with capability-token auth.
    (A conversation through one: the ``websocket`` transport of ``test_e2e_prompt``.)"""
    async with app_server(codex_bin, codex_home, tmp_path) as (url, token_file, _process):
        yield url, token_file


async def test_a_wrong_websocket_token_is_one_clear_error(
    ws_app_server: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = ws_app_server
    bad = tmp_path / "bad-token"
    bad.write_text("not-the-token")
    result = await trio.run_process(
        [sys.executable, "-m", "bridge", "--codex-url", url, "--codex-token-file", str(bad)],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert result.returncode == 69  # Codex unreachable (docs/operations.md)
    assert result.stdout == b""
    err = result.stderr.decode()
    assert "HTTP 401" in err and "--codex-token-file" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("case", ["missing", "not-executable", "crashes"])
async def test_a_missing_or_broken_codex_binary_is_one_clear_error(
    case: str, tmp_path: Path
) -> None:
    binary = tmp_path / "codex"
    if case == "not-executable":
        binary.write_text("#!/bin/sh\n")
    elif case == "crashes":
        binary.write_text("#!/bin/sh\necho 'codex: config is unreadable' >&2\nexit 3\n")
        binary.chmod(0o755)
    request = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    with trio.fail_after(30):
        result = await trio.run_process(
            [sys.executable, "-m", "bridge", "serve", "--codex-bin", str(binary)],
            stdin=request,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    err = result.stderr.decode()
    assert result.returncode == 69, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("codex-acp-bridge: ")]
    assert len(lines) == 1, err
    expected = {
        "missing": "does not exist",
        "not-executable": "not executable",
        "crashes": "exited with status 3: codex: config is unreadable",
    }[case]
    assert expected in lines[0]
    # Whatever reached stdout is protocol, and nothing else.
    for line in result.stdout.splitlines():
        assert line.startswith(b'{"jsonrpc":"2.0"')


@pytest.mark.parametrize("case", ["missing", "exits-at-once"])
async def test_a_codex_that_cannot_start_fails_each_request_with_the_reason_then_the_bridge_exits(
    case: str, tmp_path: Path, workspace: Path
) -> None:
    """Not a dropped connection: ``initialize`` is answered, then each request that needs
    Codex gets an error saying why Codex is not there; the bridge exits 69 once the client
    leaves, with nothing but JSON-RPC on stdout."""
    binary = tmp_path / "codex"
    if case == "exits-at-once":
        gone = tmp_path / "codex-gone"
        binary.write_text(
            f"#!/bin/sh\necho 'codex: config is unreadable' >&2\ntouch {gone}\nexit 2\n"
        )
        binary.chmod(0o755)
    reason = {
        "missing": "does not exist",
        "exits-at-once": "exited with status 2: codex: config is unreadable",
    }[case]
    argv = [sys.executable, "-m", "bridge", "serve", "--no-daemon", "--codex-bin", str(binary)]
    stderr = tmp_path / "stderr.log"
    with trio.fail_after(30), stderr.open("wb") as err:
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
        )
        try:
            assert process.stdin is not None and process.stdout is not None
            stdout = LineStream(process.stdout, process.stdin)

            async def ask(rid: int, method: str, params: dict[str, object]) -> dict[str, object]:
                request = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
                await stdout.send(msgspec.json.encode(request))
                answer: dict[str, object] = msgspec.json.decode(await stdout.receive())
                assert answer["id"] == rid
                return answer

            # Answered whether Codex failed before it or not: it needs nothing from Codex.
            assert "result" in await ask(1, "initialize", {"protocolVersion": 1})
            if case == "exits-at-once":
                # The bridge has seen Codex go (its log says why) before session/new comes.
                while reason not in stderr.read_text():  # noqa: ASYNC110 (a file: poll)
                    await trio.sleep(0.05)
            new = await ask(2, "session/new", {"cwd": str(workspace), "mcpServers": []})
            assert reason in msgspec.json.encode(new["error"]).decode()
            listed = await ask(3, "session/list", {})
            assert reason in msgspec.json.encode(listed["error"]).decode()
            await process.stdin.aclose()
            rest = b""
            async for chunk in process.stdout:
                rest += chunk
            assert await process.wait() == 69
        finally:  # a failing assertion still ends the bridge, and closes its pipes
            if process.poll() is None:
                process.kill()
            await process.wait()
            await process.stdin.aclose()
            await process.stdout.aclose()
    assert rest == b"", "nothing but the answers on stdout"
    [line] = [x for x in stderr.read_text().splitlines() if x.startswith("codex-acp-bridge: ")]
    assert reason in line
