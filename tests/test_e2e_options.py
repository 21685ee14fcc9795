"""Serve options that reach Codex or the logs: -c overrides, --log-file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from bridge.scripted_model import ScriptedModel
from tests.support.e2e import SCENARIO_SECONDS, running_bridge
from tests.support.reading import Ended

pytestmark = pytest.mark.e2e


async def test_config_overrides_reach_codex(
    bridge_env: dict[str, str], workspace: Path, stderr_file: Path, scripted_model: ScriptedModel
) -> None:
    argv = [
        sys.executable,
        "-m",
        "bridge",
        "serve",
        "-c",
        'model="override-model"',
        "-c",
        "model_reasoning_effort=high",
    ]
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(argv, bridge_env, stderr_file) as client:
            await client.initialize()
            sid = await client.new_session(str(workspace))
            assert await client.prompt(sid, "@@ say hi") == Ended({"stopReason": "end_turn"})
    turns = [body for body in scripted_model.requests if body.get("model") == "override-model"]
    assert turns, (
        f"models asked for: {sorted({str(b.get('model')) for b in scripted_model.requests})}"
    )
    assert turns[-1].get("reasoning", {}).get("effort") == "high"


async def test_log_file_gets_the_logs_and_stdout_stays_protocol(
    bridge_env: dict[str, str], workspace: Path, stderr_file: Path, tmp_path: Path
) -> None:
    log_file = tmp_path / "bridge.log"
    argv = [sys.executable, "-m", "bridge", "--log-level", "debug", "--log-file", str(log_file)]
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(argv, bridge_env, stderr_file) as client:
            await client.initialize()
            sid = await client.new_session(str(workspace))
            await client.prompt(sid, "@@ words 3")
    text = log_file.read_text()
    assert "DEBUG" in text and "starting" in text  # the spawn of codex app-server is logged
    assert stderr_file.read_text() == "", "with --log-file, nothing goes to stderr"
    assert all(m.get("jsonrpc") == "2.0" for m in client.received)


#: Codex's stderr as a terminal would colour it (Codex colours it even into a pipe).
COLOURED_STDERR = [
    "\x1b[2m2026-11-30T13:48:19.129882Z\x1b[0m \x1b[32m INFO\x1b[0m "
    "\x1b[2mcodex_app_server\x1b[0m\x1b[2m:\x1b[0m listening on stdio",
    "\x1b[1;31mERROR\x1b[0m \x1b]8;;https://example.com\x1b\\a link\x1b]8;;\x1b\\ ends here",
    "\x1b[31mcodex: config is unreadable\x1b[0m",
]


async def test_codex_stderr_reaches_the_log_file_without_colour_codes(tmp_path: Path) -> None:
    binary = tmp_path / "codex"
    script = "".join(f"printf '%s\\n' '{line}' >&2\n" for line in COLOURED_STDERR)
    binary.write_text(f"#!/bin/sh\n{script}exit 3\n")
    binary.chmod(0o755)
    log_file = tmp_path / "bridge.log"
    argv = [sys.executable, "-m", "bridge", "serve", "--codex-bin", str(binary)]
    argv += ["--log-level", "info", "--log-file", str(log_file)]
    request = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    with trio.fail_after(30):
        result = await trio.run_process(
            argv, stdin=request, capture_stdout=True, capture_stderr=True, check=False
        )
    err = result.stderr.decode()
    assert result.returncode == 69, err  # Codex could not start
    text = log_file.read_text()
    for logged in (
        "2026-11-30T13:48:19.129882Z  INFO codex_app_server: listening on stdio",
        "ERROR a link ends here",
        "codex: config is unreadable",
    ):
        assert f"INFO codex: {logged}\n" in text, text
    assert "\x1b" not in text
    # The reason the bridge gives for stopping, on stderr and in the log, is plain text too.
    assert "exited with status 3: codex: config is unreadable" in err
    assert "\x1b" not in err
