"""End to end: Codex's config profiles, which the bridge layers itself (Codex's app-server
takes none), against the real Codex and the scripted model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge.recording import read_recording, replay
from bridge.scripted_model import ScriptedModel
from bridge.scripted_model.directives import codex_internal_purpose
from tests.support.daemon import ATTACHED, StartDaemon, daemon_refused, serve_argv
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation, running_bridge
from tests.support.reading import Ended

pytestmark = pytest.mark.e2e

#: A model of the scripted model's catalog, other than config.toml's (``mock-model``).
FAST_MODEL = "gpt-6-luna"


def _models(model: ScriptedModel) -> list[str]:
    """The model of each user turn's request (not Codex's own: titles, ...)."""
    return [
        body["model"]
        for body, headers in zip(model.requests, model.request_headers, strict=True)
        if codex_internal_purpose(body, headers) is None
    ]


def _option(opened: dict[str, Any], option_id: str) -> dict[str, Any]:
    return next(o for o in opened["configOptions"] if o["id"] == option_id)


@pytest.fixture
def fast(codex_home: Path) -> Path:
    """The profile ``fast`` of the test's ``CODEX_HOME``: another model."""
    path = codex_home / "fast.config.toml"
    path.write_text(f'model = "{FAST_MODEL}"\n', encoding="utf-8")
    return path


async def test_serve_with_a_profile_starts_sessions_on_it(
    open_conversation: OpenConversation,
    bridge_argv: list[str],
    scripted_model: ScriptedModel,
    fast: Path,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(argv=[*bridge_argv, "--profile", "fast"]) as talk:
            # Codex reports the model the profile sets, for the thread it started.
            assert _option(talk.opened, "model")["currentValue"] == FAST_MODEL
            profile = _option(talk.opened, "profile")
            assert profile["currentValue"] == "fast"
            assert [v["value"] for v in profile["options"]] == ["(none)", "fast"]
            await talk.said("@@ say fine")
    assert _models(scripted_model) == [FAST_MODEL]


@pytest.mark.parametrize("named_by", ["serve", "daemon"])
async def test_through_the_daemon_the_profile_is_layered_by_serve(
    start_daemon: StartDaemon,
    open_conversation: OpenConversation,
    runtime: Path,
    stderr_file: Path,
    scripted_model: ScriptedModel,
    fast: Path,
    named_by: str,
) -> None:
    # The daemon's Codex runs without a profile: each editor's serve sends its own, or,
    # naming none, the one the daemon was given.
    daemon_options = ["--profile", "fast"] if named_by == "daemon" else []
    serve_options = ["--profile", "fast"] if named_by == "serve" else []
    with trio.fail_after(SCENARIO_SECONDS):
        async with (
            start_daemon(*daemon_options) as (_process, info),
            open_conversation(argv=[*serve_argv(runtime), *serve_options]) as talk,
        ):
            assert info.profile == ("fast" if named_by == "daemon" else "")
            assert _option(talk.opened, "model")["currentValue"] == FAST_MODEL
            assert _option(talk.opened, "profile")["currentValue"] == "fast"
            await talk.said("@@ say fine")
    assert ATTACHED in stderr_file.read_text()
    assert _models(scripted_model) == [FAST_MODEL]


async def test_a_profile_picked_decides_the_next_sessions_model_not_this_ones(
    open_conversation: OpenConversation, scripted_model: ScriptedModel, workspace: Path, fast: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client = talk.client
            assert _option(talk.opened, "profile")["currentValue"] == "(none)"
            assert _option(talk.opened, "model")["currentValue"] == "mock-model"
            answer = await client.request(
                "session/set_config_option",
                {"sessionId": talk.sid, "configId": "profile", "value": "fast"},
            )
            assert _option(answer, "profile")["currentValue"] == "fast"
            assert _option(answer, "model")["currentValue"] == "mock-model"
            second = await client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
            assert _option(second, "model")["currentValue"] == FAST_MODEL
            assert await client.prompt(second["sessionId"], "@@ say one") == Ended(
                {"stopReason": "end_turn"}
            )
            await talk.said("@@ say two")
    # The new session ran on the profile's model; the first kept its own.
    assert _models(scripted_model) == [FAST_MODEL, "mock-model"]


async def test_a_missing_profile_stops_serve_and_the_daemon_naming_the_file(
    bridge_env: dict[str, str], codex_home: Path, runtime: Path
) -> None:
    wanted = codex_home / "slow.config.toml"
    with trio.fail_after(SCENARIO_SECONDS):
        served = await trio.run_process(
            [sys.executable, "-m", "bridge", "serve", "--profile", "slow"],
            env=bridge_env,
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert served.returncode == 2
        assert served.stdout == b""
        said = served.stderr.decode().strip().splitlines()
        assert said == [f"codex-acp-bridge: profile 'slow': no file {wanted}"]
        # From the environment too, and for the daemon (exit 1, as its other start errors).
        env = bridge_env | {"CODEX_ACP_BRIDGE_PROFILE": "slow"}
        assert await daemon_refused(env, runtime) == (
            f"codex-acp-bridge daemon: profile 'slow': no file {wanted}"
        )


async def test_doctor_names_the_profile_in_force_and_its_file(
    bridge_env: dict[str, str], fast: Path
) -> None:
    argv = [sys.executable, "-m", "bridge", "doctor", "--json", "--profile", "fast"]
    with trio.fail_after(SCENARIO_SECONDS):
        done = await trio.run_process(argv, env=bridge_env, capture_stdout=True, check=False)
        [check] = [c for c in json.loads(done.stdout)["checks"] if c["name"] == "Profile"]
        assert check == {
            "name": "Profile",
            "status": "ok",
            "detail": f"fast ({fast}; from --profile)",
        }
        argv[-1] = "slow"
        done = await trio.run_process(argv, env=bridge_env, capture_stdout=True, check=False)
    assert done.returncode == 1
    [check] = [c for c in json.loads(done.stdout)["checks"] if c["name"] == "Profile"]
    assert check["status"] == "error"
    assert check["detail"] == f"profile 'slow': no file {fast.parent / 'slow.config.toml'}"


async def test_a_recording_with_profiles_replays_to_what_the_client_received(
    bridge_env: dict[str, str], workspace: Path, stderr_file: Path, tmp_path: Path, fast: Path
) -> None:
    # A secret in a profile (a provider's header) stays out of the recording's header.
    secret = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 2
    (fast.parent / "keyed.config.toml").write_text(
        f'[model_providers.mock.http_headers]\nAuthorization = "Bearer {secret}"\n'
    )
    out = tmp_path / "profiles.codex.jsonl"
    argv = [sys.executable, "-m", "bridge", "record", "--out", str(out), "--profile", "fast"]
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(argv, bridge_env, stderr_file) as client:
            await client.initialize()
            first = await client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
            await client.request(
                "session/set_config_option",
                {"sessionId": first["sessionId"], "configId": "profile", "value": "(none)"},
            )
            second = await client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
            await client.prompt(second["sessionId"], "@@ say fine")
    assert secret.encode() not in out.read_bytes()
    recording = read_recording(out)
    assert recording.header.engine["profile"] == "fast"
    assert set(recording.header.engine["profiles"]) == {"fast", "keyed"}
    assert _option(first, "model")["currentValue"] == FAST_MODEL
    assert _option(second, "model")["currentValue"] == "mock-model"
    replayed = [msgspec.json.decode(line) for line in replay(recording).lines]
    assert replayed == client.received
