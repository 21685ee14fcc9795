"""The two protocol faces over one core: every update and fact has a rendering in each,
an update of no known type goes out in neither version's shape, a v2 request is decoded
once, and what v2 keeps of a session lives in the session's record.

The lists of types are read from the code (the ``sessionUpdate``-tagged Structs of
``bridge/acp``, the fact union of ``bridge/engine/core/facts.py``), never written here."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import pkgutil
from typing import Any

import msgspec
import pytest

import bridge.acp
from bridge.acp import permissions as acp_permissions
from bridge.acp import v2
from bridge.engine.core import answers, facts, workstate
from bridge.engine.core.record_parts import Turn
from bridge.engine.core.threads import ThreadRecord
from bridge.engine.faces import v2_requests
from bridge.engine.faces.v1 import V1Face
from bridge.engine.faces.v2 import V2Face
from bridge.engine.features.prompts import prompts
from bridge.engine.features.sessions import lifecycle
from tests.support.engine_harness import Harness
from tests.test_lifecycle import CWD, THREAD
from tests.test_v2 import V2, _command_started, _resume, _tool_updates


def _session_update_types() -> set[type]:
    """Every ``session/update`` Struct the features can send: the ``sessionUpdate``-tagged
    Structs of ``bridge.acp`` (v2's own module holds what the v2 face renders into)."""
    found: set[type] = set()
    for info in pkgutil.iter_modules(bridge.acp.__path__):
        if info.name == "v2":
            continue
        module = importlib.import_module(f"bridge.acp.{info.name}")
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, msgspec.Struct)
                and value.__module__ == module.__name__
                and value.__struct_config__.tag_field == "sessionUpdate"
            ):
                found.add(value)
    return found


UPDATE_TYPES = sorted(_session_update_types(), key=lambda t: f"{t.__module__}.{t.__name__}")


def test_the_update_types_are_found_in_the_code() -> None:
    names = {t.__name__ for t in UPDATE_TYPES}
    assert {"AgentMessageChunk", "ToolCall", "ToolCallStatusUpdate", "SubagentUpdate"} <= names


@pytest.mark.parametrize("kind", UPDATE_TYPES, ids=lambda t: t.__name__)
def test_every_update_type_has_a_rendering_in_both_faces(kind: type) -> None:
    assert kind in V1Face.same or kind in V1Face.render, f"no ACP v1 rendering of {kind.__name__}"
    assert kind in V2Face.same or kind in V2Face.render, f"no ACP v2 rendering of {kind.__name__}"


def test_the_fact_union_names_every_fact_the_module_defines() -> None:
    defined = {
        value
        for value in vars(facts).values()
        if inspect.isclass(value)
        and dataclasses.is_dataclass(value)
        and value.__module__ == facts.__name__
    }
    assert defined == set(facts.FACTS)


@pytest.mark.parametrize("kind", facts.FACTS, ids=lambda t: t.__name__)
def test_every_fact_has_a_rendering_in_both_faces(kind: type) -> None:
    assert kind in V1Face.on_fact
    assert kind in V2Face.on_fact


# -- updates of no known type ------------------------------------------------------------------


class _Novel(msgspec.Struct, tag="novel_update", tag_field="sessionUpdate"):
    """An update type no face knows."""

    text: str


def test_a_v1_client_is_sent_no_v2_shape_and_no_unknown_update(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    h.client_request("initialize", {"protocolVersion": 1})
    h.new_session()
    sent = len(h.to_client)
    with caplog.at_level(logging.ERROR):
        for update in (v2.StateUpdate(state="idle"), _Novel(text="x")):
            h.engine.hub.client.update("thread-1", update)
            h._collect(h.engine.hub.take())
    assert h.to_client[sent:] == []
    assert "no ACP v1 rendering of StateUpdate" in caplog.text
    assert "no ACP v1 rendering of _Novel" in caplog.text


def test_a_v2_client_is_sent_no_unknown_update(caplog: pytest.LogCaptureFixture) -> None:
    h = V2()
    h.new_session()
    sent = len(h.to_client)
    with caplog.at_level(logging.ERROR):
        h.engine.hub.client.update("thread-1", _Novel(text="x"))
        h._collect(h.engine.hub.take())
    assert h.to_client[sent:] == []
    assert "no ACP v2 rendering of _Novel" in caplog.text


def _status_update(h: V2, status: str) -> None:
    update = acp_permissions.ToolCallStatusUpdate(toolCallId="call-1", status=status)  # type: ignore[arg-type]
    h.engine.hub.client.update("thread-1", update)
    h._collect(h.engine.hub.take())


def test_a_tool_call_status_update_ends_a_v2_command_and_its_cancel() -> None:
    """A status-only update of a cancellable command is a v2 upsert that withdraws
    ``cancel`` (it went out in v1 shape, the command still advertising cancel)."""
    h = V2.with_turn()
    _command_started(h)
    assert _tool_updates(h)[0]["capabilities"] == {"cancel": {}}
    _status_update(h, "completed")
    assert _tool_updates(h)[-1] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "status": "completed",
        "capabilities": None,
    }
    rid = h.cancel_call()
    assert h.error(rid).code == -32602
    h.validate()


def test_a_tool_call_status_update_of_a_cancelled_command_is_cancelled() -> None:
    h = V2.with_turn()
    _command_started(h)
    rid = h.cancel_call()
    h.codex_reply(h.codex_request("thread/backgroundTerminals/list")["id"], {"data": []})
    assert h.result(rid) == {}
    _status_update(h, "failed")
    last = _tool_updates(h)[-1]
    assert last["status"] == "cancelled" and last["capabilities"] is None
    h.validate()


# -- a prompt's insertion, stated once ----------------------------------------------------------


def _insertions(h: Harness) -> list[tuple[Any, str]]:
    """Every insertion the features state from now on: (prompt id, message id)."""
    seen: list[tuple[Any, str]] = []
    face = h.engine.hub.client.face
    render = face.state

    def state(fact: facts.Fact) -> None:
        if isinstance(fact, facts.PromptInserted):
            seen.append((fact.request_id, fact.message_id))
        render(fact)

    face.state = state  # type: ignore[method-assign]
    return seen


def _harness(version: int) -> Harness:
    if version == 2:
        return V2()
    h = Harness()
    h.client_request("initialize", {"protocolVersion": 1})
    return h


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(
    ("first", "message_id"),
    [
        ("item/started", "um-turn-1"),  # Codex's user message item names the prompt
        ("turn/plan/updated", "thread-1-prompt-1"),  # the turn's traffic came first
        ("turn/completed", "thread-1-prompt-1"),  # the turn ended with no item naming it
    ],
)
def test_the_prompts_feature_states_when_a_prompt_is_inserted_and_under_which_id(
    version: int, first: str, message_id: str
) -> None:
    """The same insertion, at the same moment, whatever the client speaks: v2 answers the
    prompt with it, v1 says nothing of it (its prompt is answered at the end of its work)."""
    h = _harness(version)
    h.new_session()
    inserted = _insertions(h)
    rid = h.client_request(
        "session/prompt", {"sessionId": "thread-1", "prompt": [{"type": "text", "text": "hi"}]}
    )
    start = h.codex_request("turn/start")
    h.codex_reply(start["id"], {"turn": {"id": "turn-1", "status": "inProgress", "items": []}})
    assert inserted == []  # not before Codex shows the prompt, or the turn its work
    sent = len(h.to_client)
    if first == "item/started":
        item = {"type": "userMessage", "id": "um-turn-1", "content": []}
        h.codex_notify("item/started", {"threadId": "thread-1", "turnId": "turn-1", "item": item})
    elif first == "turn/plan/updated":
        plan = [{"step": "a", "status": "pending"}]
        h.codex_notify(
            "turn/plan/updated", {"threadId": "thread-1", "turnId": "turn-1", "plan": plan}
        )
    else:
        h.complete_turn("thread-1")
    assert inserted == [(rid, message_id)]
    answered = [m for m in h.to_client[sent:] if m.get("id") == rid]
    if version == 2:
        assert answered[0]["result"] == {"messageId": message_id}
    elif first == "turn/completed":
        assert answered == [{"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}]
    else:
        assert answered == []
    record = h.engine.threads.session("thread-1")
    assert record is not None and record.awaiting_message is None


# -- requests decoded once ------------------------------------------------------------------------


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, type]]:
    """Every client params decode, wherever the features and faces do it."""
    seen: list[tuple[str, type]] = []
    real = answers.decode_params

    def counting(raw: Any, kind: type, method: str) -> Any:
        seen.append((method, kind))
        return real(raw, kind, method)

    for module in (v2_requests, prompts, lifecycle):
        monkeypatch.setattr(module, "decode_params", counting)
    return seen


def test_a_v2_prompt_is_decoded_once_into_its_v2_params(decodes: list[tuple[str, type]]) -> None:
    h = V2()
    h.new_session()
    decodes.clear()
    h.prompt("thread-1")
    assert decodes == [("session/prompt", v2.PromptParams)]


@pytest.mark.parametrize("replay", [True, False])
def test_a_v2_resume_is_decoded_once_and_never_as_a_v1_load(
    decodes: list[tuple[str, type]], replay: bool
) -> None:
    h = V2()
    rid = _resume(h, replay)
    assert "result" in h.client_response(rid)  # type: ignore[operator]
    assert decodes == [("session/resume", v2.ResumeSessionParams)]
    h.validate()


# -- what v2 keeps of a session -----------------------------------------------------------------


def test_the_v2_face_keeps_nothing_per_session() -> None:
    """What v2 keeps of a session is in its record (forgotten with it), none in the face."""
    h = V2.with_turn()
    _command_started(h)
    face = h.engine.hub.client.face
    assert isinstance(face, V2Face)
    assert set(vars(face)) == {"hub", "requests", "fork"}
    record = h.engine.threads.session("thread-1")
    assert (
        record is not None and record.shown.cancellable == {"call-1"} and record.shown.working == 1
    )
    h.engine.forget("thread-1")
    assert h.engine.threads.get("thread-1") is None


def test_a_v1_client_is_spoken_to_by_a_v1_face_until_initialize_says_v2() -> None:
    h = Harness()
    assert h.engine.hub.client.face.version == 1
    h.client_request("initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "1"}})
    assert h.engine.hub.client.face.version == 2
    h.client_request("initialize", {"protocolVersion": 1})
    assert h.engine.hub.client.face.version == 1


# -- one work-state rule ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("working", "elsewhere", "asking", "turn", "state"),
    [
        (0, None, set(), False, "idle"),
        # A question once the work ended ("Implement this plan?"): the user must act.
        (0, None, {7}, False, "requires_action"),
        # A turn not shown as work yet (a resumed session's before its state is told).
        (0, None, {7}, True, "idle"),
        (1, None, set(), True, "running"),
        (1, None, {7}, True, "requires_action"),
        (0, "turn-x", set(), True, "running"),
        (0, workstate.ANY_TURN, {7}, True, "requires_action"),
    ],
)
def test_a_sessions_own_work_state_follows_one_rule(
    working: int, elsewhere: str | None, asking: set[int], turn: bool, state: str
) -> None:
    record = ThreadRecord(THREAD, cwd=CWD, session=True, visible=True)
    record.shown.working, record.shown.turn_elsewhere, record.shown.asking = (
        working,
        elsewhere,
        set(asking),
    )
    record.turn = Turn(id="turn-1") if turn else None
    assert workstate.foreground(record) == state


@pytest.mark.parametrize(("version", "code"), [(1, -32601), (2, -32603)])
def test_an_unknown_method_after_codex_was_lost_is_answered_as_each_version_did(
    version: int, code: int
) -> None:
    """v1 names an unknown method first; v2 says Codex is lost before it reads the method."""
    h = Harness()
    init: dict[str, Any] = {"protocolVersion": version}
    if version == 2:
        init["info"] = {"name": "t", "version": "1"}
    h.client_request("initialize", init)
    h._collect(h.engine.codex_lost("Codex exited"))
    rid = h.client_request("no/such", {})
    assert h.error(rid).code == code
