"""A session's status, title and archiving, in ACP v1 (its unstable schema) and v2, over one
engine: ``session/status`` (the state the bridge holds, else Codex's ``thread/read``),
``session/set_title`` (``thread/name/set``), ``session/archive`` / ``session/unarchive``
(``thread/archive`` / ``thread/unarchive``) and ``session/list``'s archive filter. v1 and
v2 share the code that does each; v1's answers have v1's shapes. Every message the engine
sends is checked against the schema."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.engine_harness import Harness
from tests.test_lifecycle import Recorder, initialize, stored_thread, validate_all
from tests.test_subagents import CHILD, ROOT, Tree
from tests.test_v2 import V2, status_of_a_saved_then_an_elsewhere_open_session

#: What Codex answers for a thread it neither holds nor stored.
NO_ROLLOUT = "no rollout found for thread id thread-9"

#: Each request, the Codex request that does it, the params beyond the session, the answer.
REQUESTS = [
    ("session/set_title", "thread/name/set", {"title": "Renamed"}, {"title": "Renamed"}),
    ("session/archive", "thread/archive", {}, {}),
    ("session/unarchive", "thread/unarchive", {}, {}),
]


def unstable_v1() -> Recorder:
    h = Recorder()
    initialize(h, {"subagents": {}})
    return h


def client(version: int) -> Harness:
    return unstable_v1() if version == 1 else V2()


def validate(h: Harness) -> None:
    if isinstance(h, V2):
        h.validate()
    else:
        assert isinstance(h, Recorder)
        validate_all(h, unstable=True)


# -- what is advertised ------------------------------------------------------------------------


def test_v1_advertises_status_title_and_archive_to_a_client_of_the_unstable_schema() -> None:
    h = Recorder()
    caps = initialize(h, {"subagents": {}})["sessionCapabilities"]
    assert {k: caps.get(k) for k in ("status", "title", "archive")} == {
        "status": {},
        "title": {},
        "archive": {},
    }
    validate_all(h, unstable=True)
    stable = Recorder()
    caps = initialize(stable)["sessionCapabilities"]
    assert not {"status", "title", "archive"} & set(caps)
    validate_all(stable)


def test_a_v1_client_that_was_not_told_may_still_ask() -> None:
    """Advertised to a client of the unstable schema; done for any that sends them."""
    h = Recorder()
    initialize(h)
    h.new_session()
    rid = h.client_request("session/status", {"sessionId": "thread-1"})
    assert h.result(rid) == {"status": "open"}
    rid = h.client_request("session/archive", {"sessionId": "thread-1"})
    h.codex_reply(h.codex_request("thread/archive")["id"], {})
    assert h.result(rid) == {}


# -- session/status ----------------------------------------------------------------------------


def test_v1_status_of_an_open_session_is_open_without_asking_codex_nor_a_state() -> None:
    h = unstable_v1()
    h.new_session()
    sent = len(h.to_codex)
    rid = h.client_request("session/status", {"sessionId": "thread-1"})
    assert h.result(rid) == {"status": "open"}  # v1's answer has no work state
    assert len(h.to_codex) == sent
    validate_all(h, unstable=True)


def test_v1_status_of_a_saved_an_elsewhere_open_and_an_unknown_session() -> None:
    h = unstable_v1()
    status_of_a_saved_then_an_elsewhere_open_session(h)
    unknown = h.client_request("session/status", {"sessionId": "thread-9"})
    h.codex_error(h.codex_request("thread/read")["id"], NO_ROLLOUT)
    error = h.error(unknown)
    assert error.code == -32002 and error.data == {"sessionId": "thread-9", "codex": NO_ROLLOUT}
    validate_all(h, unstable=True)


# -- set_title, archive, unarchive -----------------------------------------------------------


@pytest.mark.parametrize(("method", "codex_method", "params", "answer"), REQUESTS)
def test_v1_title_and_archive_are_codexs_thread_requests(
    method: str, codex_method: str, params: dict[str, Any], answer: dict[str, Any]
) -> None:
    h = unstable_v1()
    h.new_session()
    rid = h.client_request(method, {"sessionId": "thread-1", **params})
    request = h.codex_request(codex_method)
    assert request["params"] == {
        "threadId": "thread-1",
        **({"name": "Renamed"} if params else {}),
    }
    assert h.client_response(rid) is None  # answered once Codex has done it
    h.codex_reply(request["id"], {})
    assert h.result(rid) == answer
    validate_all(h, unstable=True)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(("method", "codex_method", "params", "_answer"), REQUESTS)
def test_a_session_codex_does_not_know_is_not_found_naming_it(
    version: int, method: str, codex_method: str, params: dict[str, Any], _answer: Any
) -> None:
    h = client(version)
    rid = h.client_request(method, {"sessionId": "thread-9", **params})
    h.codex_error(h.codex_request(codex_method)["id"], NO_ROLLOUT)
    error = h.error(rid)
    assert error.code == -32002, error
    assert "thread-9" in error.message
    assert error.data == {"sessionId": "thread-9", "codex": NO_ROLLOUT}
    validate(h)


@pytest.mark.parametrize("version", [1, 2])
def test_an_empty_title_is_invalid_params_and_codex_is_not_asked(version: int) -> None:
    h = client(version)
    h.new_session()
    sent = len(h.to_codex)
    rid = h.client_request("session/set_title", {"sessionId": "thread-1", "title": "  "})
    error = h.error(rid)
    assert error.code == -32602 and "empty" in error.message
    assert len(h.to_codex) == sent


@pytest.mark.parametrize("version", [1, 2])
def test_codex_lost_is_said_as_it_is_not_as_an_unknown_session(version: int) -> None:
    h = client(version)
    h.new_session()
    rid = h.client_request("session/archive", {"sessionId": "thread-1"})
    h.codex_request("thread/archive")
    h._collect(h.engine.codex_lost("Codex exited"))
    error = h.error(rid)
    assert error.code != -32002 and "Codex exited" in error.message


# -- sub-agents ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [("session/set_title", {"title": "mine"}), ("session/archive", {}), ("session/unarchive", {})],
)
def test_a_v1_client_cannot_retitle_or_archive_a_child(method: str, params: dict[str, Any]) -> None:
    t = Tree()
    t.spawn()
    rid = t.request(method, {"sessionId": CHILD, **params})
    error = t.h.error(rid)
    assert error.code == -32602 and "subagent session" in error.message and ROOT in error.message
    t.check()


def test_a_v1_client_may_ask_a_childs_status() -> None:
    t = Tree()
    t.spawn()
    rid = t.request("session/status", {"sessionId": CHILD})
    assert t.h.result(rid) == {"status": "open"}
    t.check()


# -- session/list's archive filter ------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_every_listed_row_says_whether_it_is_archived(version: int) -> None:
    """Told of the archive capability, a client is told each row's archive state."""
    h = client(version)
    default = h.client_request("session/list", {})
    listed = h.codex_request("thread/list")
    assert "archived" not in listed["params"]
    h.codex_reply(listed["id"], {"data": [stored_thread([])], "nextCursor": None})
    assert [s["archived"] for s in h.result(default)["sessions"]] == [False]
    only = h.client_request("session/list", {"archived": "only"})
    listed = h.codex_request("thread/list")
    assert listed["params"]["archived"] is True
    h.codex_reply(listed["id"], {"data": [stored_thread([])], "nextCursor": None})
    assert [s["archived"] for s in h.result(only)["sessions"]] == [True]
    refused = h.client_request("session/list", {"archived": "include"})
    assert h.error(refused).code == -32602
    validate(h)


def test_a_v1_client_not_told_of_archiving_gets_rows_without_it() -> None:
    h = Recorder()
    initialize(h)
    rid = h.client_request("session/list", {})
    listed = h.codex_request("thread/list")
    h.codex_reply(listed["id"], {"data": [stored_thread([])], "nextCursor": None})
    assert ["archived" in s for s in h.result(rid)["sessions"]] == [False]
    validate_all(h)


# -- archiving an open session ----------------------------------------------------------------


def test_archiving_a_running_session_ends_its_prompt_and_closes_it() -> None:
    """Codex stops the turn of a thread it archives and unloads it; ACP has archiving close
    an active session: its prompt is answered ``cancelled``, the session forgotten here
    (nothing to unsubscribe from), a later prompt not found, its status Codex's."""
    h = unstable_v1()
    sid = h.new_session()
    running = h.start_prompt(sid)
    rid = h.client_request("session/archive", {"sessionId": sid})
    h.complete_turn(sid, status="interrupted")
    assert h.result(running) == {"stopReason": "cancelled"}
    h.codex_reply(h.codex_request("thread/archive")["id"], {})
    assert h.result(rid) == {}
    # Closed by the answer: Codex's thread/archived comes after it.
    status = h.client_request("session/status", {"sessionId": sid})
    h.codex_reply(h.codex_request("thread/read")["id"], {"thread": stored_thread([])})
    assert h.result(status) == {"status": "saved"}
    prompted = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
    )
    assert h.error(prompted).code == -32002
    told = len(h.to_client)
    h.codex_notify("thread/archived", {"threadId": sid})
    assert len(h.to_client) == told
    assert not [m for m in h.to_codex if m.get("method") == "thread/unsubscribe"]
    validate_all(h, unstable=True)


def test_a_session_archived_in_another_window_is_closed_in_this_one() -> None:
    h = V2()
    sid = h.new_session()
    h.codex_notify("thread/archived", {"threadId": sid})
    status = h.client_request("session/status", {"sessionId": sid})
    h.codex_reply(h.codex_request("thread/read")["id"], {"thread": stored_thread([])})
    assert h.result(status) == {"status": "saved"}
    h.validate()
