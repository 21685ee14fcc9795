"""`codex-acp-bridge record` against the real Codex: what a replay of it shows is what the client saw."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest
import trio

from bridge.codex.versions import PINNED
from bridge.recording import read_recording, replay
from bridge.recording.redact import REDACTED
from tests.support.e2e import SCENARIO_SECONDS, running_bridge

pytestmark = pytest.mark.e2e

FAKE_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2


async def test_a_recording_replays_to_exactly_what_the_client_received_with_secrets_redacted(
    bridge_env: dict[str, str], workspace: Path, stderr_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "session.codex.jsonl"
    argv = [sys.executable, "-m", "bridge", "record", "--out", str(out), "--log-level", "info"]
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(argv, bridge_env, stderr_file) as client:
            await client.initialize()
            sid = await client.new_session(str(workspace))
            await client.prompt(sid, f"@@ reason 3\n@@ words 25\nmy key is {FAKE_KEY}")
            await client.send_raw(b"{oops")
            await client.wait_for(lambda m: m.get("id") is None and "error" in m)
            await client.prompt(sid, "@@ words 2")
    data = out.read_bytes()
    assert FAKE_KEY.encode() not in data, "the API key must not reach the recording"
    assert REDACTED.encode() in data

    recording = read_recording(out)
    assert recording.header.codex == PINNED
    assert recording.header.clientCapabilities == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
    }
    assert "redacted" in recording.header.redaction or "REDACTED" in recording.header.redaction

    replayed = [msgspec.json.decode(line) for line in replay(recording).lines]
    live = [m for m in client.received]
    # The one difference allowed: the key the client typed is redacted in what the replay saw.
    assert len(replayed) == len(live)
    assert replayed == msgspec.json.decode(
        msgspec.json.encode(live).replace(FAKE_KEY.encode(), REDACTED.encode())
    )
