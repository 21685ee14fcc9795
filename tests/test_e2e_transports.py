"""Both ways to reach Codex, and what a user sees when Codex cannot be reached."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests.support.app_server import app_server
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp, running_bridge, words

pytestmark = pytest.mark.e2e


@pytest.fixture
async def ws_app_server(
    codex_bin: str, codex_home: Path, tmp_path: Path
) -> AsyncIterator[tuple[str, Path]]:
    """A real ``codex app-server --listen ws://127.0.0.1:PORT`` with capability-token auth."""
    async with app_server(codex_bin, codex_home, tmp_path) as (url, token_file, _process):
        yield url, token_file


async def test_attach_to_a_running_app_server_over_websocket(
    ws_app_server: tuple[str, Path], workspace: Path, stderr_file: Path
) -> None:
    url, token_file = ws_app_server
    argv = [
        sys.executable,
        "-m",
        "bridge",
        "serve",
        "--codex-url",
        url,
        "--codex-token-file",
        str(token_file),
        "--log-level",
        "info",
    ]
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(argv, dict(os.environ), stderr_file) as client:
            await client.initialize()
            sid = await client.new_session(str(workspace))
            assert await client.prompt(sid, "@@ words 200") == {"stopReason": "end_turn"}
            assert client.text_of(sid) == words(200)
    assert_valid_acp(client)


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
    assert result.returncode == 2
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
    assert result.returncode == 2, err
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
