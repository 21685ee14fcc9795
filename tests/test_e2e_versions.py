"""Both ends of the tested Codex range, the real binaries: ``serve`` and ``daemon`` use them
without the version warning, and say which Codex they run."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bridge.daemon.runtime import ENV_RUNTIME_DIR
from tests.support.daemon import running_daemon
from tests.support.e2e import SCENARIO_SECONDS, Conversation, words

pytestmark = [pytest.mark.e2e, pytest.mark.codex_versions]

WARNING = "outside the versions this bridge is tested with"


async def test_serve_runs_a_tested_codex_without_a_warning(
    conversation: Conversation, codex_version: str, stderr_file: Path
) -> None:
    assert await conversation.said("@@ words 3") == words(3)
    log = stderr_file.read_text()
    assert WARNING not in log, log
    assert codex_version in ("0.169.0", "0.171.0")


async def test_the_daemon_runs_a_tested_codex_without_a_warning(
    codex_version: str, bridge_env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "daemon.log"
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_daemon(bridge_env, Path(bridge_env[ENV_RUNTIME_DIR]), log) as (
            _process,
            info,
        ):
            assert codex_version in info.codexVersion
    assert WARNING not in log.read_text(), log.read_text()
