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


# -- records of threads no session here shows: gone when Codex forgets the thread ------------


def _another_clients_thread(h: Harness, thread_id: str) -> None:
    """Codex tells every connection each thread's status: another client's thread is read
    once (is it a sub-agent of a session here?) and kept as no one's here."""
    h.codex_notify("thread/status/changed", {"threadId": thread_id, "status": {"type": "active"}})
    read = h.codex_request("thread/read")
    assert read["params"]["threadId"] == thread_id
    h.codex_reply(read["id"], {"thread": {"id": thread_id, "cwd": "/elsewhere", "turns": []}})
    assert h.engine.hub.threads.get(thread_id) is not None


def _reads(h: Harness) -> int:
    return sum(1 for m in h.to_codex if m.get("method") == "thread/read")


@pytest.mark.parametrize("method", ["thread/closed", "thread/deleted", "thread/archived"])
def test_another_clients_thread_is_forgotten_when_codex_forgets_it(method: str) -> None:
    h = Harness()
    h.new_session("mine")
    _another_clients_thread(h, "theirs")
    assert h.engine.census()["records"] == 2
    h.codex_notify(method, {"threadId": "theirs"})
    assert h.engine.census()["records"] == 1
    assert h.engine.hub.threads.get("theirs") is None
    # A thread gone that this bridge never saw makes no record, and is not read.
    reads = _reads(h)
    h.codex_notify(method, {"threadId": "never-seen"})
    assert h.engine.census()["records"] == 1 and _reads(h) == reads
    # The session's own record stays: closing it is the client's word; unless Codex deleted
    # its thread, which nothing can prompt or reopen any more, or archived it (Codex unloads
    # it, and ACP has archiving close the session).
    h.codex_notify(method, {"threadId": "mine"})
    kept = h.engine.hub.threads.session("mine") is not None
    assert kept == (method == "thread/closed")


def test_another_clients_thread_is_forgotten_when_codex_unloads_it() -> None:
    h = Harness()
    h.new_session("mine")
    _another_clients_thread(h, "theirs")
    reads = _reads(h)
    unloaded = {"type": "notLoaded"}
    h.codex_notify("thread/status/changed", {"threadId": "theirs", "status": unloaded})
    h.codex_notify("thread/status/changed", {"threadId": "never-seen", "status": unloaded})
    assert h.engine.census()["records"] == 1 and _reads(h) == reads


def test_threads_no_session_shows_are_forgotten_with_the_codex_that_had_them() -> None:
    """A Codex killed forgets every thread it had loaded: the records the bridge kept only
    to leave another client's traffic alone go with it (traffic of a later Codex is read
    afresh); the sessions stay, to be resumed."""
    h = Harness()
    h.new_session("mine")
    for number in range(3):
        _another_clients_thread(h, f"theirs-{number}")
    # One still being read when Codex goes (its read fails with it).
    h.codex_notify("thread/status/changed", {"threadId": "unread", "status": {"type": "active"}})
    assert h.engine.census()["records"] == 5
    h._collect(h.engine.codex_lost("exited", retrying=True))
    assert h.engine.census()["records"] == 1
    assert h.engine.hub.threads.session("mine") is not None


def test_a_long_lived_engine_remembers_a_bounded_number_of_other_clients_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Codex that keeps every thread loaded (it unloads none while it lives) tells each
    one's status: the oldest of those remembered as another client's are dropped."""
    from bridge.engine.features.subagents import _placement as subagent_placement

    monkeypatch.setattr(subagent_placement, "MAX_OTHERS", 5, raising=False)
    h = Harness()
    h.new_session("mine")
    for number in range(12):
        _another_clients_thread(h, f"theirs-{number}")
    assert h.engine.census()["records"] == 1 + 5
    assert h.engine.hub.threads.get("theirs-11") is not None
    assert h.engine.hub.threads.get("theirs-0") is None


def test_a_sub_agent_closed_while_its_parentage_is_read_is_still_placed() -> None:
    """Codex may close a short sub-agent before the bridge has read whose it is: its
    record stays until the read says, and the child is placed under its session."""
    h = Harness()
    h.new_session("mine")
    h.codex_notify("thread/status/changed", {"threadId": "child", "status": {"type": "active"}})
    read = h.codex_request("thread/read")
    h.codex_notify("thread/closed", {"threadId": "child"})
    child = {"id": "child", "cwd": "/work", "parentThreadId": "mine", "turns": []}
    h.codex_reply(read["id"], {"thread": child})
    placed = h.engine.hub.threads.session("child")
    assert placed is not None and placed.parent_id == "mine"


def test_another_clients_thread_at_rest_is_not_kept() -> None:
    """Codex keeps a thread loaded long after its clients left (it unloads none after its
    last unsubscribe): another client's thread is dropped when it goes idle, and read
    again (once) when it works again."""
    h = Harness()
    h.new_session("mine")
    _another_clients_thread(h, "theirs")
    idle = {"threadId": "theirs", "status": {"type": "idle"}}
    h.codex_notify("thread/status/changed", idle)
    assert h.engine.census()["records"] == 1
    reads = _reads(h)
    _another_clients_thread(h, "theirs")  # its next turn
    assert _reads(h) == reads + 1
    h.codex_notify(
        "item/agentMessage/delta",
        {"threadId": "theirs", "turnId": "t", "itemId": "i", "delta": "x"},
    )
    assert _reads(h) == reads + 1, "its traffic is dropped as it comes, not read again"
    h.codex_notify("thread/status/changed", idle)
    assert h.engine.census()["records"] == 1


def test_another_clients_thread_that_rests_while_it_is_read_is_not_kept() -> None:
    """A short turn of another client's: its thread goes idle before its read comes back."""
    h = Harness()
    h.new_session("mine")
    h.codex_notify("thread/status/changed", {"threadId": "theirs", "status": {"type": "active"}})
    read = h.codex_request("thread/read")
    h.codex_notify("thread/status/changed", {"threadId": "theirs", "status": {"type": "idle"}})
    h.codex_reply(read["id"], {"thread": {"id": "theirs", "cwd": "/elsewhere", "turns": []}})
    assert h.engine.census()["records"] == 1


def test_another_clients_root_read_only_to_place_its_sub_agent_is_not_kept() -> None:
    """Another client's sub-agent works while its root is at rest (its root's idle status
    came and went before): the root is read only to learn that the chain is not ours. Its
    record must not stay: no idle status of the root is coming to drop it."""
    h = Harness()
    h.new_session("mine")
    h.codex_notify("thread/status/changed", {"threadId": "child", "status": {"type": "active"}})
    read = h.codex_request("thread/read")
    child = {"id": "child", "cwd": "/elsewhere", "parentThreadId": "their-root", "turns": []}
    h.codex_reply(read["id"], {"thread": child})
    read = h.codex_request("thread/read")
    assert read["params"]["threadId"] == "their-root"
    h.codex_reply(read["id"], {"thread": {"id": "their-root", "cwd": "/elsewhere", "turns": []}})
    assert h.engine.hub.threads.get("their-root") is None
    # The child works on: its traffic is dropped as it comes, until it rests.
    reads = _reads(h)
    h.codex_notify("thread/status/changed", {"threadId": "child", "status": {"type": "active"}})
    assert _reads(h) == reads
    h.codex_notify("thread/status/changed", {"threadId": "child", "status": {"type": "idle"}})
    assert h.engine.census()["records"] == 1


async def test_with_the_heap_asked_for_the_census_says_where_it_grew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracemalloc

    from bridge.shell import census

    monkeypatch.setenv(ENV_CENSUS, str(tmp_path))
    monkeypatch.setenv(census.ENV_CENSUS_HEAP, "1")
    monkeypatch.setattr(census, "HEAP_SECONDS", 0.05)
    monkeypatch.setattr(census, "INTERVAL_SECONDS", 0.01)
    written = tmp_path / f"{os.getpid()}.json"
    kept: list[bytes] = []
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(keep_census)
                while "heapGrowth" not in json.loads(
                    written.read_text() if written.exists() else "{}"
                ):
                    kept.append(bytes(10_000))  # a "leak" between two looks
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()
    finally:
        tracemalloc.stop()
    sites = json.loads(written.read_text())["heapGrowth"]
    assert any("test_census.py" in site and size > 0 for site, size, _blocks in sites)
