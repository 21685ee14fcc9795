"""AIR's declaration and the session index's row state, as pure functions."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.acp import air
from bridge.engine.features.prompts.file_reports import changed_paths
from bridge.engine.features.sessions.index import row_state
from bridge.jsonrpc import RpcError

from .support.air import ALWAYS


def meta(air_value: Any) -> dict[str, Any]:
    return {"jetbrains": {"air": air_value}}


def test_a_well_formed_declaration_names_its_capabilities() -> None:
    declared = air.declared(meta({"version": 1, "capabilities": ["sessionIndex", "diffPatch"]}))
    assert declared == frozenset({"sessionIndex", "diffPatch"})
    assert air.declared(meta({"version": 2, "capabilities": []})) == frozenset()


@pytest.mark.parametrize(
    "client_meta",
    [
        None,
        {},
        {"jetbrains": {}},
        meta({"capabilities": ["sessionIndex"]}),
        meta({"version": 0, "capabilities": ["sessionIndex"]}),
        meta({"version": True, "capabilities": ["sessionIndex"]}),
        meta({"version": "1", "capabilities": ["sessionIndex"]}),
        meta({"version": 1, "capabilities": "sessionIndex"}),
    ],
)
def test_a_malformed_declaration_enables_nothing(client_meta: Any) -> None:
    assert air.declared(client_meta) is None


def test_session_index_is_offered_only_to_a_client_that_declared_it() -> None:
    kept = {"steering": {"supported": True}}
    offered = air.advertised(kept, frozenset({"sessionIndex"}))
    assert offered == {
        "steering": {"supported": True},
        "jetbrains": {"air": {"version": 1, "capabilities": [*ALWAYS, "sessionIndex"]}},
    }
    offered = air.advertised(kept, frozenset())
    assert offered["jetbrains"]["air"]["capabilities"] == ALWAYS


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ({"type": "idle"}, "idle"),
        ({"type": "active", "activeFlags": []}, "running"),
        ({"type": "active", "activeFlags": ["waitingOnApproval"]}, "requires_action"),
        ({"type": "active", "activeFlags": ["waitingOnUserInput"]}, "requires_action"),
        ({"type": "notLoaded"}, None),
        ({"type": "systemError"}, None),
        (None, None),
    ],
)
def test_a_rows_state_is_codexs_thread_status(status: Any, state: str | None) -> None:
    assert row_state(status) == state


@pytest.mark.parametrize(
    ("info", "category", "actions"),
    [
        ("usageLimitExceeded", "limit", []),
        ("rateLimitExceeded", "limit", ["retry"]),
        ("contextWindowExceeded", "limit", ["new_session"]),
        ({"httpConnectionFailed": {"httpStatusCode": 502}}, "connection", ["retry", "new_session"]),
        ("cyberPolicy", "request", []),
        ("serverOverloaded", "service", ["retry"]),
        ("internalServerError", "service", ["retry", "new_session"]),
        ("other", "service", ["retry"]),
        (None, "service", ["retry"]),
    ],
)
def test_a_failure_records_category_and_actions_follow_codexs_error(
    info: Any, category: str, actions: list[str]
) -> None:
    record = air.failure_record("turn-7:error", info, "It failed.")
    assert record == {
        "id": "turn-7:error",
        "revision": 1,
        "category": category,
        "severity": "error",
        "title": "It failed.",
        "actions": actions,
    }


def fork(**fields: Any) -> dict[str, Any]:
    return {"jetbrains": {"air": {"fork": {"version": 1, **fields}}}}


def test_a_fork_point_is_read_only_in_version_1() -> None:
    assert air.fork_point(None) is None
    assert (
        air.fork_point({"jetbrains": {"air": {"fork": {"version": 2, "messageId": "m"}}}}) is None
    )
    digest = "sha256:" + "0" * 64
    point = air.fork_point(fork(messageId="m", messageFingerprint=digest, messageOccurrence=2))
    assert point == air.ForkPoint("m", digest, 2)
    assert air.fork_point(fork(messageId="m")) == air.ForkPoint("m")


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"messageId": ""},
        {"messageId": 3},
        {"messageId": "m", "messageFingerprint": "md5:00"},
        {"messageId": "m", "messageOccurrence": 0},
        {"messageId": "m", "messageOccurrence": True},
    ],
)
def test_a_fork_point_that_does_not_fit_is_invalid_params(fields: dict[str, Any]) -> None:
    with pytest.raises(RpcError) as invalid:
        air.fork_point(fork(**fields))
    assert invalid.value.code == -32602


def report(**fields: Any) -> dict[str, Any]:
    return {"jetbrains": {"air": {"agentFileChangeReportRequest": fields}}}


def test_a_report_request_is_read_only_when_well_formed() -> None:
    assert air.report_request(report(version=1, requestId="a-1.b_c:d")) == "a-1.b_c:d"
    for bad in (
        report(version=1),
        report(version=2, requestId="x"),
        report(version=True, requestId="x"),
        report(version=1, requestId="has space"),
        report(version=1, requestId="x" * 129),
        report(version=1, requestId="x", more=1),
        None,
    ):
        assert air.report_request(bad) is None


def test_turn_diff_paths_resolve_against_the_repository_or_the_cwd() -> None:
    diff = (
        "diff --git a/ws/new.txt b/ws/new.txt\nnew file mode 100644\n"
        "diff --git a/ws/sub/x.py b/ws/sub/x.py\n"
        "diff --git a/elsewhere/y b/elsewhere/y\n"
    )
    # A repository at /repo: its paths, those in the cwd.
    in_repo = changed_paths(diff, "/repo/ws", lambda path: path == "/repo/.git")
    assert in_repo == ["/repo/ws/new.txt", "/repo/ws/sub/x.py"]
    # No repository: the deepest ancestor that puts the paths in the cwd.
    assert changed_paths("diff --git a/a.txt b/a.txt\n", "/w", lambda _: False) == ["/w/a.txt"]
    assert changed_paths(diff.split("diff --git a/elsewhere")[0], "/top/ws", lambda _: False) == [
        "/top/ws/new.txt",
        "/top/ws/sub/x.py",
    ]
