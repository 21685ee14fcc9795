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
