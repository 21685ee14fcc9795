"""Which Codex versions this bridge is tested with, and how to read a Codex's version.

The bridge is proven against one pinned Codex (``tools/node``, the recordings in
``fixtures/``). Users update Codex often, so a Codex outside the tested range is
the normal case: it is used, with one warning naming both versions
(``serve``, ``daemon``), and ``doctor`` says so. What degrades when an
experimental method is missing is listed in docs/operations.md.
"""

from __future__ import annotations

import re

#: The oldest and newest Codex versions the test suite has run against.
TESTED_MIN = (0, 169, 0)
TESTED_MAX = (0, 171, 0)
#: The pinned Codex (``tools/node/package.json``), the one the fixtures come from.
PINNED = "0.171.0"

# Compiled at first use (the re module caches it), not at import.
_VERSION = r"(\d+)\.(\d+)\.(\d+)"


def parse(text: str) -> tuple[int, int, int] | None:
    """The first ``X.Y.Z`` in ``text`` (``codex-cli 0.169.0``, a ``userAgent``), if any."""
    match = re.search(_VERSION, text)
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def tested_range() -> str:
    low, high = ".".join(map(str, TESTED_MIN)), ".".join(map(str, TESTED_MAX))
    return low if low == high else f"{low} to {high}"


def is_tested(version: tuple[int, int, int]) -> bool:
    return TESTED_MIN <= version <= TESTED_MAX


def drift_warning(text: str) -> str | None:
    """One line saying ``text``'s Codex is outside the tested range, or ``None`` when it is
    inside (or carries no version to judge)."""
    version = parse(text)
    if version is None or is_tested(version):
        return None
    found = ".".join(map(str, version))
    return (
        f"Codex {found} is outside the versions this bridge is tested with ({tested_range()}); "
        "it is used anyway, and experimental methods it lacks degrade as docs/operations.md says"
    )
