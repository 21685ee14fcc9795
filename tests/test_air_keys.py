"""AIR's presentation keys (``phase``, ``commandAction``, ``skillPath``), its file-change
report in ACP v2, and async tasks shown again when a session is reopened: the engine's
shapes, as the AIR document of the TypeScript Codex adapter gives them."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.engine.features.prompts.file_reports import UNCERTAINTY
from tests.support.air import declaring
from tests.support.engine_harness import Harness, skills_list
from tests.test_v2 import V2

THREAD = "thread-1"


def air(**fields: Any) -> dict[str, Any]:
    return {"jetbrains": {"air": {"version": 1, **fields}}}


def v1(capabilities: dict[str, Any] | None) -> Harness:
    h = Harness()
    params: dict[str, Any] = {"protocolVersion": 1}
    if capabilities is not None:
        params["clientCapabilities"] = capabilities
    h.client_request("initialize", params)
    return h


class AirV2(V2):
    """A v2 client declaring ``capabilities`` (its ``_meta``) at ``initialize``."""

    def __init__(self, capabilities: dict[str, Any]) -> None:
        Harness.__init__(self)
        rid = self.client_request(
            "initialize",
            {
                "protocolVersion": 2,
                "info": {"name": "test", "version": "1"},
                "capabilities": capabilities,
            },
        )
        self.init = self.result(rid)


def answer(h: Harness, item_id: str, phase: str | None, deltas: list[str], text: str) -> None:
    """Codex's answer ``item_id`` of turn ``turn-1``: started (with ``phase``), streamed as
    ``deltas`` (none: it arrives whole), completed with ``text``."""
    item: dict[str, Any] = {"type": "agentMessage", "id": item_id, "text": "", "phase": phase}
    h.turn_notify("item/started", THREAD, item=item)
    for delta in deltas:
        h.turn_notify("item/agentMessage/delta", THREAD, itemId=item_id, delta=delta)
    h.turn_notify("item/completed", THREAD, item={**item, "text": text})


def chunks(h: Harness) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in u.items() if k != "sessionUpdate"}
        for u in h.updates(THREAD)
        if u["sessionUpdate"] == "agent_message_chunk"
    ]


# -- phase -----------------------------------------------------------------------------------


def test_an_air_client_gets_each_answers_phase_on_its_chunks_streamed_or_whole() -> None:
    h = v1(declaring())
    h.new_session(THREAD)
    h.start_prompt(THREAD)
    answer(h, "m1", "commentary", ["Looking ", "around"], "Looking around")
    answer(h, "m2", "final_answer", [], "Done.")
    answer(h, "m3", None, ["plain"], "plain")

    def text(value: str) -> dict[str, Any]:
        return {"type": "text", "text": value}

    assert chunks(h) == [
        {"content": text("Looking "), "messageId": "m1", "_meta": air(phase="commentary")},
        {"content": text("around"), "messageId": "m1", "_meta": air(phase="commentary")},
        {"content": text("Done."), "messageId": "m2", "_meta": air(phase="final_answer")},
        {"content": text("plain"), "messageId": "m3"},
    ]


@pytest.mark.parametrize("capabilities", [None, {"_meta": {"jetbrains": {"air": {}}}}])
def test_a_client_that_is_not_air_gets_no_phase(capabilities: dict[str, Any] | None) -> None:
    h = v1(capabilities)
    h.new_session(THREAD)
    h.start_prompt(THREAD)
    answer(h, "m1", "commentary", ["Looking"], "Looking")
    answer(h, "m2", "final_answer", [], "Done.")
    assert [c.get("_meta") for c in chunks(h)] == [None, None]


@pytest.mark.parametrize(("capabilities", "phased"), [(declaring(), True), (None, False)])
def test_a_loaded_history_shows_each_answers_phase_to_an_air_client(
    capabilities: dict[str, Any] | None, phased: bool
) -> None:
    h = v1(capabilities)
    stored = [
        {"type": "agentMessage", "id": "m1", "text": "Looking", "phase": "commentary"},
        {"type": "agentMessage", "id": "m2", "text": "Done.", "phase": "final_answer"},
        {"type": "agentMessage", "id": "m3", "text": "plain"},
    ]
    reopen(h, "session/load", [], stored)
    metas = [c.get("_meta") for c in chunks(h)]
    if phased:
        assert metas == [air(phase="commentary"), air(phase="final_answer"), None]
    else:
        assert metas == [None, None, None]


# -- commandAction, skillPath ----------------------------------------------------------------


def commands_offered(h: Harness) -> list[dict[str, Any]]:
    """A session with settings opened: the commands of its last ``available_commands_update``,
    after Codex listed one skill."""
    h.thread_started("/work", "mock", {"type": "readOnly"})
    listed = h.codex_request("skills/list")
    h.codex_reply(listed["id"], skills_list(("deploy", "Ship it", True, "/s/deploy/SKILL.md")))
    updates = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "available_commands_update"]
    assert len(updates) == 2  # the commands, then with the skill
    commands: list[dict[str, Any]] = updates[-1]["availableCommands"]
    assert updates[0]["availableCommands"] == commands[:-1]
    return commands


def test_an_air_client_is_told_goals_command_action_and_each_skills_path() -> None:
    h = v1(declaring())
    metas = {c["name"]: c.get("_meta") for c in commands_offered(h)}
    assert metas.pop("goal") == air(commandAction={"kind": "prefixPrompt", "presentation": "state"})
    assert metas.pop("deploy") == air(skillPath="/s/deploy/SKILL.md")
    assert set(metas.values()) == {None}


def test_acp_v2_commands_carry_the_same_keys() -> None:
    h = AirV2(declaring())
    metas = {c["name"]: c.get("_meta") for c in commands_offered(h)}
    assert metas["goal"] == air(commandAction={"kind": "prefixPrompt", "presentation": "state"})
    assert metas["deploy"] == air(skillPath="/s/deploy/SKILL.md")
    h.validate()


def test_a_client_that_is_not_air_gets_the_commands_without_keys() -> None:
    h = v1(None)
    assert all("_meta" not in c for c in commands_offered(h))


# -- agentFileChangeReport in ACP v2 ---------------------------------------------------------

DIFF = "diff --git a/a.txt b/a.txt\nnew file mode 100644\n--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+a\n"


def prompt_changing_a_file(h: AirV2) -> list[dict[str, Any]]:
    """A v2 prompt asking AIR's file-change report, whose turn changes ``a.txt``: the
    session's updates."""
    h.new_session(THREAD)
    asked = {"version": 1, "requestId": "r-1"}
    h.client_request(
        "session/prompt",
        {
            "sessionId": THREAD,
            "prompt": [{"type": "text", "text": "change a file"}],
            "_meta": {"jetbrains": {"air": {"agentFileChangeReportRequest": asked}}},
        },
    )
    h.accept_turn()
    turn = {"id": "turn-1", "status": "inProgress", "items": []}
    h.codex_notify("turn/started", {"threadId": THREAD, "turn": turn})
    h.turn_notify("turn/diff/updated", THREAD, diff=DIFF)
    h.complete_turn(THREAD)
    return h.updates(THREAD)


def test_acp_v2_gets_the_file_change_report_just_before_the_state_that_ends_the_prompt() -> None:
    h = AirV2(declaring("agentFileChangeReport"))
    updates = prompt_changing_a_file(h)
    (at,) = [i for i, u in enumerate(updates) if u["sessionUpdate"] == "session_info_update"]
    assert updates[at]["_meta"] == air(
        agentFileChangeReport={
            "version": 1,
            "requestId": "r-1",
            "status": "reported",
            "paths": ["/work/a.txt"],
            "declaredComplete": False,
            "truncated": False,
            "uncertainty": UNCERTAINTY,
        }
    )
    assert updates[at + 1] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "end_turn",
    }
    h.validate()


def test_acp_v2_without_the_capability_gets_no_report() -> None:
    h = AirV2(declaring())
    updates = prompt_changing_a_file(h)
    assert not [u for u in updates if u["sessionUpdate"] == "session_info_update"]
    assert updates[-1]["sessionUpdate"] == "state_update"


# -- async tasks of a reopened session -------------------------------------------------------

TERMINAL = {"itemId": "call-9", "processId": "p-9", "command": "sleep 60", "cwd": "/work"}


def reopen(
    h: Harness,
    method: str,
    terminals: list[dict[str, Any]],
    items: list[dict[str, Any]] | None = None,
    status: str = "idle",
) -> int:
    """``method`` on thread ``thread-1``, loaded in Codex (``status``) and running
    ``terminals``, its one stored turn holding ``items``; every Codex request of the open
    (and after it) answered."""
    before = len(h.to_codex)
    rid = h.client_request(method, {"sessionId": THREAD, "cwd": "/work", "mcpServers": []})
    turns = [{"id": "turn-0", "status": "completed", "items": items or []}]
    thread = {"id": THREAD, "cwd": "/work", "preview": "", "status": {"type": status}}
    thread["turns"] = turns
    answered: set[Any] = set()
    while waiting := [
        m for m in h.to_codex[before:] if "id" in m and "method" in m and m["id"] not in answered
    ]:
        for m in waiting:
            answered.add(m["id"])
            if m["method"] == "thread/read":
                h.codex_reply(m["id"], {"thread": thread})
            elif m["method"] == "thread/resume":
                h.codex_reply(m["id"], {"thread": thread, "model": "mock"})
            elif m["method"] == "thread/backgroundTerminals/list":
                h.codex_reply(m["id"], {"data": terminals, "nextCursor": None})
            else:
                h.codex_reply(m["id"], {})
    assert h.client_response(rid) is not None
    return rid


def spawned(h: Harness) -> list[dict[str, Any]]:
    return [u for u in h.updates(THREAD) if u["sessionUpdate"] == "async_task_spawned"]


def test_a_loaded_session_shows_the_commands_its_thread_still_runs_as_tasks() -> None:
    h = v1(declaring("asyncTasks"))
    rid = reopen(h, "session/load", [TERMINAL])
    (task,) = spawned(h)
    assert task == {
        "sessionUpdate": "async_task_spawned",
        "asyncTaskId": "call-9",
        "name": "sleep 60",
        "taskType": "shell",
        "showInTranscript": False,
        "canStop": True,
        "toolCallId": "call-9",
    }
    messages = h.to_client
    answered_at = next(i for i, m in enumerate(messages) if m.get("id") == rid)
    shown_at = next(
        i
        for i, m in enumerate(messages)
        if m.get("method") == "session/update"
        and m["params"]["update"].get("toolCallId") == "call-9"
    )
    marked_at = next(
        i
        for i, m in enumerate(messages)
        if m.get("method") == "session/update"
        and m["params"]["update"].get("_meta") == air(asyncTasks={"backgrounded": True})
    )
    spawned_at = next(
        i
        for i, m in enumerate(messages)
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "async_task_spawned"
    )
    # The replay shows the command, the answer goes out, then the task.
    assert shown_at < answered_at < marked_at < spawned_at

    # It ends as any task does; stopping it then is no longer possible.
    item = {
        "type": "commandExecution",
        "id": "call-9",
        "command": "sleep 60",
        "cwd": "/work",
        "status": "completed",
        "exitCode": 0,
        "commandActions": [],
    }
    h.turn_notify("item/completed", THREAD, "turn-0", item=item)
    states = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "async_task_state_update"]
    assert states == [
        {
            "sessionUpdate": "async_task_state_update",
            "asyncTaskId": "call-9",
            "state": "completed",
            "summary": "exit code 0",
        }
    ]
    stop = h.client_request(
        "_session/async_task/stop", {"sessionId": THREAD, "asyncTaskId": "call-9"}
    )
    assert h.error(stop).code == -32602


def test_a_resumed_session_shows_its_tasks_on_the_tool_calls_of_their_commands() -> None:
    h = v1(declaring("asyncTasks"))
    rid = reopen(h, "session/resume", [TERMINAL])
    answered = next(i for i, m in enumerate(h.to_client) if m.get("id") == rid)
    after = [
        m["params"]["update"] for m in h.to_client[answered:] if m.get("method") == "session/update"
    ]
    # No history on a resume: the command's tool call, running, then the task on it.
    assert [u["sessionUpdate"] for u in after] == [
        "tool_call",
        "tool_call_update",
        "async_task_spawned",
    ]
    call, marked, task = after
    assert (call["toolCallId"], call["status"], call["kind"]) == (
        "call-9",
        "in_progress",
        "execute",
    )
    assert marked == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-9",
        "_meta": air(asyncTasks={"backgrounded": True}),
    }
    assert (task["asyncTaskId"], task["toolCallId"]) == ("call-9", "call-9")
    # The client may stop it.
    stop = h.client_request(
        "_session/async_task/stop", {"sessionId": THREAD, "asyncTaskId": "call-9"}
    )
    listed = h.codex_request("thread/backgroundTerminals/list")
    h.codex_reply(listed["id"], {"data": [TERMINAL], "nextCursor": None})
    terminate = h.codex_request("thread/backgroundTerminals/terminate")
    assert terminate["params"] == {"threadId": THREAD, "processId": "p-9"}
    h.codex_reply(terminate["id"], {"terminated": True})
    assert h.result(stop) == {"stopped": True}


def _terminal_lists(h: Harness) -> int:
    return sum(m.get("method") == "thread/backgroundTerminals/list" for m in h.to_codex)


def test_a_load_reads_the_commands_still_running_once_for_its_replay_and_its_tasks() -> None:
    h = v1(declaring("asyncTasks"))
    reopen(h, "session/load", [TERMINAL])
    assert _terminal_lists(h) == 1
    assert [task["asyncTaskId"] for task in spawned(h)] == ["call-9"]


def test_a_load_of_a_thread_codex_had_not_loaded_asks_for_no_running_commands() -> None:
    """Nothing of it can run in this Codex before the load loads it."""
    h = v1(declaring("asyncTasks"))
    reopen(h, "session/load", [TERMINAL], status="notLoaded")
    assert _terminal_lists(h) == 0
    assert spawned(h) == []


@pytest.mark.parametrize("capabilities", [None, declaring()])
def test_without_async_tasks_a_reopened_session_lists_no_terminals_for_tasks(
    capabilities: dict[str, Any] | None,
) -> None:
    h = v1(capabilities)
    reopen(h, "session/resume", [TERMINAL])
    assert spawned(h) == []
    assert "thread/backgroundTerminals/list" not in [m.get("method") for m in h.to_codex]


# -- mode kinds ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reviewer", "sandbox", "kinds"),
    [
        (None, "workspaceWrite", {"read-only": "standard", "auto": "standard"}),
        (
            "user",
            "workspaceWrite",
            {"read-only": "standard", "auto": "standard", "auto-review": "auto_review"},
        ),
        # The reviewer automatic and Default's policies: the Auto-review mode.
        (
            "auto_review",
            "workspaceWrite",
            {"read-only": "standard", "auto": "standard", "auto-review": "auto_review"},
        ),
        # The user's config pairs the reviewer with Read Only: that mode, as it is now.
        (
            "auto_review",
            "readOnly",
            {"read-only": "auto_review", "auto": "standard", "auto-review": "auto_review"},
        ),
    ],
)
def test_a_modes_kind_says_who_answers_when_codex_asks(
    reviewer: str | None, sandbox: str, kinds: dict[str, str]
) -> None:
    h = v1(declaring())
    rid = h.client_request("session/new", {"cwd": "/work", "mcpServers": []})
    started: dict[str, Any] = {
        "thread": {"id": THREAD, "cwd": "/work"},
        "model": "mock",
        "approvalPolicy": "on-request",
        "sandbox": {"type": sandbox},
    }
    if reviewer is not None:
        started["approvalsReviewer"] = reviewer
    h.codex_reply(h.codex_request("thread/start")["id"], started)
    opened = h.result(rid)
    shown = {
        m["id"]: m["_meta"]["jetbrains"]["air"]["kind"] for m in opened["modes"]["availableModes"]
    }
    assert shown == {**kinds, "full-access": "full_access"}
    (mode,) = [o for o in opened["configOptions"] if o["id"] == "mode"]
    assert {v["value"]: v["_meta"]["jetbrains"]["air"]["kind"] for v in mode["options"]} == shown


def test_acp_v2_gets_a_reopened_sessions_tasks_under_the_extension_name() -> None:
    h = AirV2(declaring("asyncTasks"))
    reopen(h, "session/resume", [TERMINAL])
    (task,) = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "_async_task_spawned"]
    assert (task["asyncTaskId"], task["toolCallId"]) == ("call-9", "call-9")
    h.validate()
