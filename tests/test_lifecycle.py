"""The session lifecycle in the engine alone: load (with its replay), resume, list, close,
fork, and the client's MCP servers reaching Codex."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from msgspec import UNSET, Raw

from bridge.codex.messages import decode_item
from bridge.codex.types import UnknownItem
from bridge.engine.features.sessions import _thread_config as thread_config
from bridge.engine.views import tool_views as tools
from tests.support.acp_schema import ConversationValidator
from tests.support.engine_harness import Harness

THREAD = "019a-thread-old"
CWD = "/repo"

USER_ITEM = {
    "type": "userMessage",
    "id": "user-1",
    "content": [
        {"type": "text", "text": "look at these", "text_elements": []},
        {"type": "text", "text": "[@a.py](file:///repo/a.py)", "text_elements": []},
        {"type": "text", "text": '<context ref="file:///repo/b.txt">\nB\nC\n</context>'},
        {"type": "image", "url": "data:image/png;base64,AAAA", "detail": None},
        {"type": "localImage", "path": "/repo/shot one.png"},
    ],
}
REASONING_ITEM = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": ["first part", "second part"],
    "content": ["raw reasoning, never shown"],
}
ANSWER_ITEM = {"type": "agentMessage", "id": "msg_1", "text": "the answer"}
COMMAND_ITEM = {
    "type": "commandExecution",
    "id": "call_1",
    "command": "/bin/bash -lc 'echo hi'",
    "cwd": CWD,
    "processId": "1",
    "source": "unifiedExecStartup",
    "status": "completed",
    "commandActions": [{"type": "unknown", "command": "echo hi"}],
    "aggregatedOutput": "hi\n",
    "exitCode": 0,
    "durationMs": 5,
}


class Recorder(Harness):
    """A harness that remembers the method of every request the client sent."""

    def __init__(self, **options: Any) -> None:
        self.sent: dict[int, str] = {}
        super().__init__(**options)

    def client_request(self, method: str, params: Any) -> int:
        rid = super().client_request(method, params)
        self.sent[rid] = method
        return rid


def stored_thread(turns: list[list[dict[str, Any]]], **fields: Any) -> dict[str, Any]:
    thread: dict[str, Any] = {
        "id": THREAD,
        "cwd": CWD,
        "preview": "look at these",
        "name": None,
        "updatedAt": 1796014876,
        "createdAt": 1796014800,
        "status": {"type": "notLoaded"},
        "source": "vscode",
        "parentThreadId": None,
        "turns": [
            {"id": f"turn-{n}", "status": "completed", "error": None, "items": items}
            for n, items in enumerate(turns)
        ],
    }
    thread.update(fields)
    return thread


def resume_result(thread_id: str = THREAD) -> dict[str, Any]:
    return {
        "thread": stored_thread([], id=thread_id, status={"type": "idle"}),
        "model": "mock-model",
        "modelProvider": "mock",
        "cwd": CWD,
        "approvalPolicy": "on-request",
        "approvalsReviewer": "user",
        "sandbox": {"type": "workspaceWrite"},
    }


def answer(h: Recorder, method: str, result: Any) -> dict[str, Any]:
    request = h.codex_request(method)
    h.codex_reply(request["id"], result)
    return request


def load(
    h: Recorder, turns: list[list[dict[str, Any]]], *, mcp_servers: list[Any] | None = None
) -> int:
    rid = h.client_request(
        "session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": mcp_servers or []}
    )
    answer(h, "thread/read", {"thread": stored_thread(turns)})
    answer(h, "thread/resume", resume_result())
    return rid


def replayed(h: Recorder, rid: int, session_id: str = THREAD) -> list[dict[str, Any]]:
    """The updates for ``session_id`` sent before the answer to ``rid``: the replay.

    (Other features may send current state, such as commands, after the answer.)"""
    response = h.client_response(rid)
    assert response is not None
    before = h.to_client[: h.to_client.index(response)]
    return [
        m["params"]["update"]
        for m in before
        if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
    ]


def own(result: dict[str, Any]) -> dict[str, Any]:
    """A result without what other features add to every opened session (modes, options)."""
    return {k: v for k, v in result.items() if k not in ("modes", "configOptions")}


def validate_all(h: Recorder, *, unstable: bool = False) -> None:
    """Every message the engine sent the client is valid ACP for the requests it answers."""
    validator = ConversationValidator(unstable=unstable)
    for rid, method in h.sent.items():
        validator.client_sent({"id": rid, "method": method})
    for message in h.to_client:
        validator.agent_sent(message)


def codex_methods(h: Recorder) -> list[str]:
    return [m["method"] for m in h.to_codex if "method" in m and "id" in m]


def initialize(h: Recorder, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    rid = h.client_request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": capabilities or {}}
    )
    capabilities_offered: dict[str, Any] = h.result(rid)["agentCapabilities"]
    return capabilities_offered


# -- capabilities ---------------------------------------------------------------------


def test_initialize_advertises_load_list_resume_close_delete_and_http_mcp_but_not_fork() -> None:
    h = Recorder()
    caps = initialize(h)
    assert caps["loadSession"] is True
    assert caps["mcpCapabilities"] == {"http": True}  # no SSE: Codex has no SSE transport
    assert caps["sessionCapabilities"] == {
        "list": {},
        "resume": {},
        "close": {},
        "delete": {},
        "additionalDirectories": {},
    }
    validate_all(h)


def test_fork_is_advertised_only_to_a_client_that_speaks_unstable_acp() -> None:
    h = Recorder()
    caps = initialize(h, {"subagents": {}})
    assert caps["sessionCapabilities"]["fork"] == {}
    validate_all(h, unstable=True)


# -- session/load ---------------------------------------------------------------------


def test_load_reads_the_thread_then_resumes_it_then_replays_before_the_response() -> None:
    h = Recorder()
    rid = h.client_request("session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    assert codex_methods(h)[-1] == "thread/read"
    read = h.codex_request("thread/read")
    assert read["params"] == {"threadId": THREAD, "includeTurns": True}
    h.codex_reply(read["id"], {"thread": stored_thread([[USER_ITEM, ANSWER_ITEM]])})
    resume = h.codex_request("thread/resume")
    assert resume["params"] == {"threadId": THREAD, "cwd": CWD, "excludeTurns": True}
    assert h.to_client == [], "nothing is replayed before Codex has subscribed us"
    h.codex_reply(resume["id"], resume_result())

    assert own(h.result(rid)) == {}
    response_at = h.to_client.index(h.client_response(rid))  # type: ignore[arg-type]
    assert all(m.get("method") == "session/update" for m in h.to_client[:response_at])
    assert [u["sessionUpdate"] for u in replayed(h, rid)] == ["user_message_chunk"] * 5 + [
        "agent_message_chunk"
    ]
    validate_all(h)


def test_replay_shows_each_item_kind_with_its_item_id_as_message_id() -> None:
    h = Recorder()
    rid = load(h, [[USER_ITEM, REASONING_ITEM, ANSWER_ITEM], [{**ANSWER_ITEM, "id": "msg_2"}]])

    def chunk(kind: str, message_id: str, content: dict[str, Any]) -> dict[str, Any]:
        return {"sessionUpdate": kind, "messageId": message_id, "content": content}

    said = {"type": "text", "text": "the answer"}
    assert replayed(h, rid) == [
        chunk("user_message_chunk", "user-1", {"type": "text", "text": "look at these"}),
        # The link the user attached, not the bridge's text rendering of it.
        chunk(
            "user_message_chunk",
            "user-1",
            {"type": "resource_link", "uri": "file:///repo/a.py", "name": "a.py"},
        ),
        chunk(
            "user_message_chunk",
            "user-1",
            {"type": "resource", "resource": {"uri": "file:///repo/b.txt", "text": "B\nC"}},
        ),
        chunk(
            "user_message_chunk",
            "user-1",
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ),
        chunk(
            "user_message_chunk",
            "user-1",
            {"type": "resource_link", "uri": "file:///repo/shot%20one.png", "name": "shot one.png"},
        ),
        # Summary parts are paragraphs; raw reasoning is never shown (as live).
        chunk("agent_thought_chunk", "rs_1", {"type": "text", "text": "first part\n\nsecond part"}),
        chunk("agent_message_chunk", "msg_1", said),
        chunk("agent_message_chunk", "msg_2", said),
    ]
    validate_all(h)


def test_tool_items_replay_as_the_tools_feature_shows_them_finished() -> None:
    h = Recorder()
    rid = load(h, [[USER_ITEM, COMMAND_ITEM, ANSWER_ITEM]])
    tool_updates = [
        msgspec.json.decode(msgspec.json.encode(u))
        for u in tools.history_updates(decode_item(Raw(msgspec.json.encode(COMMAND_ITEM))))
    ]
    updates = replayed(h, rid)
    assert updates[5 : 5 + len(tool_updates)] == tool_updates
    assert updates[-1]["messageId"] == "msg_1"  # after the tool, in the stored order
    assert len(updates) == 5 + len(tool_updates) + 1
    validate_all(h)


def test_every_non_message_item_goes_to_the_tools_feature_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []

    def fake_history(item: Any, cwd: str = "", terminals: bool = False) -> list[msgspec.Struct]:
        from bridge.acp import types as acp

        kind = item.type if isinstance(item, UnknownItem) else msgspec.to_builtins(item)["type"]
        seen.append(kind)
        return [acp.AgentMessageChunk(content=acp.TextContent(text=f"<{item.id}>"))]

    monkeypatch.setattr(tools, "history_updates", fake_history)
    h = Recorder()
    plan = {"type": "plan", "id": "plan-1", "text": "1. a"}
    rid = load(h, [[USER_ITEM, COMMAND_ITEM, REASONING_ITEM, plan, ANSWER_ITEM]])
    # A proposed plan is what a Plan-mode turn answers: replayed as the plan it is, in its
    # place, not as a tool call.
    assert seen == ["commandExecution"]
    updates = replayed(h, rid)
    said = [u["content"].get("text") if "content" in u else u["sessionUpdate"] for u in updates]
    assert said[5:] == ["<call_1>", "first part\n\nsecond part", "1. a", "the answer"]


def test_a_stored_item_not_understood_is_skipped_and_the_rest_replayed() -> None:
    h = Recorder()
    broken = {"type": "userMessage", "id": "user-2", "content": "not a list"}
    unknown = {"type": "hologram", "id": "h-1"}
    rid = load(h, [[broken, unknown, ANSWER_ITEM]])
    assert [u["messageId"] for u in replayed(h, rid)] == ["msg_1"]
    assert own(h.result(rid)) == {}


def test_a_loaded_session_takes_prompts_and_streams_live_again() -> None:
    h = Recorder()
    load(h, [[USER_ITEM, ANSWER_ITEM]])
    before = len(h.updates(THREAD))
    rid = h.start_prompt(THREAD)
    assert h.codex_request("turn/start")["params"]["threadId"] == THREAD
    h.codex_notify(
        "item/agentMessage/delta",
        {"threadId": THREAD, "turnId": "turn-1", "itemId": "msg_9", "delta": "live"},
    )
    h.complete_turn(THREAD)
    assert h.updates(THREAD)[before:] == [
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "msg_9",
            "content": {"type": "text", "text": "live"},
        }
    ]
    assert h.result(rid) == {"stopReason": "end_turn"}


#: ``thread/tokenUsage/updated`` of the stored thread's first turn: 120 of a 1000-token window.
USAGE = {
    "threadId": THREAD,
    "turnId": "turn-0",
    "tokenUsage": {
        "last": {"totalTokens": 120},
        "total": {"totalTokens": 500},
        "modelContextWindow": 1000,
    },
}


def test_token_usage_codex_sends_after_the_resume_arrives_after_the_response() -> None:
    h = Recorder()
    rid = load(h, [[USER_ITEM, ANSWER_ITEM]])
    h.codex_notify("thread/tokenUsage/updated", USAGE)
    response_at = h.to_client.index(h.client_response(rid))  # type: ignore[arg-type]
    assert h.to_client[-1]["params"]["update"] == {
        "sessionUpdate": "usage_update",
        "used": 120,
        "size": 1000,
    }
    assert len(h.to_client) - 1 > response_at


def test_load_of_a_thread_that_does_not_exist_is_not_found_and_registers_nothing() -> None:
    h = Recorder()
    rid = h.client_request("session/load", {"sessionId": "nope", "cwd": CWD, "mcpServers": []})
    h.codex_error(h.codex_request("thread/read")["id"], "thread not loaded: nope")
    error = h.error(rid)
    assert error.code == -32002 and "nope" in error.message
    assert "never prompted" in error.message  # Codex cannot tell that case apart
    assert error.data == {"sessionId": "nope", "codex": "thread not loaded: nope"}
    assert "thread/resume" not in codex_methods(h)
    assert h.updates() == []
    prompt = h.client_request(
        "session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}
    )
    assert h.error(prompt).code == -32002
    validate_all(h)


def test_a_resume_codex_refuses_is_passed_on_and_the_load_can_be_retried() -> None:
    h = Recorder()
    rid = h.client_request("session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    answer(h, "thread/read", {"thread": stored_thread([[ANSWER_ITEM]])})
    message = f"thread {THREAD} already has an active writer"
    h.codex_error(h.codex_request("thread/resume")["id"], message)
    error = h.error(rid)
    assert error.code == -32603 and message in error.message
    assert h.updates() == [] and THREAD not in h.engine.threads
    again = load(h, [[ANSWER_ITEM]])
    assert own(h.result(again)) == {}


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_opening_a_session_already_open_is_a_clear_error_and_changes_nothing(method: str) -> None:
    h = Recorder()
    sid = h.new_session(THREAD, CWD)
    sent = len(h.to_codex)
    rid = h.client_request(method, {"sessionId": sid, "cwd": CWD, "mcpServers": []})
    error = h.error(rid)
    assert error.code == -32600 and "already open" in error.message
    assert len(h.to_codex) == sent
    h.start_prompt(sid)  # the open session is untouched


def test_a_second_load_while_the_first_is_in_flight_is_refused() -> None:
    h = Recorder()
    first = h.client_request("session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    second = h.client_request("session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    assert "already open" in h.error(second).message
    answer(h, "thread/read", {"thread": stored_thread([[ANSWER_ITEM]])})
    answer(h, "thread/resume", resume_result())
    assert own(h.result(first)) == {}
    assert codex_methods(h).count("thread/read") == 1


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"cwd": CWD, "mcpServers": []}, "sessionId"),
        ({"sessionId": THREAD, "cwd": "relative", "mcpServers": []}, "absolute"),
        ({"sessionId": THREAD, "cwd": CWD, "mcpServers": [{"name": "x"}]}, "mcpServers[0]"),
    ],
)
def test_invalid_load_params_are_named_and_nothing_reaches_codex(
    params: dict[str, Any], needle: str
) -> None:
    h = Recorder()
    sent = len(h.to_codex)
    rid = h.client_request("session/load", params)
    error = h.error(rid)
    assert error.code == -32602 and needle in error.message
    assert len(h.to_codex) == sent
    # Nothing was claimed: a good load of the same id still works.
    assert own(h.result(load(h, []))) == {}


def test_session_opened_hooks_run_for_load_resume_and_fork_as_for_new() -> None:
    h = Recorder()
    opened: list[tuple[str, str]] = []

    def hook(record: Any, response: Any, thread: Any) -> None:
        opened.append((record.id, thread.thread.id))
        response.modes = {
            "currentModeId": "auto",
            "availableModes": [{"id": "auto", "name": "Auto"}],
        }

    h.engine.settings.session_opened = hook  # type: ignore[method-assign]
    initialize(h, {"subagents": {}})
    rid = load(h, [])
    assert h.result(rid)["modes"]["currentModeId"] == "auto"
    resume = h.client_request("session/resume", {"sessionId": "t-2", "cwd": CWD})
    answer(h, "thread/read", {"thread": stored_thread([], id="t-2")})
    answer(h, "thread/resume", resume_result("t-2"))
    fork = h.client_request("session/fork", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    answer(h, "thread/read", {"thread": stored_thread([])})
    answer(h, "thread/fork", resume_result("t-fork"))
    assert opened == [(THREAD, THREAD), ("t-2", "t-2"), ("t-fork", "t-fork")]
    assert h.result(resume)["modes"]["currentModeId"] == "auto"
    assert h.result(fork)["modes"]["currentModeId"] == "auto"
    validate_all(h, unstable=True)


# -- session/resume -------------------------------------------------------------------


def test_resume_subscribes_without_replaying_history() -> None:
    h = Recorder()
    rid = h.client_request("session/resume", {"sessionId": THREAD, "cwd": CWD})
    read = h.codex_request("thread/read")
    assert read["params"] == {"threadId": THREAD}  # no turns: nothing to replay
    h.codex_reply(read["id"], {"thread": stored_thread([])})
    assert h.codex_request("thread/resume")["params"] == {
        "threadId": THREAD,
        "cwd": CWD,
        "excludeTurns": True,
    }
    h.codex_reply(h.codex_request("thread/resume")["id"], resume_result())
    assert own(h.result(rid)) == {}
    assert replayed(h, rid) == []
    assert THREAD in h.engine.threads
    validate_all(h)


#: Codex 0.169's -32601 for the turns of a thread it holds and never stored (never prompted).
NO_TURNS = "list_turns is not supported yet"
#: What ``config/read`` says of the policies (as config.toml writes them).
CONFIG = {
    "model": "mock-model",
    "approval_policy": "on-request",
    "sandbox_mode": "workspace-write",
    "sandbox_workspace_write": None,
}


def unstored_thread() -> dict[str, Any]:
    """A thread never prompted, as ``thread/read`` (without turns) shows it."""
    return stored_thread(
        [], preview="", status={"type": "idle"}, model="m-1", reasoningEffort="high"
    )


def open_unstored(h: Recorder, method: str) -> int:
    """``method`` of a thread this Codex holds but never stored, nobody subscribed to it:
    Codex's answers as 0.169 gives them (see tests/test_e2e_unprompted_sessions.py)."""
    rid = h.client_request(method, {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    if method == "session/load":
        # The read with turns writes the rollout, then fails: there are none.
        h.codex_error(h.codex_request("thread/read")["id"], NO_TURNS, code=-32601)
    answer(h, "thread/read", {"thread": unstored_thread()})
    assert h.codex_request("thread/read")["params"] == {"threadId": THREAD}
    if method == "session/resume":
        # Not yet written: the resume finds nothing; the read with turns writes it.
        h.codex_error(
            h.codex_request("thread/resume")["id"], f"no rollout found for thread id {THREAD}"
        )
        read = h.codex_request("thread/read")
        assert read["params"] == {"threadId": THREAD, "includeTurns": True}
        h.codex_error(read["id"], NO_TURNS, code=-32601)
    # The resume subscribes this connection, then fails: no turns to list.
    h.codex_error(h.codex_request("thread/resume")["id"], NO_TURNS, code=-32601)
    config = h.codex_request("config/read")
    assert config["params"] == {"cwd": CWD}
    h.codex_reply(config["id"], {"config": CONFIG, "origins": {}})
    if method == "session/load":
        # HeldMessage by this Codex: a load shows the commands it still runs (none here).
        listed = h.codex_request("thread/backgroundTerminals/list")
        h.codex_reply(listed["id"], {"data": [], "nextCursor": None})
    return rid


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_a_thread_codex_holds_but_never_stored_opens_with_its_settings_and_no_history(
    method: str,
) -> None:
    h = Recorder()
    rid = open_unstored(h, method)
    result = h.result(rid)
    assert replayed(h, rid) == []
    assert result["modes"]["currentModeId"] == "auto"  # on-request + workspace-write
    options = {o["id"]: o["currentValue"] for o in result["configOptions"]}
    assert options["model"] == "m-1" and options["reasoning_effort"] == "high"
    assert h.engine.threads.session(THREAD) is not None
    # It takes prompts as any session does.
    h.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": "x"}]}
    )
    assert h.codex_request("turn/start")["params"]["threadId"] == THREAD
    validate_all(h)


def test_a_thread_codex_cannot_resume_even_once_written_is_not_found() -> None:
    h = Recorder()
    rid = h.client_request("session/resume", {"sessionId": THREAD, "cwd": CWD})
    answer(h, "thread/read", {"thread": unstored_thread()})
    no_rollout = f"no rollout found for thread id {THREAD}"
    h.codex_error(h.codex_request("thread/resume")["id"], no_rollout)
    h.codex_error(h.codex_request("thread/read")["id"], NO_TURNS, code=-32601)
    h.codex_error(h.codex_request("thread/resume")["id"], no_rollout)
    error = h.error(rid)
    assert error.code == -32002 and THREAD in error.message
    assert codex_methods(h).count("thread/resume") == 2  # no loop
    assert THREAD not in h.engine.threads
    validate_all(h)


def test_config_without_policies_opens_the_session_with_no_modes() -> None:
    h = Recorder()
    rid = h.client_request("session/resume", {"sessionId": THREAD, "cwd": CWD})
    answer(h, "thread/read", {"thread": unstored_thread()})
    h.codex_error(h.codex_request("thread/resume")["id"], NO_TURNS, code=-32601)
    h.codex_error(h.codex_request("config/read")["id"], "config/read refused")
    assert "modes" not in h.result(rid)
    assert h.engine.threads.session(THREAD) is not None
    validate_all(h)


@pytest.mark.parametrize(
    ("config", "approval", "sandbox"),
    [
        (
            CONFIG,
            "on-request",
            {
                "type": "workspaceWrite",
                "writableRoots": [],
                "networkAccess": False,
                "excludeTmpdirEnvVar": False,
                "excludeSlashTmp": False,
            },
        ),
        (
            {
                **CONFIG,
                "sandbox_workspace_write": {"network_access": True},
                "sandbox_workspace_write.writable_roots": ["/x"],
                "approval_policy": "never",
            },
            "never",
            {
                "type": "workspaceWrite",
                "writableRoots": ["/x"],
                "networkAccess": True,
                "excludeTmpdirEnvVar": False,
                "excludeSlashTmp": False,
            },
        ),
        (
            {"approval_policy": "untrusted", "sandbox_mode": "read-only"},
            "untrusted",
            {"type": "readOnly"},
        ),
        ({"approval_policy": None, "sandbox_mode": "read-only"}, UNSET, UNSET),
        ({"approval_policy": "never", "sandbox_mode": "elsewhere"}, UNSET, UNSET),
    ],
)
def test_thread_policies_are_what_thread_start_reports_for_a_configuration(
    config: dict[str, Any], approval: Any, sandbox: Any
) -> None:
    assert thread_config.thread_policies(config) == (approval, sandbox)


def test_resume_of_a_thread_that_does_not_exist_is_not_found() -> None:
    h = Recorder()
    rid = h.client_request("session/resume", {"sessionId": "gone", "cwd": CWD})
    h.codex_error(h.codex_request("thread/read")["id"], "thread not loaded: gone")
    assert h.error(rid).code == -32002
    assert "thread/resume" not in codex_methods(h) and "gone" not in h.engine.threads


#: Codex 0.169's ``thread/read`` refusals: a well-formed id it has no stored thread for
#: (never made, or made by an earlier Codex and never prompted), and an id that is no UUID.
NOT_LOADED = "thread not loaded: 01a22cb6-4f88-72f0-adc3-28f14e718255"
INVALID = (
    "invalid thread id: invalid character: expected an optional prefix of `urn:uuid:` "
    "followed by [0-9a-fA-F-], found `n` at 1"
)


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
@pytest.mark.parametrize(
    ("session_id", "codex", "says", "not_says"),
    [
        (
            "01a22cb6-4f88-72f0-adc3-28f14e718255",
            NOT_LOADED,
            "is stored only once it has been prompted, so one never prompted does not survive a restart",
            "is not a Codex thread id",
        ),
        ("not-a-thread-id", INVALID, "not-a-thread-id is not a Codex thread id", "prompted"),
    ],
)
def test_a_refused_read_says_why_the_session_is_not_found(
    method: str, session_id: str, codex: str, says: str, not_says: str
) -> None:
    h = Recorder()
    rid = h.client_request(method, {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
    h.codex_error(h.codex_request("thread/read")["id"], codex)
    error = h.error(rid)
    assert error.code == -32002
    assert error.message.startswith(f"Session not found: {session_id}")
    assert says in error.message and not_says not in error.message
    assert error.data == {"sessionId": session_id, "codex": codex}
    assert "thread/resume" not in codex_methods(h) and session_id not in h.engine.threads
    validate_all(h)


# -- session/list ---------------------------------------------------------------------


def listed_thread(thread_id: str, **fields: Any) -> dict[str, Any]:
    thread = stored_thread([], id=thread_id)
    thread.update(fields)
    return thread


def test_list_shows_root_threads_with_title_cwd_and_iso_update_time() -> None:
    h = Recorder()
    rid = h.client_request("session/list", {})
    request = h.codex_request("thread/list")
    assert request["params"] == {"sortKey": "updated_at"}
    child_source = {"subAgent": {"thread_spawn": {"parent_thread_id": "a", "depth": 1}}}
    page = {
        "data": [
            listed_thread("a", name="Fix the parser", preview="@@ words 3"),
            listed_thread("b", preview="  first line\n  second\tline ", updatedAt=0),
            listed_thread("c", preview="", cwd="/other"),
            listed_thread("child", parentThreadId="a", source=child_source),
            listed_thread("child-2", source=child_source),
        ],
        "nextCursor": "2026-11-30T05:03:15Z|b",
        "backwardsCursor": None,
    }
    h.codex_reply(request["id"], page)
    assert h.result(rid) == {
        "sessions": [
            {
                "sessionId": "a",
                "cwd": CWD,
                "title": "Fix the parser",
                "updatedAt": "2026-11-30T05:01:16Z",
            },
            {
                "sessionId": "b",
                "cwd": CWD,
                "title": "first line second line",
                "updatedAt": "1970-01-01T00:00:00Z",
            },
            {"sessionId": "c", "cwd": "/other", "updatedAt": "2026-11-30T05:01:16Z"},
        ],
        "nextCursor": "2026-11-30T05:03:15Z|b",
    }
    validate_all(h)


def test_list_passes_cursor_and_cwd_through_and_a_last_page_has_no_cursor() -> None:
    h = Recorder()
    rid = h.client_request("session/list", {"cwd": "/w", "cursor": "2026|x"})
    request = h.codex_request("thread/list")
    assert request["params"] == {"cursor": "2026|x", "cwd": "/w", "sortKey": "updated_at"}
    h.codex_reply(request["id"], {"data": [], "nextCursor": None})
    assert h.result(rid) == {"sessions": []}


def test_list_with_a_bad_cursor_is_invalid_params() -> None:
    h = Recorder()
    rid = h.client_request("session/list", {"cursor": "garbage"})
    h.codex_error(h.codex_request("thread/list")["id"], "invalid cursor: garbage")
    error = h.error(rid)
    assert error.code == -32602 and "garbage" in error.message


def test_list_with_a_relative_cwd_is_invalid_params_and_asks_codex_nothing() -> None:
    h = Recorder()
    sent = len(h.to_codex)
    rid = h.client_request("session/list", {"cwd": "repo"})
    assert h.error(rid).code == -32602
    assert len(h.to_codex) == sent


# -- session/close --------------------------------------------------------------------


def test_close_of_an_idle_session_unsubscribes_and_forgets_it() -> None:
    h = Recorder()
    sid = h.new_session()
    rid = h.client_request("session/close", {"sessionId": sid})
    unsubscribe = h.codex_request("thread/unsubscribe")
    assert unsubscribe["params"] == {"threadId": sid}
    assert sid not in h.engine.threads and h.engine.threads.forgotten(sid)
    assert h.client_response(rid) is None  # answered once Codex has unsubscribed us
    h.codex_reply(unsubscribe["id"], {"status": "unsubscribed"})
    assert own(h.result(rid)) == {}
    prompt = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
    )
    assert h.error(prompt).code == -32002
    # Codex's later events for the thread are ignored.
    before = len(h.to_client)
    h.codex_notify(
        "item/agentMessage/delta", {"threadId": sid, "turnId": "t", "itemId": "m", "delta": "x"}
    )
    assert len(h.to_client) == before
    validate_all(h)


def test_close_of_an_unknown_session_is_not_found_and_changes_nothing() -> None:
    h = Recorder()
    sid = h.new_session()
    sent = len(h.to_codex)
    rid = h.client_request("session/close", {"sessionId": "nope"})
    assert h.error(rid).code == -32002
    assert len(h.to_codex) == sent and sid in h.engine.threads


def test_close_while_a_prompt_runs_cancels_it_and_closes_once_codex_confirms() -> None:
    h = Recorder()
    sid = h.new_session()
    prompt = h.start_prompt(sid)
    rid = h.client_request("session/close", {"sessionId": sid})
    interrupt = h.codex_request("turn/interrupt")
    assert interrupt["params"] == {"threadId": sid, "turnId": "turn-1"}
    assert "thread/unsubscribe" not in codex_methods(h)
    assert h.client_response(prompt) is None and h.client_response(rid) is None
    # Still streaming until Codex stops: the client sees it (the session is not gone yet).
    h.codex_notify(
        "item/agentMessage/delta",
        {"threadId": sid, "turnId": "turn-1", "itemId": "m", "delta": "late"},
    )
    h.codex_reply(interrupt["id"], {})
    h.complete_turn(sid, status="interrupted")
    assert h.result(prompt) == {"stopReason": "cancelled"}
    h.codex_reply(h.codex_request("thread/unsubscribe")["id"], {"status": "unsubscribed"})
    assert own(h.result(rid)) == {}
    answered = [m["id"] for m in h.to_client if "id" in m and "method" not in m]
    assert answered.index(prompt) < answered.index(rid)
    validate_all(h)


def closed_while_prompting() -> tuple[Recorder, str, int, int]:
    """A session whose prompt is sent and, before Codex answered ``turn/start``, closed; the
    ids of the prompt and of the close."""
    h = Recorder()
    sid = h.new_session()
    prompt = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
    )
    return h, sid, prompt, h.client_request("session/close", {"sessionId": sid})


def test_close_before_codex_named_the_turn_interrupts_it_as_soon_as_it_does() -> None:
    h, sid, prompt, rid = closed_while_prompting()
    assert "turn/interrupt" not in codex_methods(h)
    h.codex_reply(h.codex_request("turn/start")["id"], {"turn": {"id": "t9", "status": "x"}})
    assert h.codex_request("turn/interrupt")["params"]["turnId"] == "t9"
    h.complete_turn(sid, "t9", status="interrupted")
    h.codex_reply(h.codex_request("thread/unsubscribe")["id"], {"status": "unsubscribed"})
    assert h.result(prompt) == {"stopReason": "cancelled"}
    assert own(h.result(rid)) == {}


def test_close_while_codex_refuses_the_turn_still_closes() -> None:
    h, _, prompt, rid = closed_while_prompting()
    h.codex_error(h.codex_request("turn/start")["id"], "no")
    assert h.error(prompt).code == -32603
    h.codex_reply(h.codex_request("thread/unsubscribe")["id"], {"status": "unsubscribed"})
    assert own(h.result(rid)) == {}


def test_two_closes_of_one_session_are_answered_together() -> None:
    h = Recorder()
    sid = h.new_session()
    h.start_prompt(sid)
    first = h.client_request("session/close", {"sessionId": sid})
    second = h.client_request("session/close", {"sessionId": sid})
    assert codex_methods(h).count("turn/interrupt") == 1
    h.complete_turn(sid, status="interrupted")
    h.codex_reply(h.codex_request("thread/unsubscribe")["id"], {"status": "notSubscribed"})
    assert h.result(first) == {} and h.result(second) == {}
    assert codex_methods(h).count("thread/unsubscribe") == 1


def test_losing_codex_while_closing_answers_the_close_with_the_reason() -> None:
    h = Recorder()
    sid = h.new_session()
    h.start_prompt(sid)
    rid = h.client_request("session/close", {"sessionId": sid})
    h._collect(h.engine.codex_lost("Codex app-server exited with status 9"))
    assert "status 9" in h.error(rid).message


# -- session/fork ---------------------------------------------------------------------


def test_fork_without_the_unstable_capability_is_method_not_found() -> None:
    h = Recorder()
    initialize(h)
    sent = len(h.to_codex)
    rid = h.client_request("session/fork", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    assert h.error(rid).code == -32601
    assert len(h.to_codex) == sent


def test_fork_opens_the_new_thread_as_a_new_session() -> None:
    h = Recorder()
    initialize(h, {"subagents": {}})
    rid = h.client_request("session/fork", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    answer(h, "thread/read", {"thread": stored_thread([])})
    fork = h.codex_request("thread/fork")
    assert fork["params"] == {"threadId": THREAD, "cwd": CWD, "excludeTurns": True}
    h.codex_reply(fork["id"], resume_result("t-fork"))
    assert own(h.result(rid)) == {"sessionId": "t-fork"}
    assert replayed(h, rid, "t-fork") == []  # a fork does not replay
    h.start_prompt("t-fork")
    assert h.codex_request("turn/start")["params"]["threadId"] == "t-fork"
    validate_all(h, unstable=True)


def test_fork_of_a_thread_that_does_not_exist_is_not_found() -> None:
    h = Recorder()
    initialize(h, {"subagents": {}})
    rid = h.client_request("session/fork", {"sessionId": "nope", "cwd": CWD, "mcpServers": []})
    h.codex_error(h.codex_request("thread/read")["id"], "thread not loaded: nope")
    assert h.error(rid).code == -32002
    assert "thread/fork" not in codex_methods(h)


# -- MCP servers ------------------------------------------------------------------------

STDIO = {
    "name": "files",
    "command": "/usr/bin/mcp-files",
    "args": ["--root", "/repo"],
    "env": [{"name": "TOKEN_PATH", "value": "/tmp/t"}],
}
HTTP = {
    "type": "http",
    "name": "web search",
    "url": "http://127.0.0.1:9/mcp",
    "headers": [{"name": "X-Api", "value": "v"}],
}
SSE = {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}


def test_session_new_mcp_servers_reach_thread_start_as_codex_config() -> None:
    h = Recorder(thread_config={"model": "o3"})
    h.client_request("session/new", {"cwd": CWD, "mcpServers": [STDIO, HTTP, SSE]})
    assert h.codex_request("thread/start")["params"]["config"] == {
        "model": "o3",
        "mcp_servers.files": {
            "command": "/usr/bin/mcp-files",
            "args": ["--root", "/repo"],
            "env": {"TOKEN_PATH": "/tmp/t"},
        },
        # Codex refuses spaces in server names.
        "mcp_servers.web_search": {"url": "http://127.0.0.1:9/mcp", "http_headers": {"X-Api": "v"}},
        # No SSE: Codex has no such transport, and the bridge does not advertise it.
    }


def test_mcp_server_names_codex_would_refuse_or_split_are_made_safe_and_distinct() -> None:
    h = Recorder()
    servers = [
        {**STDIO, "name": "my.server"},
        {**STDIO, "name": "my server"},
        {**STDIO, "name": "ünïcode"},
        {**STDIO, "name": "..."},
    ]
    h.client_request("session/new", {"cwd": CWD, "mcpServers": servers})
    assert list(h.codex_request("thread/start")["params"]["config"]) == [
        "mcp_servers.my_server",
        "mcp_servers.my_server_2",
        "mcp_servers.n_code",
        "mcp_servers.mcp",
    ]


def test_session_new_without_mcp_servers_sends_no_config() -> None:
    h = Recorder()
    h.client_request("session/new", {"cwd": CWD, "mcpServers": [SSE]})
    assert "config" not in h.codex_request("thread/start")["params"]


def test_a_malformed_mcp_server_is_invalid_params_and_starts_no_thread() -> None:
    h = Recorder()
    rid = h.client_request("session/new", {"cwd": CWD, "mcpServers": [STDIO, {"name": "x"}]})
    error = h.error(rid)
    assert error.code == -32602 and "mcpServers[1]" in error.message
    assert "thread/start" not in codex_methods(h)


@pytest.mark.parametrize("method", ["session/load", "session/resume", "session/fork"])
def test_load_resume_and_fork_pass_mcp_servers_and_overrides_to_codex(method: str) -> None:
    h = Recorder(thread_config={"model": "o3"})
    initialize(h, {"subagents": {}})
    h.client_request(method, {"sessionId": THREAD, "cwd": CWD, "mcpServers": [STDIO]})
    answer(h, "thread/read", {"thread": stored_thread([])})
    codex_method = "thread/fork" if method == "session/fork" else "thread/resume"
    assert h.codex_request(codex_method)["params"]["config"] == {
        "model": "o3",
        "mcp_servers.files": {
            "command": "/usr/bin/mcp-files",
            "args": ["--root", "/repo"],
            "env": {"TOKEN_PATH": "/tmp/t"},
        },
    }


def test_a_session_never_prompted_says_it_did_not_survive_a_restart_of_codex() -> None:
    """The shell brought Codex back; the new Codex never knew the thread (it was never
    prompted, so never stored): its waiting prompt, and the next, say exactly that."""
    h = Recorder()
    sid = h.new_session()
    h._collect(h.engine.codex_lost("Codex app-server exited with status 137", retrying=True))
    waiting = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
    )
    h._collect(h.engine.codex_restarted())
    h.codex_reply(h.codex_request("initialize")["id"], {"userAgent": "codex/0.169.0"})
    h.codex_error(h.codex_request("thread/resume")["id"], f"no rollout found for thread id {sid}")
    # Perhaps the same Codex, holding it unwritten: read (which writes it), then resumed again.
    h.codex_error(h.codex_request("thread/read")["id"], f"thread not loaded: {sid}")
    h.codex_error(h.codex_request("thread/resume")["id"], f"no rollout found for thread id {sid}")
    # The waiting prompt never went to Codex: it waited for the resume, and hears why.
    assert "turn/start" not in codex_methods(h)
    later = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "y"}]}
    )
    for rid in (waiting, later):
        error = h.error(rid)
        assert error.code == -32002 and sid in error.message
        assert "does not survive a restart of Codex" in error.message
    validate_all(h)


def test_a_load_whose_plain_read_fails_too_is_not_found_without_a_loop() -> None:
    h = Recorder()
    rid = h.client_request("session/load", {"sessionId": THREAD, "cwd": CWD, "mcpServers": []})
    h.codex_error(h.codex_request("thread/read")["id"], NO_TURNS, code=-32601)
    h.codex_error(h.codex_request("thread/read")["id"], NO_TURNS, code=-32601)
    assert h.error(rid).code == -32002
    assert codex_methods(h).count("thread/read") == 2 and "thread/resume" not in codex_methods(h)
    assert THREAD not in h.engine.threads
    validate_all(h)


def test_a_session_never_prompted_is_resumed_on_the_same_codex_reconnected() -> None:
    """The connection to a shared Codex (the daemon's) dropped and came back: Codex still
    holds the thread, unwritten; recovery writes it and subscribes as a resume does."""
    h = Recorder()
    sid = h.new_session()
    h._collect(h.engine.codex_lost("connection to Codex lost", retrying=True))
    h._collect(h.engine.codex_restarted())
    h.codex_reply(h.codex_request("initialize")["id"], {"userAgent": "codex/0.169.0"})
    h.codex_error(h.codex_request("thread/resume")["id"], f"no rollout found for thread id {sid}")
    read = h.codex_request("thread/read")
    assert read["params"] == {"threadId": sid, "includeTurns": True}
    h.codex_error(read["id"], NO_TURNS, code=-32601)
    h.codex_error(h.codex_request("thread/resume")["id"], NO_TURNS, code=-32601)
    assert codex_methods(h).count("thread/resume") == 2
    rid = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
    )
    _answered_after_the_resume(h, sid, rid)
    validate_all(h)


def test_a_prompt_sent_as_codex_comes_back_waits_for_its_sessions_resume() -> None:
    """A turn started before this connection subscribes to the thread would stream nowhere
    (Codex sends a thread's events only to its subscribers): the prompt waits for the resume,
    even when the resume takes a second try (a session never prompted)."""
    h = Recorder()
    sid = h.new_session()
    h._collect(h.engine.codex_lost("connection to Codex lost", retrying=True))
    h._collect(h.engine.codex_restarted())
    h.codex_reply(h.codex_request("initialize")["id"], {"userAgent": "codex/0.169.0"})
    rid = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
    )
    h.codex_error(h.codex_request("thread/resume")["id"], f"no rollout found for thread id {sid}")
    h.codex_error(h.codex_request("thread/read")["id"], NO_TURNS, code=-32601)
    assert "turn/start" not in codex_methods(h)
    assert h.client_response(rid) is None
    h.codex_error(h.codex_request("thread/resume")["id"], NO_TURNS, code=-32601)
    _answered_after_the_resume(h, sid, rid)
    validate_all(h)


def _answered_after_the_resume(h: Recorder, sid: str, rid: int) -> None:
    start = h.codex_request("turn/start")
    h.codex_reply(start["id"], {"turn": {"id": "turn-1", "status": "inProgress", "items": []}})
    h.complete_turn(sid)
    assert h.result(rid) == {"stopReason": "end_turn"}
