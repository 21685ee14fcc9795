"""Running the real bridge (and through it the real Codex) from a test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec

from bridge.acp_client import AcpClient, open_agent
from bridge.recording import TranscriptChecker

from .acp_schema import ConversationValidator

#: Bound for one end-to-end scenario: a hang fails with this, not a CI timeout.
SCENARIO_SECONDS = 90


@asynccontextmanager
async def running_bridge(
    argv: Sequence[str], env: dict[str, str], log_path: Path, **options: Any
) -> AsyncIterator[AcpClient]:
    """``codex-acp-bridge serve`` as a subprocess, with a client connected to it."""
    with log_path.open("ab") as log:
        async with open_agent(argv, env=env, stderr=log.fileno(), **options) as (client, _process):
            yield client


def assert_valid_acp(client: AcpClient, *, unstable: bool = False, version: int = 1) -> int:
    """Every message the bridge sent validates against the ACP schema of ``version`` and
    keeps the RFD's transcript rules (:mod:`bridge.recording.checker`); returns the count."""
    validator = ConversationValidator(version=version, unstable=unstable)
    checker = TranscriptChecker(subagents=unstable)
    for rid, method in client.sent_requests.items():
        validator.client_sent({"id": rid, "method": method})
        checker.client(
            {"jsonrpc": "2.0", "id": rid, "method": method, "params": client.sent_params[rid]}, 0
        )
    for line, message in enumerate(client.received, start=1):
        validator.agent_sent(message)
        checker.agent(message, line)
    return len(client.received)


def words(n: int) -> str:
    """The text the scripted model streams for ``@@ words n``."""
    from bridge.scripted_model.directives import words_text

    return words_text(n)


def decode_lines(data: bytes) -> list[dict[str, Any]]:
    return [msgspec.json.decode(line) for line in data.splitlines() if line.strip()]
