"""Modes, config options, slash commands and authentication, in the engine alone."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.codex.types import TurnError
from bridge.engine.features.prompts.prompts import lacks_credentials
from tests.support.acp_schema import ConversationValidator
from tests.support.engine_harness import Harness, skills_list

THREAD = "019a-thread"
WORKSPACE_WRITE = {
    "type": "workspaceWrite",
    "writableRoots": [],
    "networkAccess": False,
    "excludeTmpdirEnvVar": False,
    "excludeSlashTmp": False,
}


def thread_started(
    thread: str = THREAD, sandbox: Any = WORKSPACE_WRITE, **more: Any
) -> dict[str, Any]:
    """Codex's answer to ``thread/start``: ``thread`` in /work, on ``mock-model``, asking for
    approval on request, in ``sandbox`` (and ``more``)."""
    return {
        "thread": {"id": thread, "cwd": "/work"},
        "model": "mock-model",
        "approvalPolicy": "on-request",
        "sandbox": sandbox,
        **more,
    }


def _model(
    name: str,
    display: str,
    description: str,
    efforts: list[tuple[str, str]],
    default: str,
    **flags: bool,
) -> dict[str, Any]:
    """One model of Codex's ``model/list`` answer (``flags``: ``hidden``, ``isDefault``)."""
    return {
        "id": name,
        "model": name,
        "displayName": display,
        "description": description,
        "hidden": flags.get("hidden", False),
        "isDefault": flags.get("isDefault", False),
        "supportedReasoningEfforts": [
            {"reasoningEffort": effort, "description": said} for effort, said in efforts
        ],
        "defaultReasoningEffort": default,
    }


CATALOG: dict[str, Any] = {
    "data": [
        _model(
            "gpt-a",
            "GPT-A",
            "Fast.",
            [("low", "Quick"), ("medium", "Balanced")],
            "medium",
            isDefault=True,
        ),
        _model(
            "gpt-b",
            "GPT-B",
            "Deep.",
            [("low", "Quick"), ("high", "Deep"), ("xhigh", "Deeper")],
            "high",
        ),
        _model("internal", "Internal", "", [], "low", hidden=True),
    ],
    "nextCursor": None,
}


class H(Harness):
    """The harness, remembering what the client asked so every answer can be validated."""

    def __init__(self, *, catalog: Any = None, **options: Any) -> None:
        """``catalog``: Codex's answer to the ``model/list`` asked at the handshake (no
        models by default; ``False``: left for the test to answer)."""
        self.methods: dict[int, str] = {}
        super().__init__(catalog=catalog, **options)

    def client_request(self, method: str, params: Any) -> int:
        rid = super().client_request(method, params)
        self.methods[rid] = method
        return rid

    def client_answer(self, rid: Any, result: Any) -> None:
        self.client_raw(msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "result": result}))

    def validate(self) -> None:
        validator = ConversationValidator()
        for rid, method in self.methods.items():
            validator.client_sent({"id": rid, "method": method})
        for message in self.to_client:
            validator.agent_sent(message)

    def sent_codex(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.to_codex if m.get("method") == method]

    def store(self) -> dict[str, Any]:
        """Codex stores the settings change last asked for; returns its params."""
        request = self.codex_request("thread/settings/update")
        self.codex_reply(request["id"], {})
        return request["params"]  # type: ignore[no-any-return]

    def pick(self, config_id: str, value: str, session: str = THREAD) -> list[dict[str, Any]]:
        """``session/set_config_option``, stored by Codex; the options answered."""
        rid = self.client_request(
            "session/set_config_option",
            {"sessionId": session, "configId": config_id, "value": value},
        )
        assert self.client_response(rid) is None, "answered once Codex has stored it"
        self.store()
        return self.result(rid)["configOptions"]  # type: ignore[no-any-return]

    def pick_unstored(self, config_id: str, value: str) -> list[dict[str, Any]]:
        """``session/set_config_option`` answered without Codex (no thread settings)."""
        rid = self.client_request(
            "session/set_config_option",
            {"sessionId": THREAD, "configId": config_id, "value": value},
        )
        return self.result(rid)["configOptions"]  # type: ignore[no-any-return]

    def set_mode(self, mode: str, session: str = THREAD) -> Any:
        rid = self.client_request("session/set_mode", {"sessionId": session, "modeId": mode})
        self.store()
        return self.result(rid)


def open_session(
    h: H,
    *,
    approval: Any = "on-request",
    sandbox: Any = None,
    model: str = "mock-model",
    effort: str | None = None,
    thread_id: str = THREAD,
) -> dict[str, Any]:
    """``session/new`` answered by a full 0.169 ``thread/start`` result; returns the ACP result."""
    rid = h.client_request("session/new", {"cwd": "/work", "mcpServers": []})
    start = h.codex_request("thread/start")
    h.codex_reply(
        start["id"],
        {
            "thread": {"id": thread_id, "cwd": "/work"},
            "model": model,
            "modelProvider": "mock",
            "approvalPolicy": approval,
            "approvalsReviewer": "user",
            "sandbox": WORKSPACE_WRITE if sandbox is None else sandbox,
            "reasoningEffort": effort,
            "cwd": "/work",
        },
    )
    return h.result(rid)


def mode_asked(mode: str) -> tuple[H, int]:
    """A session open, and ``session/set_mode`` to ``mode`` asked (not yet answered)."""
    h = H()
    open_session(h)
    return h, h.client_request("session/set_mode", {"sessionId": THREAD, "modeId": mode})


def answer_catalog(h: H, catalog: dict[str, Any] = CATALOG) -> None:
    request = h.codex_request("model/list")
    h.codex_reply(request["id"], catalog)


def option(options: list[dict[str, Any]], option_id: str) -> dict[str, Any]:
    found = [o for o in options if o["id"] == option_id]
    assert found, f"no option {option_id} in {[o['id'] for o in options]}"
    return found[0]


def prompt(h: H, text: str, turn_id: str = "turn-1", session: str = THREAD) -> int:
    rid = h.client_request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    )
    start = h.codex_request("turn/start")
    h.codex_reply(start["id"], {"turn": {"id": turn_id, "status": "inProgress", "items": []}})
    return rid


# -- what a new session reports -----------------------------------------------------------------


def test_a_new_session_shows_the_settings_codex_reported_and_overrides_nothing() -> None:
    h = H()
    result = open_session(h)
    assert result["modes"]["currentModeId"] == "auto"
    assert [m["id"] for m in result["modes"]["availableModes"]] == [
        "read-only",
        "auto",
        "full-access",
        "auto-review",  # Codex names a reviewer: it has one
    ]
    options = result["configOptions"]
    # No effort known for mock-model.
    assert [o["id"] for o in options] == ["mode", "model", "collaboration_mode"]
    assert option(options, "mode")["currentValue"] == "auto"
    assert option(options, "mode")["category"] == "mode"
    model = option(options, "model")
    assert model["currentValue"] == "mock-model"
    assert [o["value"] for o in model["options"]] == ["mock-model"]
    # The catalog is asked for at the handshake, before any session.
    assert [m.get("method") for m in h.to_codex][:3] == ["initialize", "initialized", "model/list"]
    assert h.codex_request("thread/start")["params"] == {"cwd": "/work"}
    # The first prompt carries no setting: config.toml stays in force.
    prompt(h, "hi")
    params = h.codex_request("turn/start")["params"]
    assert set(params) == {"threadId", "input"}
    h.validate()


def test_available_commands_follow_the_session_new_result() -> None:
    h = H()
    open_session(h)
    kinds = [m.get("method") or ("result" if "result" in m else "?") for m in h.to_client]
    assert kinds[-2:] == ["result", "session/update"]
    update = h.to_client[-1]["params"]["update"]
    assert update["sessionUpdate"] == "available_commands_update"
    commands = {c["name"]: c for c in update["availableCommands"]}
    assert list(commands) == [
        "status",
        "mcp",
        "skills",
        "review",
        "review-branch",
        "review-commit",
        "compact",
        "goal",
        "plan",
        "rename",
        "rewind",
        "logout",
        "shell",
    ]
    # A command that takes an argument says what it takes.
    for name in (
        *("review", "review-branch", "review-commit", "goal", "plan", "rename", "rewind"),
        "shell",
    ):
        assert commands[name]["input"]["hint"], name
    for name in ("status", "mcp", "skills", "compact", "logout"):
        assert "input" not in commands[name], name
    h.validate()


def test_a_thread_without_reported_settings_gets_no_modes_options_or_commands() -> None:
    h = H()
    sid = h.new_session()  # a thread/start result without approvalPolicy and sandbox
    assert h.updates(sid) == []
    assert len(h.sent_codex("model/list")) == 1  # the handshake's
    error = h.error(h.client_request("session/set_mode", {"sessionId": sid, "modeId": "auto"}))
    assert error.code == -32602
    # "/compact" is then an ordinary prompt.
    h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/compact"}]}
    )
    assert h.codex_request("turn/start")["params"]["input"] == [
        {"type": "text", "text": "/compact"}
    ]


@pytest.mark.parametrize(
    ("approval", "sandbox", "mode"),
    [
        ("on-request", {"type": "readOnly", "networkAccess": False}, "read-only"),
        ("on-request", {"type": "readOnly"}, "read-only"),
        ("on-request", {"type": "workspaceWrite"}, "auto"),
        ("never", {"type": "dangerFullAccess"}, "full-access"),
        # What no preset is stays what it is: the configuration's own entry.
        ("never", WORKSPACE_WRITE, "config"),
        ("on-request", {**WORKSPACE_WRITE, "networkAccess": True}, "config"),
        ("on-request", {**WORKSPACE_WRITE, "writableRoots": ["/data"]}, "config"),
        ("on-request", {"type": "dangerFullAccess"}, "config"),
        (
            {"granular": {"mcp_elicitations": True, "rules": True, "sandbox_approval": False}},
            WORKSPACE_WRITE,
            "config",
        ),
    ],
)
def test_the_current_mode_is_the_preset_the_policies_are(
    approval: Any, sandbox: Any, mode: str
) -> None:
    h = H()
    result = open_session(h, approval=approval, sandbox=sandbox)
    assert result["modes"]["currentModeId"] == mode
    ids = [m["id"] for m in result["modes"]["availableModes"]]
    assert ("config" in ids) == (mode == "config")
    assert option(result["configOptions"], "mode")["currentValue"] == mode
    h.validate()


def test_the_config_mode_describes_the_configuration_and_can_be_picked_back() -> None:
    h = H()
    sandbox = {**WORKSPACE_WRITE, "networkAccess": True}
    result = open_session(h, approval="never", sandbox=sandbox)
    custom = result["modes"]["availableModes"][-1]
    assert custom["id"] == "config"
    assert "approval never" in custom["description"]
    assert "workspace-write with network access" in custom["description"]
    h.set_mode("read-only")
    rid = h.client_request("session/set_mode", {"sessionId": THREAD, "modeId": "config"})
    params = h.store()
    # Back to what the configuration said, stored as such.
    assert (params["approvalPolicy"], params["sandboxPolicy"]) == ("never", sandbox)
    assert h.result(rid) == {}
    prompt(h, "hi")
    assert set(h.codex_request("turn/start")["params"]) == {"threadId", "input"}
    h.validate()


# -- the model catalog -------------------------------------------------------------------------------


def test_the_catalog_asked_at_the_handshake_is_in_the_first_answer() -> None:
    h = H(catalog=False)
    rid = h.client_request("session/new", {"cwd": "/work", "mcpServers": []})
    # A client that reads only the answer must be able to pick any model: the session is
    # opened once the catalog is in.
    assert not h.sent_codex("thread/start")
    answer_catalog(h)
    h.codex_reply(h.codex_request("thread/start")["id"], thread_started())
    model = option(h.result(rid)["configOptions"], "model")
    assert model["currentValue"] == "mock-model"
    assert [o["value"] for o in model["options"]] == ["mock-model", "gpt-a", "gpt-b"]
    assert model["options"][1]["name"] == "GPT-A"
    assert not [u for u in h.updates(THREAD) if u["sessionUpdate"] == "config_option_update"]
    # A second session uses the cached catalog, in its result.
    second = open_session(h, thread_id="019a-other", model="gpt-b")
    assert len(h.sent_codex("model/list")) == 1
    assert option(second["configOptions"], "model")["currentValue"] == "gpt-b"
    effort = option(second["configOptions"], "reasoning_effort")
    # No effort configured: the model's default, which Codex uses.
    assert effort["currentValue"] == "high"
    assert [o["value"] for o in effort["options"]] == ["low", "high", "xhigh"]
    assert effort["category"] == "thought_level"
    assert "(default)" in effort["options"][1]["description"]
    h.validate()


def test_a_load_and_a_bad_request_wait_for_the_catalog_too() -> None:
    h = H(catalog=False)
    load = h.client_request("session/load", {"sessionId": THREAD, "cwd": "/work", "mcpServers": []})
    assert h.client_response(load) is None
    bad = h.client_request("session/new", {"cwd": "relative", "mcpServers": []})
    assert not h.sent_codex("thread/read") and h.client_response(bad) is None
    answer_catalog(h)
    assert h.sent_codex("thread/read")
    assert h.error(bad).code == -32602  # answered all the same, once it ran


def test_a_codex_lost_while_the_catalog_is_asked_fails_the_waiting_open() -> None:
    h = H(catalog=False)
    rid = h.client_request("session/new", {"cwd": "/work", "mcpServers": []})
    h._collect(h.engine.codex_lost("Codex app-server exited (code 1)"))
    error = h.error(rid)
    assert error.code == -32603 and "exited" in error.message
    assert not h.sent_codex("thread/start")


def test_a_session_opened_after_the_catalog_came_answers_at_once() -> None:
    h = H(catalog=CATALOG)
    model = option(open_session(h)["configOptions"], "model")
    assert [o["value"] for o in model["options"]] == ["mock-model", "gpt-a", "gpt-b"]
    h.validate()


def test_an_effort_the_thread_reports_is_shown_even_if_the_catalog_lacks_it() -> None:
    h = H(catalog=CATALOG)
    result = open_session(h, model="gpt-a", effort="ultra")
    effort = option(result["configOptions"], "reasoning_effort")
    assert effort["currentValue"] == "ultra"
    assert [o["value"] for o in effort["options"]] == ["low", "medium", "ultra"]
    h.validate()


def test_the_catalog_is_read_page_by_page() -> None:
    h = H(catalog=False)
    first = {"data": CATALOG["data"][:1], "nextCursor": "page-2"}
    h.codex_reply(h.codex_request("model/list")["id"], first)
    second = h.codex_request("model/list")
    assert second["params"] == {"cursor": "page-2"}
    h.codex_reply(second["id"], {"data": CATALOG["data"][1:], "nextCursor": None})
    model = option(open_session(h)["configOptions"], "model")
    assert [o["value"] for o in model["options"]] == ["mock-model", "gpt-a", "gpt-b"]
    h.validate()


def test_a_failed_catalog_leaves_the_current_model_offered() -> None:
    h = H(catalog=False)
    rid = h.client_request("session/new", {"cwd": "/work", "mcpServers": []})
    h.codex_error(h.codex_request("model/list")["id"], "no catalog")
    h.codex_reply(h.codex_request("thread/start")["id"], thread_started())
    model = option(h.result(rid)["configOptions"], "model")
    assert [o["value"] for o in model["options"]] == ["mock-model"]
    assert [u["sessionUpdate"] for u in h.updates(THREAD)] == ["available_commands_update"]
    assert option(h.pick("model", "mock-model"), "model")["currentValue"] == "mock-model"
    h.validate()


# -- picking -----------------------------------------------------------------------------------------


def test_set_mode_is_stored_in_the_thread_at_once() -> None:
    h, rid = mode_asked("full-access")
    assert h.client_response(rid) is None  # answered once Codex has it
    params = h.store()
    assert params == {
        "threadId": THREAD,
        "approvalPolicy": "never",
        "sandboxPolicy": {"type": "dangerFullAccess"},
    }
    assert h.result(rid) == {}
    updates = h.updates(THREAD)
    # The client set the mode itself; its config option shows it too.
    assert [u["sessionUpdate"] for u in updates] == [
        "available_commands_update",
        "config_option_update",
    ]
    assert option(updates[-1]["configOptions"], "mode")["currentValue"] == "full-access"
    # Stored in the thread: later turns carry no setting of their own.
    for turn in ("turn-1", "turn-2"):
        prompt(h, "hi", turn)
        assert set(h.codex_request("turn/start")["params"]) == {"threadId", "input"}
        h.complete_turn(THREAD, turn)
    h.validate()


def test_a_pick_a_prompt_overtakes_goes_with_that_turn() -> None:
    """The prompt is sent before Codex confirms the pick: the turn carries it."""
    h, rid = mode_asked("read-only")
    prompt(h, "hi")
    params = h.codex_request("turn/start")["params"]
    assert (params["approvalPolicy"], params["sandboxPolicy"]) == (
        "on-request",
        {"type": "readOnly"},
    )
    h.store()
    assert h.result(rid) == {}
    h.validate()


def test_a_codex_without_thread_settings_gets_the_picks_with_every_turn() -> None:
    h, rid = mode_asked("full-access")
    request = h.codex_request("thread/settings/update")
    h.codex_error(request["id"], "Invalid request: unknown variant `thread/settings/update`")
    assert h.result(rid) == {}
    assert option(h.pick_unstored("model", "mock-model"), "mode")["currentValue"] == "full-access"
    assert len(h.sent_codex("thread/settings/update")) == 1  # not asked again
    for turn in ("turn-1", "turn-2"):
        prompt(h, "hi", turn)
        params = h.codex_request("turn/start")["params"]
        assert params["approvalPolicy"] == "never"
        assert params["sandboxPolicy"] == {"type": "dangerFullAccess"}
        assert params["model"] == "mock-model"
        h.complete_turn(THREAD, turn)
    h.validate()


def test_codex_refusing_a_settings_change_is_the_clients_error() -> None:
    h, rid = mode_asked("read-only")
    h.codex_error(h.codex_request("thread/settings/update")["id"], "sandbox not allowed here")
    error = h.error(rid)
    assert "sandbox not allowed here" in error.message
    h.validate()


def test_set_config_option_for_the_mode_keeps_modes_in_step() -> None:
    h = H()
    open_session(h)
    options = h.pick("mode", "read-only")
    assert option(options, "mode")["currentValue"] == "read-only"
    assert h.updates(THREAD)[-1] == {
        "sessionUpdate": "current_mode_update",
        "currentModeId": "read-only",
    }
    params = h.sent_codex("thread/settings/update")[-1]["params"]
    assert (params["approvalPolicy"], params["sandboxPolicy"]) == (
        "on-request",
        {"type": "readOnly"},
    )
    h.validate()


def test_picking_a_model_and_an_effort() -> None:
    h = H(catalog=CATALOG)
    open_session(h)

    def stored() -> dict[str, Any]:
        params = dict(h.sent_codex("thread/settings/update")[-1]["params"])
        del params["threadId"]
        return params

    options = h.pick("model", "gpt-a")
    assert stored() == {"model": "gpt-a"}  # the model's default effort applies
    assert option(options, "model")["currentValue"] == "gpt-a"
    # The model the session opened with (not in the catalog) can still be picked back.
    values = [o["value"] for o in option(options, "model")["options"]]
    assert values == ["mock-model", "gpt-a", "gpt-b"]
    assert option(options, "reasoning_effort")["currentValue"] == "medium"  # gpt-a's default
    assert option(h.pick("reasoning_effort", "low"), "reasoning_effort")["currentValue"] == "low"
    assert stored() == {"effort": "low"}
    # gpt-b supports low too: the pick stays.
    assert option(h.pick("model", "gpt-b"), "reasoning_effort")["currentValue"] == "low"
    assert stored() == {"model": "gpt-b"}
    h.pick("model", "gpt-a")
    h.pick("reasoning_effort", "medium")
    # gpt-b has no medium: its default goes with it, never an effort the model lacks.
    assert option(h.pick("model", "gpt-b"), "reasoning_effort")["currentValue"] == "high"
    assert stored() == {"model": "gpt-b", "effort": "high"}
    prompt(h, "two", "turn-2")
    assert set(h.codex_request("turn/start")["params"]) == {"threadId", "input"}
    # Settings the client set itself come back in the answer, not as updates.
    assert not [u for u in h.updates(THREAD)[1:] if u["sessionUpdate"] == "config_option_update"]
    h.validate()


def test_codex_reporting_settings_changed_elsewhere_updates_the_client() -> None:
    h = H()
    open_session(h)
    before = len(h.updates(THREAD))
    full_access = {
        "approvalPolicy": "never",
        "sandboxPolicy": {"type": "dangerFullAccess"},
        "model": "mock-model",
    }
    everything = {
        "effort": None,
        "approvalsReviewer": "user",
        "cwd": "/work",
        "modelProvider": "mock",
        "collaborationMode": {"mode": "default"},
    }
    settings = {"threadId": THREAD, "threadSettings": {**full_access, **everything}}
    h.codex_notify("thread/settings/updated", settings)
    kinds = [u["sessionUpdate"] for u in h.updates(THREAD)[before:]]
    assert kinds == ["current_mode_update", "config_option_update"]
    assert h.updates(THREAD)[before]["currentModeId"] == "full-access"
    # The same report again changes nothing, so says nothing.
    h.codex_notify("thread/settings/updated", {"threadId": THREAD, "threadSettings": full_access})
    assert len(h.updates(THREAD)) == before + 2
    h.validate()


def test_codex_confirming_a_pick_sends_no_update() -> None:
    h = H()
    open_session(h)
    h.set_mode("read-only")
    before = len(h.updates(THREAD))
    h.codex_notify(
        "thread/settings/updated",
        {
            "threadId": THREAD,
            "threadSettings": {
                "approvalPolicy": "on-request",
                "sandboxPolicy": {"type": "readOnly", "networkAccess": False},
                "model": "mock-model",
            },
        },
    )
    assert len(h.updates(THREAD)) == before


READ_ONLY = {"type": "readOnly", "networkAccess": False}


def _reported(approval: Any, sandbox: Any, model: str, effort: str | None) -> dict[str, Any]:
    settings = {"approvalPolicy": approval, "sandboxPolicy": sandbox, "model": model}
    return {"threadId": THREAD, "threadSettings": {**settings, "effort": effort}}


def test_codex_s_late_report_of_an_earlier_pick_does_not_undo_a_later_one() -> None:
    """Codex reports each stored change after answering it (0.169: a few ms later; 0.171
    coalesces them): a client that picks again at once must not see its pick undone by
    the report of the one before, nor lose the options of the model it picked."""
    h = H(catalog=CATALOG)
    open_session(h)
    h.set_mode("read-only")
    h.pick("model", "gpt-a")
    before = len(h.updates(THREAD))
    # The report of the mode change, after the model change was stored: stale.
    h.codex_notify(
        "thread/settings/updated", _reported("on-request", READ_ONLY, "mock-model", None)
    )
    assert len(h.updates(THREAD)) == before, "nothing changed for the client"
    options = h.pick("reasoning_effort", "low")
    assert option(options, "model")["currentValue"] == "gpt-a"
    assert option(options, "reasoning_effort")["currentValue"] == "low"
    # The reports of the later changes: what the client already has.
    h.codex_notify("thread/settings/updated", _reported("on-request", READ_ONLY, "gpt-a", "medium"))
    h.codex_notify("thread/settings/updated", _reported("on-request", READ_ONLY, "gpt-a", "low"))
    assert len(h.updates(THREAD)) == before
    # A change made elsewhere afterwards still reaches the client.
    h.codex_notify("thread/settings/updated", _reported("on-request", READ_ONLY, "gpt-b", "high"))
    [update] = h.updates(THREAD)[before:]
    assert option(update["configOptions"], "model")["currentValue"] == "gpt-b"
    h.validate()


# -- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "code", "needle"),
    [
        ("session/set_mode", {"sessionId": THREAD, "modeId": "yolo"}, -32602, "yolo"),
        ("session/set_mode", {"sessionId": "nope", "modeId": "auto"}, -32002, "nope"),
        ("session/set_mode", {"sessionId": THREAD}, -32602, "modeId"),
        # The config entry exists only when the configuration matches no preset.
        ("session/set_mode", {"sessionId": THREAD, "modeId": "config"}, -32602, "config"),
        (
            "session/set_config_option",
            {"sessionId": THREAD, "configId": "temperature", "value": "hot"},
            -32602,
            "temperature",
        ),
        (
            "session/set_config_option",
            {"sessionId": THREAD, "configId": "model", "value": "gpt-9"},
            -32602,
            "gpt-9",
        ),
        (
            "session/set_config_option",
            {"sessionId": THREAD, "configId": "mode", "value": True, "type": "boolean"},
            -32602,
            "value id",
        ),
        (
            "session/set_config_option",
            {"sessionId": THREAD, "configId": "mode", "value": 3},
            -32602,
            "value id",
        ),
        (
            "session/set_config_option",
            {"sessionId": "nope", "configId": "model", "value": "mock-model"},
            -32002,
            "nope",
        ),
    ],
)
def test_bad_settings_requests_are_clear_errors_and_change_nothing(
    method: str, params: dict[str, Any], code: int, needle: str
) -> None:
    h = H()
    open_session(h)
    before = len(h.to_client)
    error = h.error(h.client_request(method, params))
    assert error.code == code and needle in error.message
    assert len(h.to_client) == before + 1  # the error, and no update
    prompt(h, "hi")
    assert set(h.codex_request("turn/start")["params"]) == {"threadId", "input"}
    h.validate()


# -- slash commands -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt_blocks", "method", "params"),
    [
        (
            [{"type": "text", "text": "/review"}],
            "review/start",
            {"target": {"type": "uncommittedChanges"}},
        ),
        (
            [{"type": "text", "text": "/review focus on the parser"}],
            "review/start",
            {"target": {"type": "custom", "instructions": "focus on the parser"}},
        ),
        (
            [
                {"type": "text", "text": "/review look at "},
                {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"},
            ],
            "review/start",
            {"target": {"type": "custom", "instructions": "look at\n[@a.py](file:///w/a.py)"}},
        ),
        ([{"type": "text", "text": "/compact "}], "thread/compact/start", {}),
        (
            [{"type": "text", "text": "/shell git status"}],
            "thread/shellCommand",
            {"command": "git status"},
        ),
    ],
)
def test_a_slash_command_starts_its_codex_request(
    prompt_blocks: list[dict[str, Any]], method: str, params: dict[str, Any]
) -> None:
    h = H()
    open_session(h)
    h.client_request("session/prompt", {"sessionId": THREAD, "prompt": prompt_blocks})
    assert h.codex_request(method)["params"] == {"threadId": THREAD, **params}
    assert not h.sent_codex("turn/start")


def test_a_review_prompt_resolves_when_its_turn_ends() -> None:
    h = H()
    open_session(h)
    rid = h.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": "/review"}]}
    )
    review = h.codex_request("review/start")
    h.codex_reply(
        review["id"],
        {
            "turn": {"id": "review-turn", "status": "inProgress", "items": []},
            "reviewThreadId": THREAD,
        },
    )
    # Codex 0.169 names the review's inner turn differently in turn/started.
    h.codex_notify(
        "turn/started",
        {
            "threadId": THREAD,
            "turn": {"id": "inner", "rootTurnId": "review-turn", "status": "inProgress"},
        },
    )
    h.complete_turn(THREAD, "review-turn")
    assert h.result(rid) == {"stopReason": "end_turn"}
    h.validate()


@pytest.mark.parametrize("command", ["/compact", "/shell ls"])
def test_a_command_whose_result_names_no_turn_resolves_at_the_turn_that_follows(
    command: str,
) -> None:
    h = H()
    open_session(h)
    rid = h.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": command}]}
    )
    request = [m for m in h.to_codex if "id" in m and "method" in m][-1]
    h.codex_reply(request["id"], {})
    assert h.client_response(rid) is None
    # Cancel before the turn is known: the interrupt waits for its id.
    h.client_notify("session/cancel", {"sessionId": THREAD})
    assert not h.sent_codex("turn/interrupt")
    h.codex_notify(
        "turn/started", {"threadId": THREAD, "turn": {"id": "t-9", "status": "inProgress"}}
    )
    assert h.codex_request("turn/interrupt")["params"] == {"threadId": THREAD, "turnId": "t-9"}
    h.complete_turn(THREAD, "t-9", status="interrupted")
    assert h.result(rid) == {"stopReason": "cancelled"}
    h.validate()


@pytest.mark.parametrize(
    ("prompt_blocks", "needle"),
    [
        ([{"type": "text", "text": "/compact now please"}], "no arguments"),
        ([{"type": "text", "text": "/shell   "}], "needs a command"),
        (
            [
                {"type": "text", "text": "/review this"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            ],
            "text only",
        ),
    ],
)
def test_a_misused_command_is_a_clear_error_and_the_session_goes_on(
    prompt_blocks: list[dict[str, Any]], needle: str
) -> None:
    h = H()
    open_session(h)
    rid = h.client_request("session/prompt", {"sessionId": THREAD, "prompt": prompt_blocks})
    error = h.error(rid)
    assert error.code == -32602 and needle in error.message
    assert not [
        m
        for m in h.to_codex
        if m.get("method")
        not in ("initialize", "initialized", "thread/start", "model/list", "skills/list")
    ]
    assert prompt(h, "hi") > rid  # no prompt was left in progress
    h.validate()


@pytest.mark.parametrize("text", ["/unknown thing", "/ review", " /review", "/reviewer"])
def test_other_slashes_are_ordinary_prompts(text: str) -> None:
    h = H()
    open_session(h)
    h.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": text}]}
    )
    assert h.codex_request("turn/start")["params"]["input"] == [{"type": "text", "text": text}]


# -- authentication ---------------------------------------------------------------------------------------


def test_initialize_offers_chatgpt_and_an_api_key() -> None:
    h = H()
    rid = h.client_request("initialize", {"protocolVersion": 1})
    methods = h.result(rid)["authMethods"]
    assert [m["id"] for m in methods] == ["chatgpt", "api-key"]
    assert "OPENAI_API_KEY" in methods[1]["description"]
    h.validate()


def test_authenticate_with_the_api_key_from_the_environment() -> None:
    h = H(api_key="sk-test-123")
    rid = h.client_request("authenticate", {"methodId": "api-key"})
    login = h.codex_request("account/login/start")
    assert login["params"] == {"type": "apiKey", "apiKey": "sk-test-123"}
    assert h.client_response(rid) is None  # answered when Codex has the key
    h.codex_reply(login["id"], {"type": "apiKey"})
    assert h.result(rid) == {}
    h.validate()


def test_authenticate_with_an_api_key_but_none_set_is_a_clear_error() -> None:
    h = H()
    error = h.error(h.client_request("authenticate", {"methodId": "api-key"}))
    assert error.code == -32602 and "OPENAI_API_KEY" in error.message
    assert not h.sent_codex("account/login/start")


def test_authenticate_with_an_unknown_method_is_a_clear_error() -> None:
    h = H(api_key="sk-x")
    error = h.error(h.client_request("authenticate", {"methodId": "magic"}))
    assert error.code == -32602 and "magic" in error.message
    assert not h.sent_codex("account/login/start")


def test_codex_refusing_a_login_reaches_the_client() -> None:
    h = H(api_key="sk-x")
    rid = h.client_request("authenticate", {"methodId": "api-key"})
    h.codex_error(h.codex_request("account/login/start")["id"], "login is disabled")
    assert "login is disabled" in h.error(rid).message


def _start_chatgpt(h: H) -> int:
    h.client_request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": {"elicitation": {"url": {}}}}
    )
    rid = h.client_request("authenticate", {"methodId": "chatgpt"})
    h.codex_reply(h.codex_request("account/read")["id"], {"account": None})
    login = h.codex_request("account/login/start")
    assert login["params"] == {"type": "chatgpt"}
    h.codex_reply(
        login["id"],
        {"type": "chatgpt", "loginId": "login-1", "authUrl": "https://auth.example/authorize?x=1"},
    )
    return rid


def test_chatgpt_sign_in_shows_the_page_and_answers_when_codex_is_signed_in() -> None:
    h = H()
    rid = _start_chatgpt(h)
    [ask] = [m for m in h.to_client if m.get("method") == "elicitation/create"]
    assert ask["params"] == {
        "mode": "url",
        "elicitationId": "login-1",
        "url": "https://auth.example/authorize?x=1",
        "message": ask["params"]["message"],
        "requestId": rid,
    }
    h.client_answer(ask["id"], {"action": "accept"})
    assert h.client_response(rid) is None  # the user is signing in
    h.codex_notify(
        "account/login/completed", {"loginId": "login-1", "success": True, "error": None}
    )
    assert h.result(rid) == {}
    [done] = [m for m in h.to_client if m.get("method") == "elicitation/complete"]
    assert done["params"] == {"elicitationId": "login-1"}
    h.validate()


def test_chatgpt_sign_in_that_fails_is_auth_required_with_codex_reason() -> None:
    h = H()
    rid = _start_chatgpt(h)
    ask = next(m for m in h.to_client if m.get("method") == "elicitation/create")
    h.client_answer(ask["id"], {"action": "accept"})
    h.codex_notify(
        "account/login/completed",
        {"loginId": "login-1", "success": False, "error": "state mismatch"},
    )
    error = h.error(rid)
    assert error.code == -32000 and "state mismatch" in error.message
    h.validate()


@pytest.mark.parametrize("answer", [{"action": "decline"}, {"action": "cancel"}, {"bogus": 1}])
def test_chatgpt_sign_in_the_user_declines_is_cancelled_in_codex(answer: dict[str, Any]) -> None:
    h = H()
    rid = _start_chatgpt(h)
    ask = next(m for m in h.to_client if m.get("method") == "elicitation/create")
    h.client_answer(ask["id"], answer)
    assert h.codex_request("account/login/cancel")["params"] == {"loginId": "login-1"}
    assert h.error(rid).code == -32000
    # A late completion for it answers nothing twice.
    h.codex_notify("account/login/completed", {"loginId": "login-1", "success": True})
    assert h.client_response(rid) is not None
    h.validate()


def test_chatgpt_sign_in_without_url_elicitation_gives_the_page_in_the_error() -> None:
    h = H()
    h.client_request("initialize", {"protocolVersion": 1})
    rid = h.client_request("authenticate", {"methodId": "chatgpt"})
    h.codex_reply(h.codex_request("account/read")["id"], {"account": None})
    login = h.codex_request("account/login/start")
    h.codex_reply(
        login["id"], {"type": "chatgpt", "loginId": "l", "authUrl": "https://auth.example/a"}
    )
    error = h.error(rid)
    assert error.code == -32000 and "https://auth.example/a" in error.message
    assert not [m for m in h.to_client if m.get("method") == "elicitation/create"]
    h.validate()


def test_a_sign_in_waiting_when_codex_is_lost_is_answered() -> None:
    h = H()
    rid = _start_chatgpt(h)
    h._collect(h.engine.codex_lost("Codex exited"))
    assert "Codex exited" in h.error(rid).message


# -- auth_required when a turn cannot reach the model ---------------------------------------------------


@pytest.mark.parametrize(
    ("error", "lacking"),
    [
        ({"message": "401", "codexErrorInfo": "unauthorized"}, True),
        (
            {
                "message": "unexpected status 401 Unauthorized",
                "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 401}},
            },
            True,
        ),
        (
            {
                "message": "stream failed",
                "codexErrorInfo": {"responseStreamConnectionFailed": {"httpStatusCode": 401}},
            },
            True,
        ),
        ({"message": "Missing environment variable: `MY_KEY`.", "codexErrorInfo": "other"}, True),
        (
            {
                "message": "busy",
                "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 503}},
            },
            False,
        ),
        ({"message": "stream disconnected", "codexErrorInfo": "other"}, False),
        ({"message": "context", "codexErrorInfo": "contextWindowExceeded"}, False),
    ],
)
def test_a_turn_failing_for_lack_of_credentials_is_auth_required(
    error: dict[str, Any], lacking: bool
) -> None:
    assert lacks_credentials(msgspec.convert(error, TurnError)) is lacking
    h = H()
    open_session(h)
    rid = prompt(h, "hi")
    h.complete_turn(THREAD, status="failed", error=error)
    answer = h.error(rid)
    assert answer.code == (-32000 if lacking else -32603)
    assert answer.message == error["message"]
    assert answer.data["codexErrorInfo"] == error["codexErrorInfo"]
    h.validate()


def test_a_catalog_answer_not_understood_changes_nothing() -> None:
    h = H(catalog=False)
    h.codex_reply(h.codex_request("model/list")["id"], {"data": [{"id": 5}]})
    model = option(open_session(h)["configOptions"], "model")
    assert [o["value"] for o in model["options"]] == ["mock-model"]
    assert [u["sessionUpdate"] for u in h.updates(THREAD)] == ["available_commands_update"]
    prompt(h, "hi")  # the connection goes on
    h.validate()


def test_a_chatgpt_sign_in_codex_did_not_start_is_an_error() -> None:
    h = H()
    rid = h.client_request("authenticate", {"methodId": "chatgpt"})
    h.codex_error(h.codex_request("account/read")["id"], "cannot read the account")
    h.codex_reply(h.codex_request("account/login/start")["id"], {"type": "chatgpt"})
    assert h.error(rid).code == -32603


def test_each_enabled_skill_is_a_command_of_its_own() -> None:
    h = H()
    open_session(h)
    request = h.codex_request("skills/list")
    assert request["params"] == {"cwds": ["/work"]}
    h.codex_reply(
        request["id"],
        skills_list(
            ("deploy", "Ship it", True, "/s/deploy/SKILL.md"),
            ("off", "", False, "/s/off"),
            ("status", "clash", True, "/s/status"),
            ("no spaces please", "", True, "/s/x"),
        ),
    )
    update = h.updates(THREAD)[-1]
    assert update["sessionUpdate"] == "available_commands_update"
    names = [c["name"] for c in update["availableCommands"]]
    assert names[-1] == "deploy" and names.count("status") == 1 and "off" not in names
    assert update["availableCommands"][-1]["input"]["hint"]
    prompt(h, "/deploy to staging")
    assert h.codex_request("turn/start")["params"]["input"] == [
        {"type": "skill", "name": "deploy", "path": "/s/deploy/SKILL.md"},
        {"type": "text", "text": "to staging"},
    ]
    h.validate()


def test_chatgpt_sign_in_when_codex_is_signed_in_already_is_answered_at_once() -> None:
    """Some clients authenticate with the first method on every connection: no new
    browser sign-in when Codex has a ChatGPT account."""
    h = H()
    rid = h.client_request("authenticate", {"methodId": "chatgpt"})
    account = {"type": "chatgpt", "email": "a@example.com", "planType": "plus"}
    h.codex_reply(h.codex_request("account/read")["id"], {"account": account})
    assert h.result(rid) == {}
    assert "account/login/start" not in [m.get("method") for m in h.to_codex]


def test_an_api_key_account_still_signs_in_with_chatgpt_when_asked() -> None:
    h = H()
    h.client_request("authenticate", {"methodId": "chatgpt"})
    h.codex_reply(h.codex_request("account/read")["id"], {"account": {"type": "apiKey"}})
    assert h.codex_request("account/login/start")["params"] == {"type": "chatgpt"}


# -- plan mode and the automatic reviewer ----------------------------------------------------------


def test_plan_mode_is_an_option_set_in_the_thread_and_followed_when_plan_changes_it() -> None:
    h = H()
    result = open_session(h)
    collaboration = option(result["configOptions"], "collaboration_mode")
    assert collaboration["currentValue"] == "default"
    assert [v["value"] for v in collaboration["options"]] == ["default", "plan"]
    rid = h.client_request(
        "session/set_config_option",
        {"sessionId": THREAD, "configId": "collaboration_mode", "value": "plan"},
    )
    assert h.store() == {
        "threadId": THREAD,
        "collaborationMode": {
            "mode": "plan",
            "settings": {
                "model": "mock-model",
                "reasoning_effort": None,
                "developer_instructions": None,
            },
        },
    }
    assert option(h.result(rid)["configOptions"], "collaboration_mode")["currentValue"] == "plan"
    # Another client's change (the TUI's /plan off, on the daemon) is followed.
    h.codex_notify(
        "thread/settings/updated",
        {
            "threadId": THREAD,
            "threadSettings": {"collaborationMode": {"mode": "default", "settings": {}}},
        },
    )
    [update] = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "config_option_update"][-1:]
    assert option(update["configOptions"], "collaboration_mode")["currentValue"] == "default"
    h.validate()


def test_a_model_picked_in_plan_mode_goes_in_the_mode_too() -> None:
    """A collaboration mode's model comes before the thread's: both change."""
    h = H()
    open_session(h)
    h.client_request(
        "session/set_config_option",
        {"sessionId": THREAD, "configId": "collaboration_mode", "value": "plan"},
    )
    h.store()
    rid = h.client_request(
        "session/set_config_option",
        {"sessionId": THREAD, "configId": "model", "value": "mock-model"},
    )
    stored = h.store()
    assert stored["model"] == "mock-model"
    assert stored["collaborationMode"]["mode"] == "plan"
    h.result(rid)


def test_a_resumed_thread_in_plan_mode_opens_in_it() -> None:
    h = H()
    rid = h.client_request(
        "session/resume", {"sessionId": THREAD, "cwd": "/work", "mcpServers": []}
    )
    thread = {"id": THREAD, "cwd": "/work", "preview": "", "status": {"type": "idle"}, "turns": []}
    resumed = {
        "thread": thread,
        "model": "mock-model",
        "approvalPolicy": "on-request",
        "approvalsReviewer": "auto_review",
        "sandbox": WORKSPACE_WRITE,
        "collaborationMode": {"mode": "plan", "settings": {"model": "mock-model"}},
    }
    answered: set[Any] = set()
    while waiting := [
        m for m in h.to_codex if "id" in m and "method" in m and m["id"] not in answered
    ]:
        for m in waiting:
            answered.add(m["id"])
            if m["method"] == "thread/read":
                h.codex_reply(m["id"], {"thread": thread})
            elif m["method"] == "thread/resume":
                h.codex_reply(m["id"], resumed)
            elif m["method"] == "model/list":
                h.codex_reply(m["id"], {"data": []})
            else:
                h.codex_reply(m["id"], {})
    result = h.result(rid)
    assert option(result["configOptions"], "collaboration_mode")["currentValue"] == "plan"
    # Its approvals go to Codex's reviewer: it opens in the Auto-review mode.
    assert result["modes"]["currentModeId"] == "auto-review"
    assert option(result["configOptions"], "mode")["currentValue"] == "auto-review"


def test_auto_review_is_a_mode_where_codex_has_a_reviewer_and_sets_both() -> None:
    h = H()
    result = open_session(h)
    modes = {m["id"]: m for m in result["modes"]["availableModes"]}
    assert list(modes) == ["read-only", "auto", "full-access", "auto-review"]
    assert modes["auto-review"]["name"] == "Auto-review"
    rid = h.client_request("session/set_mode", {"sessionId": THREAD, "modeId": "auto-review"})
    assert h.store() == {
        "threadId": THREAD,
        "approvalPolicy": "on-request",
        "sandboxPolicy": {"type": "workspaceWrite"},
        "approvalsReviewer": "auto_review",
    }
    assert h.result(rid) == {}
    # Back to Default: the user answers again.
    rid = h.client_request("session/set_mode", {"sessionId": THREAD, "modeId": "auto"})
    assert h.store()["approvalsReviewer"] == "user"
    h.result(rid)
    # A prompt before Codex stored a pick carries it, reviewer too.
    h.client_request("session/set_mode", {"sessionId": THREAD, "modeId": "auto-review"})
    prompt(h, "hi")
    assert h.codex_request("turn/start")["params"]["approvalsReviewer"] == "auto_review"
    h.validate()


def test_a_codex_that_names_no_reviewer_has_no_auto_review_mode() -> None:
    h = H()
    rid = h.client_request("session/new", {"cwd": "/work", "mcpServers": []})
    h.codex_reply(h.codex_request("thread/start")["id"], thread_started())
    result = h.result(rid)
    assert "auto-review" not in [m["id"] for m in result["modes"]["availableModes"]]
    h.client_request("session/set_mode", {"sessionId": THREAD, "modeId": "full-access"})
    assert "approvalsReviewer" not in h.store()
