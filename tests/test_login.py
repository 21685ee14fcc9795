"""ACP's terminal sign-in: ``codex-acp-bridge --login`` runs Codex's own ``codex login``, and
the sign-in methods each client is offered, with their ACP types."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bridge.shell.login import login_argv, remote
from tests.support.acp_schema import ConversationValidator
from tests.support.engine_harness import Harness

FAKE_CODEX = """#!/bin/sh
echo "$@" > "$(dirname "$0")/args"
exit "${FAKE_CODEX_EXIT:-0}"
"""


@pytest.fixture
def fake_codex(tmp_path: Path) -> Path:
    path = tmp_path / "codex"
    path.write_text(FAKE_CODEX)
    path.chmod(0o755)
    return path


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--login"],  # what a client runs: the usual command (no subcommand) plus --login
        ["serve", "--login"],  # the registry's command (serve) plus --login
        ["login"],
    ],
)
@pytest.mark.parametrize(("code", "ssh"), [(0, True), (1, False)])
def test_login_runs_codex_login_and_exits_with_its_status(
    fake_codex: Path, argv: list[str], code: int, ssh: bool
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSH_")}
    env.update(DISPLAY=":0", FAKE_CODEX_EXIT=str(code))
    if ssh:
        env["SSH_CONNECTION"] = "10.0.0.2 5000 10.0.0.1 22"
    done = _run([*argv, "--codex-bin", str(fake_codex)], env)
    assert done.returncode == code, done.stderr
    args = (fake_codex.parent / "args").read_text().split()
    assert args == (["login", "--device-auth"] if ssh else ["login"])
    assert done.stdout == ""  # a terminal sign-in speaks no ACP
    assert "Signing in to Codex" in done.stderr


@pytest.mark.parametrize("argv", [["login"], ["serve", "--login"]])
def test_login_with_no_codex_says_why_in_one_line(tmp_path: Path, argv: list[str]) -> None:
    missing = tmp_path / "no-codex"
    done = _run([*argv, "--codex-bin", str(missing)], dict(os.environ))
    assert done.returncode == 69, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"codex-acp-bridge: Codex binary {str(missing)!r} (from --codex-bin) does not exist"
    ]


def test_device_auth_and_browser_choose_explicitly() -> None:
    assert login_argv(True, {"DISPLAY": ":0"}) == ["login", "--device-auth"]
    assert login_argv(False, {"SSH_TTY": "/dev/pts/1"}) == ["login"]


@pytest.mark.parametrize(
    ("env", "platform", "expected"),
    [
        ({"SSH_CONNECTION": "a b c d"}, "darwin", True),
        ({}, "linux", True),  # no display
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
        ({}, "darwin", False),
    ],
)
def test_remote_means_no_browser_within_reach(
    env: dict[str, str], platform: str, expected: bool
) -> None:
    assert remote(env, platform) is expected


def test_a_missing_codex_is_a_clear_error(tmp_path: Path) -> None:
    done = _run(["--login", "--codex-bin", str(tmp_path / "nope")], dict(os.environ))
    assert done.returncode != 0 and "nope" in done.stderr


# -- what is offered -------------------------------------------------------------------------


def _methods(h: Harness, params: dict[str, Any], version: int) -> list[dict[str, Any]]:
    rid = h.client_request("initialize", params)
    response = h.client_response(rid)
    assert response is not None
    validator = ConversationValidator(version=version, unstable=True)
    validator.client_sent({"id": rid, "method": "initialize"})
    validator.agent_sent(response)
    return response["result"]["authMethods"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("terminal", [False, True])
def test_v1_methods_carry_their_types_and_terminal_only_when_the_client_can(
    terminal: bool,
) -> None:
    capabilities: dict[str, Any] = {"auth": {"terminal": True}} if terminal else {}
    methods = _methods(
        Harness(), {"protocolVersion": 1, "clientCapabilities": capabilities}, version=1
    )
    by_id = {m["id"]: m for m in methods}
    assert "type" not in by_id["chatgpt"]  # agent, ACP's default
    assert by_id["api-key"]["type"] == "env_var"
    assert [v["name"] for v in by_id["api-key"]["vars"]] == ["OPENAI_API_KEY"]
    if terminal:
        assert by_id["codex-login"]["type"] == "terminal"
        assert by_id["codex-login"]["args"] == ["--login"]
    else:
        assert "codex-login" not in by_id


@pytest.mark.parametrize("terminal", [False, True])
def test_v2_methods_carry_their_types(terminal: bool) -> None:
    capabilities: dict[str, Any] = {"auth": {"terminal": {}}} if terminal else {}
    params = {
        "protocolVersion": 2,
        "info": {"name": "t", "version": "1"},
        "capabilities": capabilities,
    }
    methods = _methods(Harness(), params, version=2)
    types = {m["methodId"]: m["type"] for m in methods}
    expected = {"chatgpt": "agent", "api-key": "env_var"}
    if terminal:
        expected["codex-login"] = "terminal"
    assert types == expected


def test_the_terminal_method_is_never_authenticated_by_the_agent() -> None:
    h = Harness()
    h.client_request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}}
    )
    rid = h.client_request("authenticate", {"methodId": "codex-login"})
    error = h.error(rid)
    assert error.code == -32602 and "--login" in error.message


def test_the_earlier_terminal_auth_meta_is_understood_too() -> None:
    """Zed and the ACP registry's checks declare it as ``_meta["terminal-auth"]``."""
    params = {"protocolVersion": 1, "clientCapabilities": {"_meta": {"terminal-auth": True}}}
    methods = _methods(Harness(), params, version=1)
    assert "codex-login" in {m["id"] for m in methods}
