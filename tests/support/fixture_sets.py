"""The two sets of fixture recordings, and the Codex version each was recorded from.

``fixtures/`` holds what the pinned Codex sends (re-recorded with ``scripts/record-fixtures``);
``fixtures/codex-0.169/`` what the oldest tested Codex sent, kept unchanged, since users run
both and the engine must understand both. A fixture is named by its path relative to
``fixtures/`` without the suffix (``streamed_answer``, ``codex-0.169/streamed_answer``), so
``FIXTURES / f"{name}.codex.jsonl"`` finds it whichever set it is in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.codex.versions import PINNED

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

#: Folder (relative to ``fixtures/``) → the Codex version its recordings come from.
SETS: dict[str, str] = {"": PINNED, "codex-0.169": "0.169.0"}
#: Scenarios of what the oldest Codex cannot do, recorded from the pinned one alone:
#: machines are Codex 0.171's environments (0.169 has no ``environment/add``).
PINNED_ONLY = frozenset({"machine_session", "sandbox_loaded_again"})


def prefixed(names: list[str]) -> list[str]:
    """``names`` (fixtures present in every set) in each set."""
    return [f"{folder}/{name}" if folder else name for folder in SETS for name in names]


def all_names() -> list[str]:
    """Every recording of every set."""
    return [
        (f"{folder}/" if folder else "") + path.name.removesuffix(".codex.jsonl")
        for folder in SETS
        for path in sorted((FIXTURES / folder).glob("*.codex.jsonl"))
    ]


def set_of(name: str) -> str:
    """The set (folder) fixture ``name`` is in."""
    return name.rpartition("/")[0]


def reordering_settings(deadline_ms: int) -> settings:
    """Hypothesis settings of the reordering property tests: few, reproducible examples
    (a replay is slow), each within ``deadline_ms``."""
    return settings(
        max_examples=20,
        deadline=deadline_ms,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def property_over(
    names: list[str], drawn: settings
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A property test run on each fixture of ``names``, on data drawn under ``drawn``."""

    def decorate(test: Callable[..., None]) -> Callable[..., None]:
        return pytest.mark.parametrize("name", names)(drawn(given(data=st.data())(test)))  # type: ignore[no-any-return]

    return decorate
