"""The README leads with what a user needs (install, editor setup), its links reach real files
(it is also the package's description on PyPI, so they are absolute), and CI runs its test
command."""

from __future__ import annotations

import re

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
BLOB = "https://github.com/codex-acp-bridge/codex-acp-bridge/blob/main/"


def test_the_first_screen_is_install_then_editor_setup() -> None:
    sections = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    assert sections[:2] == ["Install", "Editor setup"], sections
    install = README.split("## Install", 1)[1].split("## ", 1)[0]
    assert "pipx install codex-acp-bridge" in install and "uvx codex-acp-bridge" in install


def test_every_link_into_the_repository_names_a_file_that_exists() -> None:
    paths = re.findall(re.escape(BLOB) + r"([^)\s#]+)", README)
    assert len(paths) > 10
    missing = [p for p in paths if not (REPO / p).exists()]
    assert missing == [], f"README links to files that do not exist: {missing}"
    relative = re.findall(r"\]\(((?:docs|contrib|fixtures)/[^)]*)\)", README)
    assert relative == [], f"relative links break on PyPI: {relative}"


def test_every_editor_file_of_contrib_is_in_the_setup_table() -> None:
    table = README.split("## Editor setup", 1)[1].split("## ", 1)[0]
    for name in ("zed", "jetbrains", "neovim", "emacs", "acpx", "acp-registry"):
        assert f"contrib/{name}/" in table, name


def test_ci_runs_the_readmes_test_command() -> None:
    assert "scripts/test    # run the whole test suite" in README
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^scripts/test\b", ci, flags=re.MULTILINE)
