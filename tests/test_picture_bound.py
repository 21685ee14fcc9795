"""A daemon of weeks: its picture (and the page's rows) hold a bounded number of threads."""

from __future__ import annotations

import pytest

from bridge.codex.types import Thread
from bridge.daemon.page.board import Board
from bridge.daemon.picture import ENV_MAX_THREADS, MAX_THREADS, Picture
from tests.support.picture import thread


def ids(picture: Picture) -> set[str]:
    return {line.threadId for line in picture.lines()}


def test_threads_at_rest_that_changed_least_recently_are_forgotten_first() -> None:
    picture = Picture(limit=3)
    picture.seen(thread("old", updated=1))
    picture.seen(thread("running", "active", updated=0))
    picture.seen(thread("newer", updated=5))
    picture.seen(thread("newest", updated=9))
    # The running thread stays though it is the least recently updated: only threads at
    # rest are forgotten.
    assert ids(picture) == {"running", "newer", "newest"}
    assert picture.take_forgotten() == ["old"]
    assert picture.take_forgotten() == []


def test_a_thread_goes_with_the_threads_under_it_and_a_busy_child_keeps_its_root() -> None:
    picture = Picture(limit=4)
    picture.seen(thread("root", updated=1))
    picture.seen(thread("child", parent="root", updated=2))
    picture.seen(thread("busy-root", updated=1))
    picture.seen(thread("busy-child", "active", parent="busy-root", updated=1))
    picture.seen(thread("new", updated=9))
    assert ids(picture) == {"busy-root", "busy-child", "new"}
    assert sorted(picture.take_forgotten()) == ["child", "root"]


def test_a_thread_codex_deleted_or_archived_is_forgotten_with_its_sub_agents() -> None:
    picture = Picture()
    picture.seen(thread("root", updated=0))
    picture.seen(thread("child", parent="root", updated=0))
    picture.seen(thread("other", updated=0))
    picture.gone("root")
    assert ids(picture) == {"other"}
    assert sorted(picture.take_forgotten()) == ["child", "root"]
    picture.gone("never-seen")  # nothing to do, nothing raised
    assert picture.take_forgotten() == []


def test_ephemeral_threads_are_remembered_up_to_the_limit() -> None:
    picture = Picture(limit=2)
    for number in range(5):
        picture.seen(Thread(id=f"e{number}", cwd="/w", ephemeral=True))
    assert "e4" in picture and "e3" in picture and "e0" not in picture


def test_the_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MAX_THREADS, "7")
    assert Picture().limit == 7
    monkeypatch.setenv(ENV_MAX_THREADS, "many")
    assert Picture().limit == MAX_THREADS
    monkeypatch.delenv(ENV_MAX_THREADS)
    assert Picture().limit == MAX_THREADS


def test_the_page_forgets_the_rows_and_subscriptions_of_forgotten_threads() -> None:
    picture = Picture(limit=2)
    board = Board(picture)
    view = board.opened()
    for thread_id, updated in (("a", 1), ("b", 2)):
        picture.seen(thread(thread_id, updated=updated))
        board.picture_changed()
        board.resumed(thread_id, {"thread": {"id": thread_id}})
        delta = {"threadId": thread_id, "turnId": "u", "itemId": "m", "delta": "hello"}
        board.notification("item/agentMessage/delta", delta, now=1.0)
    assert board.subscriptions() == ([], [])
    picture.seen(thread("c", updated=3))
    board.picture_changed()
    # The watcher leaves the forgotten thread, and the page is told of no row for it.
    resume, leave = board.subscriptions()
    assert leave == ["a"] and "a" not in resume
    rows = board.hello(view, {})["threads"]
    assert {row["threadId"] for row in rows} == {"b", "c"}


def test_rows_of_a_codex_before_this_one_go_once_they_outnumber_the_limit() -> None:
    """Each connection to Codex (a restart) has a picture of its own; the page's rows of
    threads the new Codex does not know again are not kept for ever."""
    board = Board(Picture(limit=2))
    view = board.opened()
    for thread_id in ("a", "b"):
        board.picture.seen(thread(thread_id, updated=0))
        board.picture_changed()
        delta = {"threadId": thread_id, "turnId": "u", "itemId": "m", "delta": "hello"}
        board.notification("item/agentMessage/delta", delta, now=1.0)
    board.picture = Picture(limit=2)  # Codex restarted
    for thread_id in ("c", "d"):
        board.picture.seen(thread(thread_id, updated=0))
        board.picture_changed()
        delta = {"threadId": thread_id, "turnId": "u", "itemId": "m", "delta": "hello"}
        board.notification("item/agentMessage/delta", delta, now=2.0)
    assert board.census()["boardRows"] == 2
    assert {row["threadId"] for row in board.hello(view, {})["threads"]} == {"c", "d"}
