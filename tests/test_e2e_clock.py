"""Codex's clock read (``currentTime/read``, experimental in 0.169, gone in 0.171) against the
real Codex: a Codex told to take the time from its client gets it from the bridge."""

from __future__ import annotations

import re
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import trio

from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel
from bridge.scripted_model.codex_home import write_codex_home
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp, running_bridge, words
from tests.support.reading import Ended

# Version-sensitive: run against both ends of the tested Codex range.
pytestmark = [pytest.mark.e2e, pytest.mark.codex_versions]

#: Codex asks its client for the time before each turn (``clock_source = "external"``).
EXTERNAL_CLOCK = """
[features.current_time_reminder]
enabled = true
clock_source = "external"
"""
_REMINDER = re.compile(r"<current_time_reminder>It is (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC\.")


def _codex_version(codex_bin: str) -> tuple[int, ...]:
    out = subprocess.run(
        [codex_bin, "--version"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    assert found, out
    return tuple(int(part) for part in found.groups())


async def test_a_codex_that_takes_the_time_from_its_client_gets_it_from_the_bridge(
    scripted_model: ScriptedModel,
    codex_bin: str,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    workspace: Path,
    stderr_file: Path,
) -> None:
    write_codex_home(
        Path(bridge_env["CODEX_HOME"]), scripted_model.base_url, extra_toml=EXTERNAL_CLOCK
    )
    sends_clock_reads = _codex_version(codex_bin) < (0, 171, 0)
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            await client.initialize()
            if not sends_clock_reads:
                # 0.171 has no external clock any more and refuses the setting, saying so.
                with pytest.raises(RpcError, match="no external current-time provider"):
                    await client.new_session(str(workspace))
                return
            sid = await client.new_session(str(workspace))
            before = int(time.time())
            # Refused, the clock read failed the turn ("failed to read current time").
            assert await client.prompt(sid, "@@ words 3") == Ended({"stopReason": "end_turn"})
            after = int(time.time())
            assert client.text_of(sid) == words(3)
    assert_valid_acp(client)
    # What the model was told is the time the bridge read.
    told = _REMINDER.findall(msgspec.json.encode(scripted_model.requests).decode())
    assert told, "Codex told the model no time"
    seconds = int(datetime.strptime(told[-1], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp())
    assert before - 1 <= seconds <= after
