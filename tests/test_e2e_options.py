"""Serve options that reach Codex or the logs: -c overrides, --log-file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from bridge.scripted_model import ScriptedModel
from tests.support.e2e import SCENARIO_SECONDS, running_bridge

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
            assert await client.prompt(sid, "@@ say hi") == {"stopReason": "end_turn"}
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
