"""The experimental Codex requests the bridge sends fit the experimental schema of both ends
of the tested range (Codex 0.171, pinned, and 0.169).

Experimental methods change between Codex versions: the end-to-end tests prove each one
against the pinned binary (``tests/test_e2e_cancel_commands.py``,
``tests/test_e2e_config.py``); these check every shape the engine builds, params by params,
against the schema each binary generated (``tests/schemas/codex/experimental/``,
``tests/schemas/codex/0.169/experimental/``).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
from jsonschema import Draft7Validator

from tests.conftest import REPO
from tests.support.engine_harness import Harness
from tests.test_config import CATALOG, H, open_session

BUNDLE = "experimental/codex_app_server_protocol.v2.schemas.json"
SCHEMAS = (REPO / "tests/schemas/codex" / BUNDLE, REPO / "tests/schemas/codex/0.169" / BUNDLE)


@cache
def _definitions(index: int = 0) -> dict[str, Any]:
    return json.loads(SCHEMAS[index].read_text())["definitions"]  # type: ignore[no-any-return]


def assert_valid(definition: str, value: Any) -> None:
    for index in range(len(SCHEMAS)):
        schema = {"$ref": f"#/definitions/{definition}", "definitions": _definitions(index)}
        errors = [e.message for e in Draft7Validator(schema).iter_errors(value)]
        assert not errors, f"{SCHEMAS[index]}: {definition}: {errors} in {value}"


def sent(h: Harness, method: str) -> list[dict[str, Any]]:
    return [m["params"] for m in h.to_codex if m.get("method") == method]


def test_the_schema_has_the_methods_the_bridge_uses() -> None:
    for name in (
        "ThreadBackgroundTerminalsCleanParams",
        "ThreadSettingsUpdateParams",
        "ThreadSettingsUpdatedNotification",
    ):
        assert all(name in _definitions(index) for index in range(len(SCHEMAS))), name


def test_background_terminals_clean_params() -> None:
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid)
    h.client_notify("session/cancel", {"sessionId": sid})
    [params] = sent(h, "thread/backgroundTerminals/clean")
    assert_valid("ThreadBackgroundTerminalsCleanParams", params)


@pytest.mark.parametrize(
    ("config_id", "value"),
    [
        ("mode", "read-only"),
        ("mode", "auto"),
        ("mode", "full-access"),
        ("model", "gpt-a"),
        ("model", "gpt-b"),  # with the effort gpt-b needs
        ("reasoning_effort", "low"),
    ],
)
def test_thread_settings_update_params(config_id: str, value: str) -> None:
    h = H(catalog=CATALOG)
    open_session(h, model="gpt-a", effort="medium")
    h.pick(config_id, value)
    [params] = sent(h, "thread/settings/update")
    assert_valid("ThreadSettingsUpdateParams", params)


def test_the_config_mode_sends_the_thread_policies_back_as_they_were() -> None:
    h = H()
    sandbox = {
        "type": "workspaceWrite",
        "writableRoots": ["/data"],
        "networkAccess": True,
        "excludeTmpdirEnvVar": False,
        "excludeSlashTmp": False,
    }
    open_session(
        h,
        approval={"granular": {"rules": True, "sandbox_approval": False, "mcp_elicitations": True}},
        sandbox=sandbox,
    )
    h.set_mode("read-only")
    h.set_mode("config")
    for params in sent(h, "thread/settings/update"):
        assert_valid("ThreadSettingsUpdateParams", params)


def test_machine_requests_fit_the_pinned_schema() -> None:
    """Machines need Codex 0.171's environments (0.169 has none): ``environment/add`` at the
    handshake, and every turn's ``environments``."""
    from bridge.engine import MachineOffer, Registration

    offer = MachineOffer("box", "/srv/ws", registration=Registration("ws://127.0.0.1:4000", "t"))
    h = Harness(machines=[offer])
    [added] = sent(h, "environment/add")
    schema = {"$ref": "#/definitions/EnvironmentAddParams", "definitions": _definitions(0)}
    assert not list(Draft7Validator(schema).iter_errors(added)), added
    h.thread_started("/work", "mock", {"type": "readOnly"})
    sid = "thread-1"
    h.client_request(
        "session/set_config_option", {"sessionId": sid, "configId": "machine", "value": "box"}
    )
    h.machine_changed("box", "connected")
    h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
    )
    [turn] = sent(h, "turn/start")
    assert turn["environments"] == [{"environmentId": "box", "cwd": "/srv/ws"}]
    schema = {"$ref": "#/definitions/TurnStartParams", "definitions": _definitions(0)}
    assert not list(Draft7Validator(schema).iter_errors(turn)), turn
