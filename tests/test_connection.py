"""The connection's named states, and one route for a Codex message however it was decoded."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.codex.types import AgentMessageDelta
from bridge.engine.core.codex_routing import Route
from bridge.engine.core.codex_side import MOVES, CodexSide, CodexState, ImpossibleMove
from bridge.engine.core.connection import ClientState
from tests.support.engine_harness import Harness


def _handshake(h: Harness) -> None:
    init = h.codex_request("initialize")
    h.codex_reply(init["id"], {"userAgent": "codex/0.171.0"})


def test_codex_starts_is_ready_is_brought_back_and_restarts() -> None:
    h = Harness(ready=False)
    connection = h.engine.connection
    assert connection.codex is CodexState.STARTING and connection.starting
    _handshake(h)
    assert connection.codex is CodexState.READY and h.engine.codex_ready
    assert connection.codex_user_agent == "codex/0.171.0"

    h._collect(h.engine.codex_lost("exited", retrying=True))
    assert connection.codex is CodexState.RECOVERING and not connection.starting
    assert h.engine.hub.codex.lost_reason == "exited"
    h.client_request("session/list", {})
    assert connection.client_waiting

    h._collect(h.engine.codex_restarted())
    assert connection.codex is CodexState.RESTARTING and connection.starting
    _handshake(h)
    assert connection.codex is CodexState.READY and not connection.client_waiting
    assert h.engine.hub.codex.lost_reason is None


def test_codex_refusing_initialize_is_lost_with_its_words() -> None:
    h = Harness(ready=False)
    h.codex_error(h.codex_request("initialize")["id"], "no")
    assert h.engine.connection.codex is CodexState.LOST
    assert h.engine.hub.codex.lost_reason == "Codex app-server refused initialize: no"


@pytest.mark.parametrize("retrying", [False, True])
def test_codex_lost_for_good_or_given_up_is_lost(retrying: bool) -> None:
    h = Harness()
    h._collect(h.engine.codex_lost("exited", retrying=retrying))
    if retrying:
        h._collect(h.engine.codex_gave_up("gave up"))
    assert h.engine.connection.codex is CodexState.LOST
    assert h.engine.hub.codex.lost_reason == ("gave up" if retrying else "exited")
    # Known lost: a second report changes nothing.
    assert h.engine.codex_lost("again") == []
    assert h.engine.hub.codex.lost_reason == ("gave up" if retrying else "exited")


def test_codex_lost_during_a_restart_keeps_the_client_waiting() -> None:
    h = Harness()
    h._collect(h.engine.codex_lost("exited", retrying=True))
    h._collect(h.engine.codex_restarted())
    h._collect(h.engine.codex_lost("exited again", retrying=True))
    assert h.engine.connection.codex is CodexState.RECOVERING
    rid = h.client_request("session/list", {})
    assert h.client_response(rid) is None and h.engine.connection.client_waiting


def test_the_client_is_opening_until_a_request_other_than_initialize() -> None:
    h = Harness()
    connection = h.engine.connection
    h.client_request("initialize", {"protocolVersion": 1})
    h.client_request("initialize", {"protocolVersion": 1})
    assert connection.client is ClientState.OPENING
    h.client_request("session/list", {})
    assert connection.client is ClientState.OPEN


def _recording_route(h: Harness, method: str) -> list[Any]:
    """Replace ``method``'s reactors by one that records what it is handed."""
    seen: list[Any] = []
    routes = h.engine.codex_router.routes
    routes[method] = Route(routes[method].params, (seen.append,))
    return seen


DELTA = {"threadId": "T", "turnId": "turn-1", "itemId": "m", "delta": "a"}


@pytest.mark.parametrize(
    "data",
    [
        # As Codex writes it: decoded in one pass.
        msgspec.json.encode({"method": "item/agentMessage/delta", "params": DELTA}),
        # Members in another order: decoded the general way.
        msgspec.json.encode({"params": DELTA, "method": "item/agentMessage/delta"}),
    ],
)
def test_a_delta_reaches_the_same_route_typed_the_same_whichever_way_it_is_decoded(
    data: bytes,
) -> None:
    h = Harness()
    h.new_session("T")
    seen = _recording_route(h, "item/agentMessage/delta")
    h._collect(h.engine.receive_codex(data))
    assert seen == [AgentMessageDelta(**DELTA)]


@pytest.mark.parametrize(
    "data",
    [
        msgspec.json.encode({"method": "item/agentMessage/delta", "params": DELTA}),
        msgspec.json.encode({"params": DELTA, "method": "item/agentMessage/delta"}),
    ],
)
def test_a_delta_for_a_thread_no_session_shows_meets_the_gate_either_way(data: bytes) -> None:
    h = Harness()
    seen = _recording_route(h, "item/agentMessage/delta")
    h._collect(h.engine.receive_codex(data))
    assert seen == []  # held until the thread is placed
    record = h.engine.threads.get("T")
    assert record is not None and record.placing.unplaced is not None
    assert [held.params for held in record.placing.unplaced.held] == [AgentMessageDelta(**DELTA)]


def test_codexs_side_moves_only_as_its_table_says() -> None:
    """One state, kept once: a move the table lacks is a defect, refused, and the state stays."""
    side = CodexSide()
    side.move(CodexState.READY)
    with pytest.raises(ImpossibleMove):
        side.move(CodexState.RESTARTING)  # a connection that was never lost is not restarted
    with pytest.raises(ImpossibleMove):
        side.move(CodexState.RECOVERING)  # away without a reason
    assert (side.state, side.reason) == (CodexState.READY, None)
    side.move(CodexState.RECOVERING, "exited")
    with pytest.raises(ImpossibleMove):
        side.move(CodexState.READY)  # back only through a new connection's handshake
    side.move(CodexState.RESTARTING)
    side.move(CodexState.READY)
    assert (side.state, side.reason) == (CodexState.READY, None)
    # Every state the table names can be left, and every move it lists is a state.
    assert set(MOVES) == set(CodexState) and all(MOVES.values())
