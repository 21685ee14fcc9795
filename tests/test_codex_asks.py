"""A Codex request whose answer changes a record is a typed entry on that record
(``ThreadRecord.codex_asks``, ``Hub.ask``): there while Codex has not answered, gone once
it has, and an answer that comes after the entry was withdrawn (its turn ended, its
record forgotten or dropped) changes nothing. Each kind of entry, at least once."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.engine.core.codex_asks import (
    CodexAsk,
    FindTurn,
    InterruptTurn,
    ListSkills,
    OpenStored,
    ReadParentage,
    ReadSubagent,
    ResumeThread,
    StartTurn,
    SteerTurn,
    StorePick,
    WriteThread,
)
from bridge.engine.core.hub import Hub
from bridge.engine.core.record_parts import Interrupt
from bridge.engine.core.threads import ThreadRecord
from bridge.jsonrpc.peer import ErrorObject
from tests.support.engine_harness import Harness, Windows
from tests.test_config import THREAD as CONFIGURED
from tests.test_config import mode_asked
from tests.test_lifecycle import CWD, Recorder, resume_result, stored_thread
from tests.test_lifecycle import THREAD as LOADED
from tests.test_subagents import CHILD, ROOT, Tree, running_child
from tests.test_windows import THREAD, _running_turn, _stream_a_turn

PROMPT = [{"type": "text", "text": "go"}]


def asks(h: Harness, thread_id: str) -> list[CodexAsk]:
    """What the record asks, but its skills (asked as a session with settings opens)."""
    record = h.engine.hub.threads.get(thread_id)
    assert record is not None
    return [a for a in record.codex_asks if not isinstance(a, ListSkills)]


def record_of(h: Harness, thread_id: str) -> ThreadRecord:
    record = h.engine.hub.threads.get(thread_id)
    assert record is not None
    return record


def sent_since(h: Harness, before: tuple[int, int]) -> tuple[list[Any], list[Any]]:
    return h.to_client[before[0] :], h.to_codex[before[1] :]


def mark(h: Harness) -> tuple[int, int]:
    return len(h.to_client), len(h.to_codex)


# -- turn/start ------------------------------------------------------------------------------


def test_a_prompts_turn_start_is_on_its_record_until_codex_answers() -> None:
    h = Harness()
    sid = h.new_session()
    rid = h.client_request("session/prompt", {"sessionId": sid, "prompt": PROMPT})
    record = record_of(h, sid)
    [asked] = record.codex_asks
    assert isinstance(asked, StartTurn) and not asked.command
    assert asked.turn is record.turn and asked.turn.request_id == rid
    start = h.codex_request("turn/start")
    h.codex_reply(start["id"], {"turn": {"id": "turn-1", "status": "inProgress", "items": []}})
    assert record.codex_asks == []
    assert record.turn is not None and record.turn.id == "turn-1"


def test_a_slash_commands_request_is_a_turn_start_too() -> None:
    h = Harness()
    h.thread_started("/work", "mock", {"type": "readOnly"})  # a session with settings
    sid = "thread-1"
    rid = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/compact"}]}
    )
    [asked] = asks(h, sid)
    assert isinstance(asked, StartTurn) and asked.command and asked.turn.request_id == rid
    h.codex_reply(h.codex_request("thread/compact/start")["id"], {})
    assert asks(h, sid) == []


def test_a_turn_start_answered_after_its_turn_ended_changes_nothing() -> None:
    """Codex named the turn and ended it before its answer to ``turn/start`` came: the
    entry went with the turn, and the late answer is stale."""
    h = Harness()
    sid = h.new_session()
    rid = h.client_request("session/prompt", {"sessionId": sid, "prompt": PROMPT})
    start = h.codex_request("turn/start")
    turn = {"id": "turn-1", "status": "inProgress", "items": []}
    h.codex_notify("turn/started", {"threadId": sid, "turn": turn})
    h.complete_turn(sid, "turn-1")
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert asks(h, sid) == []
    record = record_of(h, sid)
    record.life.unstored = True  # what an accepted answer would change, were it not stale
    before = mark(h)
    h.codex_reply(start["id"], {"turn": turn})
    assert sent_since(h, before) == ([], [])
    assert record.turn is None and record.life.unstored
    # Refused as late, all the same: nothing.
    rid2 = h.client_request("session/prompt", {"sessionId": sid, "prompt": PROMPT})
    start2 = h.codex_request("turn/start")
    h.codex_notify("turn/started", {"threadId": sid, "turn": {**turn, "id": "turn-2"}})
    h.complete_turn(sid, "turn-2")
    assert h.result(rid2) == {"stopReason": "end_turn"}
    before = mark(h)
    h.codex_error(start2["id"], "too late")
    assert sent_since(h, before) == ([], [])


# -- turn/interrupt --------------------------------------------------------------------------


def test_an_interrupt_stays_on_the_record_past_its_turns_end() -> None:
    """A refused interrupt is news of a turn that has ended, most often: never withdrawn."""
    h = Harness()
    sid = h.new_session()
    prompt = h.start_prompt(sid)
    turn = record_of(h, sid).turn
    h.client_notify("session/cancel", {"sessionId": sid})
    [asked] = asks(h, sid)
    assert isinstance(asked, InterruptTurn) and asked.turn is turn
    h.complete_turn(sid, "turn-1", status="interrupted")
    assert h.result(prompt) == {"stopReason": "cancelled"}
    assert asks(h, sid) == [asked]
    h.codex_error(h.codex_request("turn/interrupt")["id"], "no active turn")
    assert asks(h, sid) == []


def test_a_sub_agents_refused_interrupt_reaches_its_turn_after_the_turn_ended() -> None:
    t = Tree()
    t.spawn()
    child = record_of(t.h, CHILD)
    turn = child.turn
    assert turn is not None
    t.cancel(ROOT)
    [asked] = [a for a in child.codex_asks if isinstance(a, InterruptTurn)]
    assert asked.turn is turn
    t.turn_completed(CHILD, "turn-child", "interrupted")
    assert child.turn is None and child.codex_asks == [asked]
    [request] = [
        m
        for m in t.h.to_codex
        if m.get("method") == "turn/interrupt" and m["params"]["threadId"] == CHILD
    ]
    t.h.codex_error(request["id"], "no active turn")
    assert turn.interrupt is Interrupt.REFUSED and child.codex_asks == []


# -- turn/steer ------------------------------------------------------------------------------


def steer(h: Harness, sid: str, text: str) -> int:
    return h.client_request(
        "_session/steering", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    )


def test_a_steer_is_on_its_record_until_codex_answers() -> None:
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid, turn_id="turn-1")
    rid = steer(h, sid, "more")
    record = record_of(h, sid)
    [asked] = record.codex_asks
    assert isinstance(asked, SteerTurn)
    assert asked.expected_turn_id == "turn-1" and asked.steer is record.steers[0]
    assert asked.steer.request_id == rid and asked.steer.sent
    h.codex_reply(h.codex_request("turn/steer")["id"], {"turnId": "turn-1"})
    assert record.codex_asks == [] and h.result(rid) == {"outcome": "injected"}


def test_a_steer_is_answered_even_once_its_session_is_closed() -> None:
    """Its client waits on it: a steer is never withdrawn, not even with its record."""
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid, turn_id="turn-1")
    rid = steer(h, sid, "more")
    close = h.client_request("session/close", {"sessionId": sid})
    h.complete_turn(sid, "turn-1", status="interrupted")
    h.codex_reply(h.codex_request("thread/unsubscribe")["id"], {})
    assert h.result(close) == {}
    assert h.engine.hub.threads.session(sid) is None
    h.codex_error(h.codex_request("turn/steer")["id"], "no active turn")
    assert h.result(rid) == {"outcome": "failed", "reason": "sessionClosed"}


# -- thread/read for a foreign turn's id -------------------------------------------------------


def test_the_read_for_a_foreign_turns_id_goes_with_that_turn() -> None:
    w = Windows(THREAD)
    w.a.new_session(THREAD)
    _stream_a_turn(w, only_a=True)
    w.open("session/resume", status="active")
    w.b.client_notify("session/cancel", {"sessionId": THREAD})
    record = record_of(w.b, THREAD)
    [asked] = record.codex_asks
    assert isinstance(asked, FindTurn) and asked.turn is record.turn
    read = w.b.codex_request("thread/read")
    # The turn ends before Codex answers: the answer names a turn no longer running here.
    w.b.complete_turn(THREAD, "turn-1", status="completed")
    assert record.codex_asks == [] and record.turn is None
    before = mark(w.b)
    thread = {"id": THREAD, "cwd": "/work", "preview": "", "turns": _running_turn("turn-1")}
    w.b.codex_reply(read["id"], {"thread": thread})
    assert sent_since(w.b, before) == ([], [])


# -- recovery: thread/resume, thread/read --------------------------------------------------------


def restarted(h: Harness) -> None:
    h._collect(h.engine.codex_lost("connection to Codex lost", retrying=True))
    h._collect(h.engine.codex_restarted())
    h.codex_reply(h.codex_request("initialize")["id"], {"userAgent": "codex/0.169.0"})


def test_a_resume_after_codex_came_back_and_its_write_are_entries() -> None:
    h = Harness()
    sid = h.new_session()
    restarted(h)
    [asked] = asks(h, sid)
    assert isinstance(asked, ResumeThread) and not asked.written
    h.codex_error(h.codex_request("thread/resume")["id"], f"no rollout found for thread id {sid}")
    [asked] = asks(h, sid)
    assert isinstance(asked, WriteThread)
    h.codex_error(h.codex_request("thread/read")["id"], "thread not loaded")
    [asked] = asks(h, sid)
    assert isinstance(asked, ResumeThread) and asked.written
    h.codex_reply(h.codex_request("thread/resume")["id"], {"thread": {"id": sid}})
    assert asks(h, sid) == [] and not record_of(h, sid).life.resuming


def test_a_sub_agents_read_after_codex_came_back_goes_with_its_record() -> None:
    t = Tree()
    t.spawn()
    child = record_of(t.h, CHILD)
    t.h._collect(t.h.engine.codex_lost("Codex app-server exited", retrying=True))
    t.codex_back()
    [asked] = child.codex_asks
    assert isinstance(asked, ReadSubagent)
    read = t.read_of(CHILD)
    # The root session is closed (its sub-agents forgotten with it) before Codex answers.
    close = t.request("session/close", {"sessionId": ROOT})
    t.h.complete_turn(ROOT, "turn-root", status="interrupted")
    t.h.codex_reply(t.h.codex_request("thread/unsubscribe")["id"], {})
    assert t.h.result(close) == {}
    assert child.codex_asks == []
    status = child.work.status
    before = mark(t.h)
    t.h.codex_reply(read["id"], {"thread": running_child("turn-child-2")})
    assert sent_since(t.h, before) == ([], [])
    assert child.work.status is status and child.turn is None


# -- session/load, session/resume ---------------------------------------------------------------


def test_a_load_is_one_entry_on_the_record_being_opened_request_after_request() -> None:
    h = Recorder()
    rid = h.client_request("session/load", {"sessionId": LOADED, "cwd": CWD, "mcpServers": []})
    opening = record_of(h, LOADED)
    [asked] = asks(h, LOADED)
    assert isinstance(asked, OpenStored) and asked.rid == rid and asked.replay
    h.codex_reply(h.codex_request("thread/read")["id"], {"thread": stored_thread([])})
    assert asks(h, LOADED) == [asked] and asked.stored is not None
    h.codex_error(h.codex_request("thread/resume")["id"], f"no rollout found for {LOADED}")
    assert asks(h, LOADED) == [asked] and asked.written  # its turns read, to write it
    h.codex_error(h.codex_request("thread/read")["id"], "no turns")
    h.codex_reply(h.codex_request("thread/resume")["id"], resume_result())
    assert h.result(rid) is not None
    assert asks(h, LOADED) == [] and record_of(h, LOADED) is opening


# -- a pick stored in the thread -----------------------------------------------------------------


def test_a_pick_is_on_its_record_until_codex_has_stored_it() -> None:
    h, rid = mode_asked("read-only")
    record = record_of(h, CONFIGURED)
    [asked] = asks(h, CONFIGURED)
    assert isinstance(asked, StorePick) and asked.rid == rid and asked.mode
    assert asked.settings is record.settings
    assert h.client_response(rid) is None
    h.store()
    assert asks(h, CONFIGURED) == [] and h.result(rid) == {}


# -- what a session shows: its skills ----------------------------------------------------------


def test_skills_listed_after_their_session_closed_change_nothing() -> None:
    h = Harness()
    h.thread_started("/work", "mock", {"type": "readOnly"})  # a session with settings
    record = record_of(h, "thread-1")
    [asked] = record.codex_asks
    assert isinstance(asked, ListSkills)
    listed = h.codex_request("skills/list")
    close = h.client_request("session/close", {"sessionId": "thread-1"})
    h.codex_reply(h.codex_request("thread/unsubscribe")["id"], {})
    assert h.result(close) == {} and record.codex_asks == []
    before = mark(h)
    skill = {"name": "poem", "path": "/s/poem", "enabled": True, "description": "d"}
    h.codex_reply(listed["id"], {"data": [{"cwd": "/work", "skills": [skill]}]})
    assert sent_since(h, before) == ([], []) and record.skills == {}


# -- a sub-agent's placement ---------------------------------------------------------------------


def test_a_parentage_read_is_on_the_held_record_until_codex_answers() -> None:
    t = Tree()
    t.status(CHILD, "active")
    held = record_of(t.h, CHILD)
    [asked] = held.codex_asks
    assert isinstance(asked, ReadParentage) and asked.unplaced is held.placing.unplaced
    t.answer_read(CHILD, ROOT, "Ada")
    assert held.codex_asks == [] and held.session


def test_a_parentage_read_answered_after_its_record_was_dropped_places_nothing() -> None:
    t = Tree()
    t.status(CHILD, "active")
    read = t.read_of(CHILD)
    held = record_of(t.h, CHILD)
    assert t.h.engine.hub.threads.drop(CHILD) is held
    assert held.codex_asks == []
    before = mark(t.h)
    t.h.codex_reply(read["id"], {"thread": {"id": CHILD, "parentThreadId": ROOT, "turns": []}})
    assert sent_since(t.h, before) == ([], [])
    assert t.h.engine.hub.threads.get(CHILD) is None
    # Failed as late: nothing either.
    t.status("other-child", "active")
    other = t.read_of("other-child")
    t.h.engine.hub.threads.drop("other-child")
    t.h.codex_error(other["id"], "thread not loaded")
    assert t.h.engine.hub.threads.get("other-child") is None


# -- the hub -------------------------------------------------------------------------------------


class Calls:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def answered(self, record: ThreadRecord, entry: ReadSubagent, result: Any) -> None:
        self.seen.append(("answered", result))

    def broken(self, record: ThreadRecord, entry: ReadSubagent, result: Any) -> None:
        raise RuntimeError("a defect")

    def failed(self, record: ThreadRecord, entry: ReadSubagent, error: ErrorObject) -> None:
        self.seen.append(("failed", error.message))


def _hub_and_record() -> tuple[Harness, Hub, ThreadRecord]:
    h = Harness()
    sid = h.new_session()
    return h, h.engine.hub, record_of(h, sid)


def _read_asked(on_answer: str) -> tuple[Harness, ThreadRecord, ReadSubagent, Calls]:
    """A session's record asks Codex ``thread/read`` for an entry, the answer to go to the
    method ``on_answer`` of ``Calls``."""
    h, hub, record = _hub_and_record()
    calls = Calls()
    entry = ReadSubagent()
    hub.codex.ask(record, entry, "thread/read", {}, None, getattr(calls, on_answer), calls.failed)
    h._collect(hub.take())
    return h, record, entry, calls


def test_an_answer_whose_handler_fails_is_the_entrys_failure() -> None:
    h, record, _, calls = _read_asked("broken")
    h.codex_reply(h.codex_request("thread/read")["id"], {})
    assert record.codex_asks == []
    [(kind, message)] = calls.seen
    assert kind == "failed" and "internal error" in message


def test_an_entry_withdrawn_before_the_answer_hears_nothing() -> None:
    h, record, entry, calls = _read_asked("answered")
    assert record.codex_asks == [entry]
    record.codex_asks.remove(entry)
    h.codex_reply(h.codex_request("thread/read")["id"], {})
    assert calls.seen == []


@pytest.mark.parametrize("retrying", [True, False])
def test_asking_a_lost_codex_fails_at_once_and_holds_nothing(retrying: bool) -> None:
    h, hub, record = _hub_and_record()
    h._collect(h.engine.codex_lost("exited", retrying=retrying))
    calls = Calls()
    hub.codex.ask(record, ReadSubagent(), "thread/read", {}, None, calls.answered, calls.failed)
    assert calls.seen == [("failed", "exited")] and record.codex_asks == []


def test_the_census_counts_what_records_ask() -> None:
    h = Harness()
    sid = h.new_session()
    assert h.engine.census()["codexAsks"] == 0
    h.client_request("session/prompt", {"sessionId": sid, "prompt": PROMPT})
    assert h.engine.census()["codexAsks"] == 1
