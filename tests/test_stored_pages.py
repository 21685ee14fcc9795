"""The stored work read in pages (``Hub.paged_store``): ``session/list`` from Codex's index, a
loaded history by ``thread/turns/list`` pages replayed as each arrives, with the same updates
as the whole-history read."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.codex.threads import NO_TURNS, NO_TURNS_CODE
from bridge.engine.features.sessions._listing import LIST_PAGE
from bridge.engine.features.subagents._history_pages import ITEM_PAGE, TURN_PAGE
from bridge.recording import read_recording
from bridge.recording.format import MessageRecord
from tests.support.fixture_sets import FIXTURES
from tests.test_lifecycle import (
    ANSWER_ITEM,
    COMMAND_ITEM,
    CWD,
    REASONING_ITEM,
    THREAD,
    USAGE,
    USER_ITEM,
    Recorder,
    answer,
    codex_methods,
    own,
    replayed,
    resume_result,
    stored_thread,
    validate_all,
)
from tests.test_load_replay import command, spawn_item, user_message
from tests.test_subagents import CAPABILITIES, CHILD, GRANDCHILD, ROOT, collab, stored

#: A second sub-agent of the root, spawned on a later page.
OTHER = "thread-other"

# -- session/list ------------------------------------------------------------------------


def list_page(h: Recorder, params: dict[str, Any], next_cursor: str | None) -> dict[str, Any]:
    rid = h.client_request("session/list", params)
    request = h.codex_request("thread/list")
    h.codex_reply(request["id"], {"data": [], "nextCursor": next_cursor})
    assert h.result(rid) == (
        {"sessions": [], "nextCursor": next_cursor} if next_cursor else {"sessions": []}
    )
    return request["params"]  # type: ignore[no-any-return]


INDEXED = {"sortKey": "updated_at", "limit": LIST_PAGE, "useStateDbOnly": True}
#: The page that repairs Codex's index: read from the thread files, the newest first.
REPAIR = {"sortKey": "updated_at", "limit": LIST_PAGE}


def listings(h: Recorder) -> list[dict[str, Any]]:
    """The params of every ``thread/list`` the engine asked, in order."""
    return [m["params"] for m in h.to_codex if m.get("method") == "thread/list" and "id" in m]


def test_every_page_comes_from_the_index_of_a_page_the_size_of_a_screen() -> None:
    h = Recorder(paged_store=True)
    assert list_page(h, {}, "c1") == INDEXED
    assert codex_methods(h).count("thread/list") == 1, "no repair while the client pages"
    assert list_page(h, {"cursor": "c1"}, None) == {**INDEXED, "cursor": "c1"}
    assert codex_methods(h).count("thread/list") == 3, "the repair, once it has its last page"
    repair = h.codex_request("thread/list")
    assert repair["params"] == REPAIR
    answered = len(h.to_client)
    h.codex_reply(repair["id"], {"data": [{"id": "x", "cwd": CWD}], "nextCursor": "r"})
    assert len(h.to_client) == answered, "the repair's answer is nobody's"

    # A later listing, with a cwd filter Codex applies: from the index, and no repair.
    listed = len([m for m in h.to_codex if m.get("method") == "thread/list"])
    assert list_page(h, {"cwd": "/w"}, None) == {**INDEXED, "cwd": "/w"}
    assert len([m for m in h.to_codex if m.get("method") == "thread/list"]) == listed + 1
    validate_all(h)


def test_a_refused_repair_changes_nothing() -> None:
    h = Recorder(paged_store=True)
    list_page(h, {"cursor": "c1"}, None)
    repair = h.codex_request("thread/list")
    assert repair["params"] == REPAIR
    answered = len(h.to_client)
    h.codex_error(repair["id"], "no")
    assert len(h.to_client) == answered
    assert list_page(h, {}, None) == INDEXED


ROW = {"id": "t-2", "cwd": CWD, "preview": "second", "updatedAt": 1796014876}


@pytest.mark.parametrize("arrives_first", [True, False])
def test_the_next_page_is_asked_ahead_and_answers_the_clients_next_request(
    arrives_first: bool,
) -> None:
    """From a listing's second page on, Codex reads the next page while the client takes
    this one; the client's request for it asks Codex nothing more, whether the page arrived
    before it or arrives after."""
    h = Recorder(paged_store=True)
    list_page(h, {"cwd": CWD}, "c1")
    assert len(listings(h)) == 1, "a client that took only the first page may stop there"
    list_page(h, {"cwd": CWD, "cursor": "c1"}, "c2")
    ahead = h.codex_request("thread/list")
    assert ahead["params"] == {**INDEXED, "cwd": CWD, "cursor": "c2"}
    asked = len(listings(h))
    if arrives_first:
        assert h.codex_reply(ahead["id"], {"data": [ROW], "nextCursor": "c3"}) == []
    rid = h.client_request("session/list", {"cwd": CWD, "cursor": "c2"})
    if not arrives_first:
        assert h.client_response(rid) is None
        assert len(listings(h)) == asked, "it waits for the page asked ahead"
        h.codex_reply(ahead["id"], {"data": [ROW], "nextCursor": "c3"})
    assert h.result(rid) == {
        "sessions": [
            {"sessionId": "t-2", "cwd": CWD, "title": "second", "updatedAt": "2026-11-30T05:01:16Z"}
        ],
        "nextCursor": "c3",
    }
    # Nothing more was asked for it; the one after it is asked ahead in turn.
    assert listings(h)[asked:] == [{**INDEXED, "cwd": CWD, "cursor": "c3"}]
    validate_all(h)


@pytest.mark.parametrize(
    "params", [{}, {"cursor": "c2"}, {"cwd": "/elsewhere", "cursor": "c2"}, {"cursor": "c9"}]
)
def test_a_listing_other_than_the_next_page_asks_codex_afresh(params: dict[str, Any]) -> None:
    h = Recorder(paged_store=True)
    list_page(h, {"cwd": CWD, "cursor": "c1"}, "c2")
    ahead = h.codex_request("thread/list")
    assert ahead["params"] == {**INDEXED, "cwd": CWD, "cursor": "c2"}
    h.codex_reply(ahead["id"], {"data": [ROW], "nextCursor": None})
    asked = len(listings(h))
    assert list_page(h, params, None) == {**INDEXED, **params}
    assert listings(h)[asked:] == [{**INDEXED, **params}, REPAIR]
    # The page asked ahead is gone: the next page of the first listing is asked again.
    assert list_page(h, {"cwd": CWD, "cursor": "c2"}, None) == ahead["params"]
    assert len(listings(h)) == asked + 3


@pytest.mark.parametrize("refused_first", [True, False])
def test_a_page_ahead_codex_refuses_is_asked_again_for_the_client(refused_first: bool) -> None:
    h = Recorder(paged_store=True)
    list_page(h, {"cursor": "c1"}, "c2")
    ahead = h.codex_request("thread/list")
    if refused_first:
        h.codex_error(ahead["id"], "busy")
    rid = h.client_request("session/list", {"cursor": "c2"})
    if not refused_first:
        assert h.client_response(rid) is None
        h.codex_error(ahead["id"], "busy")
    again = h.codex_request("thread/list")
    assert again["id"] != ahead["id"] and again["params"] == {**INDEXED, "cursor": "c2"}
    h.codex_reply(again["id"], {"data": [ROW], "nextCursor": None})
    assert [s["sessionId"] for s in h.result(rid)["sessions"]] == ["t-2"]
    validate_all(h)


def test_without_the_paged_store_no_page_is_asked_ahead() -> None:
    h = Recorder()
    assert list_page(h, {"cursor": "c1"}, "c2") == {"sortKey": "updated_at", "cursor": "c1"}
    assert len(listings(h)) == 1


# -- session/load ------------------------------------------------------------------------


def turns_of(pages: list[list[list[dict[str, Any]]]]) -> list[list[dict[str, Any]]]:
    return [turn for page in pages for turn in page]


def page_of(turns: list[list[dict[str, Any]]], first: int, status: str = "completed") -> Any:
    return [
        {"id": f"turn-{first + n}", "status": status, "error": None, "items": items}
        for n, items in enumerate(turns)
    ]


#: How Codex gives a stored history a page at a time: ``items`` (``thread/items/list``, from
#: its history store), or ``turns`` (``thread/turns/list``, once it refused the items: a
#: thread it has no item history of).
WAYS = ["items", "turns"]
#: Codex's refusal of ``thread/items/list`` for a thread it has no item history of.
NO_ITEMS = "thread/items/list is not supported yet"
#: The method each way pages with.
LISTING = {"items": "thread/items/list", "turns": "thread/turns/list"}


def as_entries(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A page of turns as ``thread/items/list`` gives their items."""
    return [{"item": item, "turnId": turn["id"]} for turn in turns for item in turn["items"]]


def answer_page(h: Recorder, way: str, turns: list[dict[str, Any]], cursor: str | None) -> None:
    """Codex's next page of the history, as ``way`` gives it."""
    if way == "items":
        answer(h, LISTING[way], {"data": as_entries(turns), "nextCursor": cursor})
    else:
        answer(h, LISTING[way], {"data": turns, "nextCursor": cursor})


def open_pages(h: Recorder, way: str) -> dict[str, Any]:
    """The first page asked for, the items refused first for ``turns``."""
    listing = h.codex_request("thread/items/list")
    assert listing["params"] == {"threadId": THREAD, "limit": ITEM_PAGE, "sortDirection": "asc"}
    if way == "turns":
        h.codex_error(listing["id"], NO_ITEMS, -32601)
        listing = h.codex_request("thread/turns/list")
        assert listing["params"] == {
            "threadId": THREAD,
            "limit": TURN_PAGE,
            "sortDirection": "asc",
            "itemsView": "full",
        }
    return listing


@pytest.mark.parametrize("way", WAYS)
def test_a_paged_load_replays_each_page_as_it_arrives_then_answers(way: str) -> None:
    h = Recorder(paged_store=True)
    rid = h.client_request("session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    read = answer(h, "thread/read", {"thread": stored_thread([])})
    assert read["params"] == {"threadId": THREAD}, "the history is listed, not read whole"
    resume = answer(h, "thread/resume", resume_result())
    assert resume["params"] == {"threadId": THREAD, "cwd": CWD, "excludeTurns": True}

    open_pages(h, way)
    answer_page(h, way, page_of([[USER_ITEM, ANSWER_ITEM]], 0), "p2")
    # The first page is on its way, and Codex reads the second meanwhile; no answer yet.
    shown = [u["sessionUpdate"] for u in h.updates(THREAD)]
    assert shown == ["user_message_chunk"] * 5 + ["agent_message_chunk"]
    assert h.client_response(rid) is None
    second = h.codex_request(LISTING[way])
    assert second["params"]["cursor"] == "p2"
    answer_page(h, way, page_of([[REASONING_ITEM]], 1), None)
    assert own(h.result(rid)) == {}
    assert [u["sessionUpdate"] for u in replayed(h, rid)] == ["user_message_chunk"] * 5 + [
        "agent_message_chunk",
        "agent_thought_chunk",
    ]
    validate_all(h)


@pytest.mark.parametrize("way", WAYS)
def test_what_codex_says_of_the_thread_during_the_pages_follows_the_response(way: str) -> None:
    """Codex speaks of the thread as soon as the resume subscribed it: that is now, the
    history is then, so it waits for the history and its answer (a whole read, made before
    the resume, had the same order)."""
    h = Recorder(paged_store=True)
    rid = h.client_request("session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    answer(h, "thread/read", {"thread": stored_thread([])})
    answer(h, "thread/resume", resume_result())
    h.codex_notify("thread/tokenUsage/updated", USAGE)
    open_pages(h, way)
    answer_page(h, way, page_of([[USER_ITEM]], 0), "p2")
    h.codex_notify("thread/tokenUsage/updated", {**USAGE, "turnId": "turn-1"})
    answer_page(h, way, page_of([[ANSWER_ITEM]], 1), None)
    response_at = h.to_client.index(h.client_response(rid))  # type: ignore[arg-type]
    assert [u["sessionUpdate"] for u in replayed(h, rid)] == ["user_message_chunk"] * 5 + [
        "agent_message_chunk"
    ]
    after = [
        m["params"]["update"]
        for m in h.to_client[response_at:]
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "usage_update"
    ]
    assert after == [{"sessionUpdate": "usage_update", "used": 120, "size": 1000}] * 2
    # Then as it comes again.
    h.codex_notify("thread/tokenUsage/updated", USAGE)
    assert h.to_client[-1]["params"]["update"]["sessionUpdate"] == "usage_update"
    validate_all(h)


def test_a_paged_load_of_a_thread_codex_never_stored_replays_nothing() -> None:
    h = Recorder(paged_store=True)
    rid = h.client_request("session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    answer(h, "thread/read", {"thread": stored_thread([])})
    answer(h, "thread/resume", resume_result())
    # Codex has no item history of it, and no turns to list either.
    open_pages(h, "turns")
    h.codex_error(h.codex_request("thread/turns/list")["id"], NO_TURNS, NO_TURNS_CODE)
    assert own(h.result(rid)) == {}
    assert replayed(h, rid) == []


@pytest.mark.parametrize("way", WAYS)
def test_a_page_codex_refuses_ends_the_replay_with_what_was_shown(way: str) -> None:
    h = Recorder(paged_store=True)
    rid = h.client_request("session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    answer(h, "thread/read", {"thread": stored_thread([])})
    answer(h, "thread/resume", resume_result())
    open_pages(h, way)
    answer_page(h, way, page_of([[ANSWER_ITEM]], 0), "p2")
    # Refused midway, even -32601: the pages are not asked again another way.
    h.codex_error(h.codex_request(LISTING[way])["id"], "rollout unreadable", -32601)
    # The session is open (Codex resumed it): the load answers, with the first page shown.
    assert own(h.result(rid)) == {}
    assert [u["sessionUpdate"] for u in replayed(h, rid)] == ["agent_message_chunk"]


@pytest.mark.parametrize("way", WAYS)
def test_the_turn_another_client_runs_is_named_by_the_last_page(way: str) -> None:
    h = Recorder(paged_store=True)
    rid = h.client_request("session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    answer(h, "thread/read", {"thread": stored_thread([], status={"type": "active"})})
    resumed = resume_result()
    resumed["thread"]["status"] = {"type": "active", "activeFlags": []}
    answer(h, "thread/resume", resumed)
    open_pages(h, way)
    answer_page(h, way, page_of([[USER_ITEM]], 0), "p2")
    last = page_of([[ANSWER_ITEM]], 1, status="inProgress")
    answer_page(h, way, last, None)
    if way == "items":
        # The items do not say which turn runs: the last turn does, read without its items.
        turn = h.codex_request("thread/turns/list")
        assert turn["params"] == {
            "threadId": THREAD,
            "limit": 1,
            "sortDirection": "desc",
            "itemsView": "notLoaded",
        }
        h.codex_reply(turn["id"], {"data": [{**last[0], "items": []}], "nextCursor": "x"})
    answer(h, "thread/backgroundTerminals/list", {"data": []})
    answer(h, "thread/loaded/list", {"data": [THREAD]})  # Codex holds it, and no sub-agent
    assert own(h.result(rid)) == {}
    h.client_notify("session/cancel", {"sessionId": THREAD})
    interrupt = h.codex_request("turn/interrupt")
    assert interrupt["params"] == {"threadId": THREAD, "turnId": "turn-1"}


# -- the same updates as the whole history -----------------------------------------------------


class FakeCodex:
    """Answers a load's Codex requests from stored threads (with their turns), whole or in
    pages of ``page`` turns (or items), as the engine asks, the pages given ``way``; every
    other request with an empty list. Every thread read is noted in ``read``, with whether
    its turns were asked."""

    def __init__(self, threads: dict[str, Any], resumed: Any, page: int, way: str) -> None:
        self.threads = threads
        self.resumed = resumed
        self.page = page
        self.way = way
        self.answered = 0
        self.read: list[tuple[str, bool]] = []

    def drive(self, h: Recorder) -> None:
        while self.answered < len(h.to_codex):
            message = h.to_codex[self.answered]
            self.answered += 1
            if "id" not in message or "method" not in message:
                continue
            if message["method"] == "thread/items/list" and self.way == "turns":
                h.codex_error(message["id"], NO_ITEMS, -32601)
                continue
            h.codex_reply(message["id"], self.result(message["method"], message["params"]))

    def result(self, method: str, params: dict[str, Any]) -> Any:
        if method == "thread/read":
            self.read.append((params["threadId"], bool(params.get("includeTurns"))))
            thread = dict(self.threads[params["threadId"]])
            if not params.get("includeTurns"):
                thread["turns"] = []
            return {"thread": thread}
        if method == "thread/resume":
            return self.resumed
        if method == "thread/turns/list" and params.get("itemsView") == "notLoaded":
            turns = self.threads[params["threadId"]]["turns"]
            assert params == {
                "threadId": params["threadId"],
                "limit": 1,
                "sortDirection": "desc",
                "itemsView": "notLoaded",
            }
            return {"data": [{**turns[-1], "items": []}] if turns else [], "nextCursor": None}
        if method == "thread/turns/list":
            turns = self.threads[params["threadId"]]["turns"]
            assert params["limit"] == TURN_PAGE and params["sortDirection"] == "asc"
            return self._page(turns, params)
        if method == "thread/items/list":
            entries = as_entries(self.threads[params["threadId"]]["turns"])
            assert params["limit"] == ITEM_PAGE and params["sortDirection"] == "asc"
            return self._page(entries, params)
        # What follows an opened session (skills, ...) and running commands: none.
        return {"data": []}

    def _page(self, entries: list[Any], params: dict[str, Any]) -> Any:
        start = int(params.get("cursor", 0))
        end = start + self.page
        return {"data": entries[start:end], "nextCursor": str(end) if end < len(entries) else None}


def load_both_ways(
    threads: dict[str, Any],
    thread_id: str,
    resumed: Any,
    capabilities: dict[str, Any],
    page: int,
    way: str = "items",
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What the client receives from a load: the whole history read at once, and paged
    (``way``); no thread is read whole when paged."""
    out = []
    for paged in (False, True):
        h = Recorder(paged_store=paged)
        h.client_request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        start = len(h.to_client)
        codex = FakeCodex(threads, resumed, page, way)
        codex.answered = len(h.to_codex)
        cwd = threads[thread_id]["cwd"]
        h.client_request("session/load", {"sessionId": thread_id, "cwd": cwd, "mcpServers": []})
        codex.drive(h)
        if paged:
            assert [t for t, turns in codex.read if turns] == [], "every history paged"
        out.append(h.to_client[start:])
    return out[0], out[1]


@pytest.mark.parametrize("way", WAYS)
def test_pages_replay_the_same_updates_as_the_whole_history(way: str) -> None:
    turns = [[USER_ITEM, REASONING_ITEM], [ANSWER_ITEM, COMMAND_ITEM], [], [ANSWER_ITEM]]
    threads = {THREAD: stored_thread(turns)}
    for page in (1, 2, 3, 10):
        whole, paged = load_both_ways(threads, THREAD, resume_result(), {}, page, way)
        assert len(whole) > 8 and paged == whole


def recorded_loads(name: str) -> list[tuple[dict[str, Any], str, Any, dict[str, Any]]]:
    """Each load a fixture recorded with its whole history: every thread read with turns
    (the root's and its sub-agents'), the root, the resume's answer and the client's
    capabilities."""
    recording = read_recording(str(FIXTURES / f"{name}.codex.jsonl"))
    asked: dict[Any, dict[str, Any]] = {}
    threads: dict[str, Any] = {}
    loads: list[tuple[str, Any]] = []
    capabilities: dict[str, Any] = {}
    for entry in recording.entries:
        record = entry.record
        if not isinstance(record, MessageRecord):
            continue
        message = msgspec.json.decode(record.data())
        if record.dir == "from_client" and message.get("method") == "initialize":
            # A v1 client's (a v2 recording's history is loaded here by a v1 client).
            capabilities = message["params"].get("clientCapabilities", {})
        elif record.dir == "to_codex" and "method" in message:
            asked[message.get("id")] = message
        elif record.dir == "from_codex" and "result" in message and message["id"] in asked:
            request = asked.pop(message["id"])
            if request["method"] == "thread/read" and request["params"].get("includeTurns"):
                thread = message["result"]["thread"]
                threads[thread["id"]] = thread
            elif request["method"] == "thread/resume":
                loads.append((request["params"]["threadId"], message["result"]))
    return [
        (threads, thread_id, resumed, capabilities)
        for thread_id, resumed in loads
        if thread_id in threads and threads[thread_id]["turns"]
    ]


@pytest.mark.parametrize("folder", ["", "codex-0.169/"])
@pytest.mark.parametrize(
    "name", ["load_with_history", "v2_resume_replay", "codex_killed_during_child"]
)
@pytest.mark.parametrize("way", WAYS)
def test_a_recorded_history_replays_the_same_in_pages_of_one_turn(
    folder: str, name: str, way: str
) -> None:
    loads = recorded_loads(folder + name)
    assert loads, f"{name} records a load of a stored history"
    for threads, thread_id, resumed, capabilities in loads:
        whole, paged = load_both_ways(threads, thread_id, resumed, capabilities, 1, way)
        assert paged == whole


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("subagents", [False, True])
def test_sub_agents_named_on_later_pages_replay_the_same_in_pages(
    subagents: bool, way: str
) -> None:
    """Each page's sub-agents are read before the page is replayed (their nicknames title its
    collab calls), and what the whole history shows of them follows as before."""
    threads = {
        ROOT: stored(ROOT, []),
        CHILD: stored(
            CHILD,
            [
                user_message("u-child", "@@ go"),
                command("call_child", "completed", 0, "echo one"),
                spawn_item("spawn-3", CHILD, GRANDCHILD),
            ],
            parentThreadId=ROOT,
            agentNickname="Ada",
        ),
        GRANDCHILD: stored(
            GRANDCHILD,
            [command("call_grandchild", "declined", None, "echo two")],
            parentThreadId=CHILD,
            agentNickname="Bo",
        ),
        OTHER: stored(OTHER, [user_message("u-other", "@@ hi")], parentThreadId=ROOT),
    }
    threads[ROOT]["turns"] = [
        {"id": f"turn-{n}", "status": "completed", "items": items}
        for n, items in enumerate(
            [
                [user_message("u-1", "go"), spawn_item("spawn-1", ROOT, CHILD)],
                [collab("wait-1", "wait", ROOT, [CHILD])],
                [user_message("u-2", "more"), spawn_item("spawn-2", ROOT, OTHER)],
                [collab("wait-2", "wait", ROOT, [CHILD, OTHER])],
            ]
        )
    ]
    capabilities = dict(CAPABILITIES, subagents={}) if subagents else dict(CAPABILITIES)
    for page in (1, 3):
        whole, paged = load_both_ways(
            threads, ROOT, {"thread": threads[ROOT]}, capabilities, page, way
        )
        assert paged == whole
        shown = {m["params"]["sessionId"] for m in paged if m.get("method") == "session/update"}
        assert shown == ({ROOT, CHILD, GRANDCHILD, OTHER} if subagents else {ROOT})
