"""The suite on several workers (pytest-xdist, as ``scripts/test`` runs it).

An end-to-end test takes seconds, most of them waiting on Codex, and a property test seconds of
CPU; an engine test takes milliseconds. Each worker runs the long ones first, so they start early
and the short ones fill the gaps at the end instead of one worker finishing a long test alone.
The order is the same on every worker (xdist requires it) and a serial run keeps the files' own
order.
"""

from __future__ import annotations

import os

import pytest

#: The markers of the tests that start processes and wait on them.
LONG = ("e2e", "slow")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    # sort() is stable: within each half the collected order stays.
    items.sort(key=lambda item: not is_long(item))


def is_long(item: pytest.Item) -> bool:
    if any(item.get_closest_marker(marker) for marker in LONG):
        return True
    # Hypothesis marks the tests it runs many times over.
    return bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False))
