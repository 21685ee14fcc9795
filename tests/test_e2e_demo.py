"""The README's main job: `codex-acp-bridge demo`, offline, end to end."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import trio

from bridge.shell.codex_transport import ENV_CODEX_BIN

pytestmark = pytest.mark.e2e


async def test_demo_prints_the_conversation_and_ends_the_turn(codex_bin: str) -> None:
    env = {**os.environ, ENV_CODEX_BIN: codex_bin, "NO_COLOR": "1"}
    env.pop("OPENAI_API_KEY", None)
    with trio.fail_after(120):
        result = await trio.run_process(
            [sys.executable, "-m", "bridge", "demo"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    assert "you: What are you, and how did this message reach me?" in out
    assert "thinking: The user asks what I am." in out
    assert "codex: Hello from Codex, speaking the Agent Client Protocol" in out
    assert "[stop reason: end_turn" in out
    assert "\x1b[" not in out  # no colour codes when not a terminal


async def test_demo_with_a_failing_prompt_says_why_and_fails(codex_bin: str) -> None:
    env = {**os.environ, ENV_CODEX_BIN: codex_bin}
    with trio.fail_after(120):
        result = await trio.run_process(
            [sys.executable, "-m", "bridge", "demo", "--prompt", "@@ words 2\n@@ fail"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 1
    assert "[error -32603: stream disconnected" in result.stdout.decode()
