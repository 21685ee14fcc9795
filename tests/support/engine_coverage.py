"""Coverage of ``bridge/engine`` while tests run, and not while pytest works around them.

A pytest plugin for ``tests/test_coverage.py``'s run of the engine's tests
(``-p tests.support.engine_coverage``), in place of pytest-cov. On Python 3.11 a tracer slows
every line run while it is set, pytest's own included: pytest-cov traced the whole session,
which took the engine's tests from 24 to 44-46 s of CPU here. This plugin traces from its own
import (before any conftest imports the engine, so the engine's modules are imported under
it) to the end of collection, then only each test's setup, call and teardown: every line of
the engine a test or a fixture runs (the same 94.7 %), for 37-42 s. The report is the same
``coverage report`` (pyproject.toml's ``[tool.coverage]``: the source, the floor, the
format), printed after the tests' summary.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import coverage
import pytest

# Started at import, so before the conftest and the test modules import anything.
_coverage = coverage.Coverage()
_coverage.start()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    _coverage.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _traced())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _traced())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    return (yield from _traced())


def _traced() -> Iterator[None]:
    _coverage.start()
    try:
        return (yield)
    finally:
        _coverage.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    _coverage.stop()  # collection may have failed before it was stopped
    _coverage.save()
    report = io.StringIO()
    _coverage.report(file=report)
    terminalreporter.write_sep("-", "coverage of the engine by its tests")
    terminalreporter.write(report.getvalue())
