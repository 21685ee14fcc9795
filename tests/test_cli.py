"""The command line: which command runs, the options each takes, how each exits."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

from bridge import cli
from bridge.cli import main


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
    served: list[dict[str, Any]] = []

    def serve_stdio(*_args: Any, **options: Any) -> None:
        served.append(options)

    monkeypatch.setattr(cli, "_serve_stdio", serve_stdio)
    monkeypatch.setattr(cli, "setup_logging", lambda *_: None)
    runtime = str(tmp_path)
    args = ["record", "--out", "x.jsonl", "--no-daemon", "--runtime-dir", runtime]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    [options] = served
    assert options["use_daemon"] is False
    assert options["runtime_dir"] == runtime
    assert options["record_to"] == "x.jsonl"


def test_record_takes_every_option_serve_takes_but_signing_in() -> None:
    def names(command: str, *own: str) -> set[str]:
        params = main.commands[command].params
        return {p.name for p in params if p.name is not None} - {"help", *own}

    assert names("record", "out") == names("serve", "login", "device_auth")
