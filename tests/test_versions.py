"""Reading a Codex's version, and the one warning outside the tested range."""

from __future__ import annotations

import json

import pytest

from bridge.codex import versions
from bridge.codex.methods import CODEX_VERSION
from tests.conftest import REPO


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("codex-cli 0.169.0", (0, 169, 0)),
        ("codex-acp-bridge/0.170.1 (Debian 12.0.0; x86_64) xterm", (0, 170, 1)),
        ("codex-cli 1.2.3-alpha.4", (1, 2, 3)),
        ("no version here", None),
    ],
)
def test_the_first_version_in_the_text_is_read(
    text: str, parsed: tuple[int, int, int] | None
) -> None:
    assert versions.parse(text) == parsed


def test_the_pinned_codex_is_tested_and_the_same_everywhere() -> None:
    assert versions.drift_warning(f"codex-cli {versions.PINNED}") is None
    assert versions.PINNED == CODEX_VERSION
    package = json.loads((REPO / "tools" / "node" / "package.json").read_text())
    assert package["dependencies"]["@openai/codex"] == versions.PINNED


def test_both_ends_of_the_tested_range_are_installed_and_neither_warns() -> None:
    from tests.conftest import CODEX_INSTALLS, OLDEST

    assert versions.tested_range() == "0.169.0 to 0.171.0"
    assert versions.PINNED == "0.171.0" and OLDEST == "0.169.0"
    assert versions.parse(OLDEST) == versions.TESTED_MIN
    assert versions.parse(versions.PINNED) == versions.TESTED_MAX
    for version in (OLDEST, "0.170.0", versions.PINNED):
        assert versions.drift_warning(f"codex-cli {version}") is None, version
    oldest = json.loads((REPO / "tools" / "codex-0.169" / "package.json").read_text())
    assert oldest["dependencies"]["@openai/codex"] == OLDEST
    assert CODEX_INSTALLS[OLDEST].is_relative_to(REPO / "tools" / "codex-0.169")


@pytest.mark.parametrize("found", ["0.168.9", "0.171.1", "1.0.0"])
def test_outside_the_range_one_line_names_both_versions(found: str) -> None:
    warning = versions.drift_warning(f"codex-cli {found}")
    assert warning is not None and "\n" not in warning
    assert found in warning and versions.tested_range() in warning


def test_nothing_is_said_of_a_version_that_cannot_be_read() -> None:
    assert versions.drift_warning("codex (development build)") is None


def test_operations_doc_names_the_tested_version() -> None:
    text = (REPO / "docs" / "operations.md").read_text()
    assert f"tested with Codex **{versions.tested_range()}**" in text
