"""``session/load`` replays what the live session showed, in the engine alone (no processes).

Without the ``subagents`` capability a hidden sub-agent's command that asked for permission is
introduced on its root, titled with the agent's name: a load of that root replays it there,
with the same tool call id, title and final status.

Codex stores a command once it ends (in its turn, even after the turn ended): a thread loaded
from a Codex that still runs one of its commands (a shared Codex, the daemon) lacks it in
``thread/read``. The load replays it in progress, from ``thread/backgroundTerminals/list``, and
its ``item/completed`` finishes it.
"""

from __future__ import annotations

from typing import Any

from tests.support.engine_harness import Harness, answer_codex_until_answered, request_log
from tests.test_subagents import (
    CAPABILITIES,
    CHILD,
    GRANDCHILD,
    ROOT,
    WORKDIR,
    Tree,
    check_loaded,
    collab,
    final_calls,
    load_tree,
    stored,
)


def command(
    item_id: str, status: str, exit_code: int | None, cmd: str = "touch x"
) -> dict[str, Any]:
    """A finished ``commandExecution`` item, as Codex 0.169 stores it."""
    return {
        "type": "commandExecution",
        "id": item_id,
        "command": f"/bin/bash -lc '{cmd}'",
        "cwd": WORKDIR,
        "processId": "1",
        "source": "unifiedExecStartup",
        "status": status,
        "commandActions": [{"type": "unknown", "command": cmd}],
        "aggregatedOutput": "touch: x: Is a directory\n" if exit_code else None,
        "exitCode": exit_code,
        "durationMs": 3,
    }


def user_message(item_id: str, text: str) -> dict[str, Any]:
    return {"type": "userMessage", "id": item_id, "content": [{"type": "text", "text": text}]}


def spawn_item(item_id: str, sender: str, child: str) -> dict[str, Any]:
    states = {child: {"status": "pendingInit", "message": None}}
    return collab(item_id, "spawnAgent", sender, [child], prompt="@@ go", states=states)


def live_hidden_command() -> dict[str, Any]:
    """Ada (hidden) asks to run ``touch x`` on the root; allowed, it fails: how the root's
    client ends up seeing it."""
    t = Tree(subagents=False)
    t.spawn()
    t.approval(CHILD, rid=2, item_id="call_cmd")
    [request] = t.permission_requests()
    t.answer(request, "allow_once")
    t.notify(
        "item/completed",
        {"threadId": CHILD, "turnId": "turn-child", "item": command("call_cmd", "failed", 1)},
    )
    t.check()
    return final_calls(t.h.updates(ROOT))["call_cmd"]


def test_a_hidden_childs_command_shown_live_on_the_root_is_replayed_there() -> None:
    live = live_hidden_command()
    threads = {
        ROOT: stored(
            ROOT, [user_message("u-root", "go"), spawn_item(f"spawn-{CHILD}", ROOT, CHILD)]
        ),
        CHILD: stored(
            CHILD,
            [user_message("u-child", "@@ go"), command("call_cmd", "failed", 1)],
            parentThreadId=ROOT,
            agentNickname="Ada",
        ),
    }
    h, requests = load_tree(threads, subagents=False)
    check_loaded(h, requests, subagents=False)
    replayed = final_calls(h.updates(ROOT))
    assert replayed["call_cmd"]["title"] == live["title"] == "Ada: touch x"
    # The command's own outcome: what the live root shows once the child's item ends.
    assert replayed["call_cmd"]["status"] == "failed"
    # Right after the spawn that made the child, as the live call came after it.
    assert list(replayed) == [f"spawn-{CHILD}", "call_cmd"]
    # Nothing else of the hidden child: no message of it, no session of it.
    assert CHILD not in {m["params"]["sessionId"] for m in h.to_client if "params" in m}
    assert not [u for u in h.updates(ROOT) if u["sessionUpdate"] == "agent_message_chunk"]


def test_a_hidden_grandchilds_command_is_replayed_on_the_root_naming_the_grandchild() -> None:
    """A grandchild's question is asked on the root too (its nearest shown ancestor), naming
    the grandchild: its commands follow the child's spawn of it, inside the child's."""
    threads = {
        ROOT: stored(ROOT, [spawn_item("spawn-1", ROOT, CHILD)]),
        CHILD: stored(
            CHILD,
            [
                command("call_child_1", "completed", 0, "echo one"),
                spawn_item("spawn-2", CHILD, GRANDCHILD),
                command("call_child_2", "declined", None, "echo two"),
            ],
            parentThreadId=ROOT,
            agentNickname="Ada",
        ),
        GRANDCHILD: stored(
            GRANDCHILD,
            [command("call_grandchild", "completed", 0, "echo three")],
            parentThreadId=CHILD,
        ),
    }
    h, requests = load_tree(threads, subagents=False)
    check_loaded(h, requests, subagents=False)
    replayed = final_calls(h.updates(ROOT))
    assert {i: (c["title"], c["status"]) for i, c in replayed.items()} == {
        "spawn-1": ("Spawn Ada", "completed"),
        "call_child_1": ("Ada: echo one", "completed"),
        "call_grandchild": ("a sub-agent: echo three", "completed"),
        "call_child_2": ("Ada: echo two", "failed"),
    }
    assert list(replayed) == ["spawn-1", "call_child_1", "call_grandchild", "call_child_2"]


def test_with_the_capability_a_childs_commands_stay_in_its_own_session() -> None:
    threads = {
        ROOT: stored(ROOT, [spawn_item(f"spawn-{CHILD}", ROOT, CHILD)]),
        CHILD: stored(
            CHILD, [command("call_cmd", "completed", 0)], parentThreadId=ROOT, agentNickname="Ada"
        ),
    }
    h, requests = load_tree(threads, subagents=True)
    check_loaded(h, requests, subagents=True)
    assert "call_cmd" not in final_calls(h.updates(ROOT))
    assert final_calls(h.updates(CHILD))["call_cmd"]["title"] == "touch x"


#: What a load asks Codex, and these tests answer.
LOAD_ASKS = (
    "thread/read",
    "thread/resume",
    "thread/backgroundTerminals/list",
    "thread/loaded/list",
)


def load_running(
    status: str, terminals: list[dict[str, Any]]
) -> tuple[Harness, list[tuple[int, dict[str, Any]]], list[str], int]:
    """``session/load`` of ``ROOT`` whose ``thread/read`` says ``status``, Codex listing
    ``terminals`` as still running; every Codex request the load made, by method, and where
    the load's response is in what the client received."""
    h = Harness()
    requests, request = request_log(h)

    request("initialize", {"protocolVersion": 1, "clientCapabilities": CAPABILITIES})
    rid = request("session/load", {"sessionId": ROOT, "cwd": WORKDIR, "mcpServers": []})
    items = [
        user_message("u-1", "start it"),
        {"type": "agentMessage", "id": "msg-1", "text": "started"},
    ]
    thread = {**stored(ROOT, items), "status": {"type": status}}

    def reply(m: dict[str, Any]) -> Any:
        if m["method"] == "thread/read":
            return {"thread": thread}
        if m["method"] == "thread/resume":
            resumed = {**thread, "turns": [], "status": {"type": "idle"}}
            return {"thread": resumed, "model": "mock"}
        if m["method"] == "thread/loaded/list":
            return {"data": [ROOT], "nextCursor": None}  # no sub-agent
        assert m["method"] == "thread/backgroundTerminals/list", m
        return {"data": terminals, "nextCursor": None}

    answer_codex_until_answered(h, rid, reply, asks=LOAD_ASKS)
    methods = [m["method"] for m in h.to_codex if "method" in m and "id" in m]
    answered = next(
        i for i, m in enumerate(h.to_client) if m.get("id") == rid and "method" not in m
    )
    return h, requests, methods, answered


def test_a_command_a_loaded_thread_still_runs_is_replayed_running_and_finishes_later() -> None:
    terminal = {
        "itemId": "call_bg",
        "processId": "7",
        "command": "sleep 3; echo done",
        "cwd": WORKDIR,
        "osPid": None,
    }
    h, requests, methods, response = load_running("idle", [terminal])
    assert "thread/backgroundTerminals/list" in methods
    [running] = [
        m["params"]["update"]
        for m in h.to_client[:response]
        if m.get("method") == "session/update"
        and m["params"]["update"].get("toolCallId") == "call_bg"
    ]
    assert running["sessionUpdate"] == "tool_call"
    assert (running["title"], running["status"]) == ("sleep 3; echo done", "in_progress")
    # After the history: the command outlived the turn it came from.
    replayed = [
        m["params"]["update"]["sessionUpdate"] for m in h.to_client[:response] if "params" in m
    ]
    assert replayed.index("agent_message_chunk") < replayed.index("tool_call")
    finished = command("call_bg", "completed", 0, "sleep 3; echo done")
    finished["aggregatedOutput"] = "done\n"
    h.codex_notify("item/completed", {"threadId": ROOT, "turnId": "turn-of-x", "item": finished})
    [update] = [u for u in h.updates(ROOT) if u["sessionUpdate"] == "tool_call_update"]
    assert (update["toolCallId"], update["status"]) == ("call_bg", "completed")
    check_loaded(h, requests, subagents=False)


def test_a_thread_codex_had_not_loaded_runs_no_command_so_none_is_listed() -> None:
    h, requests, methods, _response = load_running("notLoaded", [])
    assert "thread/backgroundTerminals/list" not in methods
    check_loaded(h, requests, subagents=False)
