"""End to end: a config the real Codex (0.171) refuses reaches the user in Codex's own words.

``approval_policy = "untrusted"`` makes Codex exit at start, printing its error and then a
backtrace; the legacy ``profile = "fast"`` key and a config.toml that is not TOML let it start
and refuse every ``thread/start`` instead. Either way the editor's ``session/new`` and
``codex-acp-bridge doctor --json`` say what Codex said, and no backtrace."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import trio

from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.e2e import SCENARIO_SECONDS, running_bridge

pytestmark = pytest.mark.e2e

#: What ``doctor`` may take, Codex's start and its trial thread included.
DOCTOR_SECONDS = 60
#: What a backtrace leaves in a reason: its header, a frame (``6: <unknown>``).
BACKTRACE = re.compile(r"<unknown>|[Ss]tack backtrace|^\s*\d+: ", re.MULTILINE)

#: config.toml's extra lines, text appended after it, and Codex 0.171's words for each.
REFUSED = {
    "untrusted policy": (
        'approval_policy = "untrusted"',
        "",
        'approval_policy = "untrusted" is no longer supported; remove this setting',
    ),
    "legacy profile key": (
        'profile = "fast"',
        "",
        'legacy `profile = "fast"` config is no longer supported; use `--profile fast` with '
        "`fast.config.toml` instead",
    ),
    "not TOML": ("", "\n[model_providers\n", "unclosed table, expected `]`"),
}


async def doctor_json(env: dict[str, str]) -> dict[str, object]:
    with trio.fail_after(DOCTOR_SECONDS):
        done = await trio.run_process(
            [sys.executable, "-m", "bridge", "doctor", "--json"],
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 1, done.stdout.decode() + done.stderr.decode()
    report: dict[str, object] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize("refused", list(REFUSED))
async def test_a_config_codex_refuses_is_told_in_codex_s_words_to_the_editor_and_by_doctor(
    bridge_env: dict[str, str],
    bridge_argv: list[str],
    codex_home: Path,
    scripted_model: ScriptedModel,
    workspace: Path,
    stderr_file: Path,
    refused: str,
) -> None:
    extra, appended, words = REFUSED[refused]
    config = write_codex_home(codex_home, scripted_model.base_url, extra_toml=extra)
    config.write_text(config.read_text() + appended)
    bridge_env.pop("CODEX_API_KEY", None)
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            await client.initialize()
            with pytest.raises(RpcError) as failed:
                await client.new_session(str(workspace))
    said = failed.value.message
    assert words in said, said
    assert not BACKTRACE.search(said), said
    if refused == "not TOML":
        assert str(config) in said  # which file, for the user to fix
    if refused == "untrusted policy":  # Codex exited: the log says why, in the same words
        log = stderr_file.read_text()
        assert f"Codex could not start: Codex app-server exited with status 1: {words}" in log
    assert list(workspace.iterdir()) == []

    report = await doctor_json(bridge_env)
    checks = report["checks"]
    assert isinstance(checks, list)
    failing = [check for check in checks if check["status"] == "error"]
    assert any(words in check["detail"] for check in failing), failing
    for check in failing:
        assert not BACKTRACE.search(check["detail"]), check


async def test_a_daemon_whose_codex_refuses_its_config_ends_in_codex_s_words(
    bridge_env: dict[str, str], codex_home: Path, scripted_model: ScriptedModel, runtime: Path
) -> None:
    """The bridge's daemon restarts a Codex that exits, gives up after a few tries, and
    its last line (what a user or a service manager sees) says why, as Codex said it."""
    extra, _appended, words = REFUSED["untrusted policy"]
    write_codex_home(codex_home, scripted_model.base_url, extra_toml=extra)
    argv = [sys.executable, "-m", "bridge", "daemon", "--runtime-dir", str(runtime)]
    with trio.fail_after(SCENARIO_SECONDS):
        done = await trio.run_process(
            argv, env=bridge_env, capture_stdout=True, capture_stderr=True, check=False
        )
    err = done.stderr.decode()
    assert done.returncode == 1, err
    last = err.splitlines()[-1]
    assert "not restarting it" in last and words in last, err
    assert not BACKTRACE.search(last), last
