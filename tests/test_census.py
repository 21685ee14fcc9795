"""The census a long-lived process writes for ``bench/soak.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import trio

from bridge.shell.census import ENV_CENSUS, keep_census, trio_tasks
from tests.support.engine_harness import Harness


async def test_without_the_variable_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_CENSUS, raising=False)
    with trio.fail_after(2):
        await keep_census()  # returns at once
    assert list(tmp_path.iterdir()) == []


async def test_a_census_counts_tasks_and_descriptors_and_what_the_caller_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_CENSUS, str(tmp_path))
    written = tmp_path / f"{os.getpid()}.json"
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            before = trio_tasks()
            for _ in range(3):
                nursery.start_soon(trio.sleep_forever)
            await trio.lowlevel.checkpoint()
            assert trio_tasks() == before + 3
            nursery.start_soon(keep_census, lambda: {"records": 7})
            while not written.exists():  # noqa: ASYNC110 (a file)
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    counts = json.loads(written.read_text())
    assert counts["records"] == 7
    assert counts["tasks"] >= 5 and counts["fds"] > 0


def test_an_engine_counts_its_records_and_open_requests() -> None:
    h = Harness()
    assert h.engine.census()["records"] == 0
    h.client_request("session/new", {"cwd": "/work", "mcpServers": []})
    asked = h.engine.census()
    assert (asked["openClientRequests"], asked["awaitingCodex"]) == (1, 1)
    h.codex_reply(
        h.codex_request("thread/start")["id"],
        {"thread": {"id": "thread-1", "cwd": "/work"}, "model": "mock"},
    )
    opened = h.engine.census()
    assert (opened["records"], opened["sessions"], opened["openClientRequests"]) == (1, 1, 0)


def test_a_long_lived_engine_remembers_a_bounded_number_of_forgotten_threads() -> None:
    from bridge.engine.core.threads import MAX_FORGOTTEN, Threads

    threads = Threads()
    for number in range(MAX_FORGOTTEN + 5):
        record = threads.record(f"t{number}")
        record.own_turns.add(f"turn{number}")
        threads.forget(f"t{number}")
    assert threads.census()["forgotten"] == MAX_FORGOTTEN
    assert threads.census()["forgottenTurns"] == MAX_FORGOTTEN
    # The newest are kept: late traffic of a thread just closed is still no one's.
    assert threads.forgotten(f"t{MAX_FORGOTTEN + 4}") and not threads.forgotten("t0")
