"""The command line: which command runs, the options each takes, how each exits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from bridge import cli
from bridge import serve as serve_module
from bridge.cli import main
from bridge.codex_choice import ServeOptions


def test_a_misspelt_command_is_an_error_that_names_the_command_meant() -> None:
    result = CliRunner().invoke(main, ["stauts"])
    assert result.exit_code == 2
    assert "No such command 'stauts'. Did you mean 'status'?" in result.output


@pytest.mark.parametrize(
    ("args", "runs"),
    [
        ([], "serve"),
        (["--no-daemon"], "serve"),
        (["--log-level", "debug", "--codex-bin", "codex"], "serve"),
        (["serve", "--no-daemon"], "serve"),
        (["record", "--out", "x.jsonl"], "record"),
    ],
)
def test_options_alone_are_serves_what_an_editor_runs(
    args: list[str], runs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []

    def serve_stdio(*_args: Any, **_options: Any) -> None:
        ran.append(click.get_current_context().info_name or "")

    monkeypatch.setattr(cli, "_serve_stdio", serve_stdio)
    monkeypatch.setattr(cli, "setup_logging", lambda *_: None)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert ran == [runs]


def test_record_serves_with_the_codex_serve_would_choose(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """``record`` runs a serve: the options that choose its Codex (a daemon's or its own)
    are serve's, and reach the serve it runs."""
    served: list[tuple[ServeOptions, str | None]] = []

    def serve_stdio(options: ServeOptions, record_to: str | None = None) -> int:
        served.append((options, record_to))
        return 0

    monkeypatch.setattr(serve_module, "serve_stdio", serve_stdio)
    monkeypatch.setattr(cli, "setup_logging", lambda *_: None)
    monkeypatch.setattr(cli, "gather_machines", lambda *_: ([], []))
    runtime = str(tmp_path)
    args = ["record", "--out", "x.jsonl", "--no-daemon", "--runtime-dir", runtime]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    [(options, record_to)] = served
    assert options.use_daemon is False
    assert options.runtime_dir == runtime
    assert record_to == "x.jsonl"


def test_record_takes_every_option_serve_takes_but_signing_in() -> None:
    def names(command: str, *own: str) -> set[str]:
        params = main.commands[command].params
        return {p.name for p in params if p.name is not None} - {"help", *own}

    assert names("record", "out") == names("serve", "login", "device_auth")


@pytest.mark.parametrize(
    "codex",
    [["--codex-bin", "{tmp}/no-such-codex"], ["--codex-url", "ws://127.0.0.1:9"]],
    ids=["binary", "url"],
)
@pytest.mark.parametrize("command", [["serve", "--no-daemon"], ["record", "--out", "{tmp}/r"]])
def test_a_codex_that_cannot_be_reached_is_its_own_exit_status(
    command: list[str], codex: list[str], tmp_path: Path
) -> None:
    """Not 2, which is click's for a command line it cannot use: a service (or a script)
    that runs the bridge tells "fix the command" from "Codex is not there"."""
    args = [a.format(tmp=tmp_path) for a in [*command, *codex]]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CODEX_HOME": str(tmp_path)}
    env |= {"XDG_CONFIG_HOME": str(tmp_path), "CODEX_ACP_BRIDGE_RUNTIME_DIR": str(tmp_path / "run")}
    done = subprocess.run(
        [sys.executable, "-m", "bridge", *args],
        input=b"",
        capture_output=True,
        env=env | {"PYTHONPATH": ":".join(sys.path)},
        check=False,
        timeout=60,
    )
    err = done.stderr.decode()
    assert done.returncode == 69, err  # sysexits.h's EX_UNAVAILABLE
    assert done.stdout == b"" and "Traceback" not in err
    said = [line for line in err.splitlines() if line.startswith("codex-acp-bridge: ")]
    assert len(said) == 1, err
