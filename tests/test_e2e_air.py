"""JetBrains AIR's extensions (``_meta.jetbrains.air``) against the real Codex.

The shapes follow the AIR document of the TypeScript Codex adapter (its
``docs/air-extensions.md``): the declaration in ``initialize``, the session index's
rows and ``_session/list_changed``. A client that declares nothing gets none of it.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from tests.support.reading import Ended

from .support.air import ALWAYS, declaring
from .support.daemon import ATTACHED
from .support.e2e import (
    SCENARIO_SECONDS,
    Conversation,
    OpenConversation,
)
from .support.scenarios.approvals import ESCALATED, GIT_FOLDER, PATCH_IN_GIT, Answers
from .support.scenarios.tools import BIG, PATCH_PROMPT

pytestmark = pytest.mark.e2e

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")

AIR_INDEX = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
    **declaring("sessionIndex"),
}


def air_of(row: dict[str, Any]) -> dict[str, Any]:
    """A row's ``_meta.jetbrains.air``, checked against the AIR document's row fields."""
    fields = row["_meta"]["jetbrains"]["air"]
    assert fields["version"] == 1
    assert isinstance(fields["archived"], bool)
    assert set(fields) <= {
        "version",
        "archived",
        "lastPromptAt",
        "lastTurnEndedAt",
        "state",
        "model",
        "forkedFrom",
    }, fields
    for stamp in ("lastPromptAt", "lastTurnEndedAt"):
        if stamp in fields:
            assert ISO.fullmatch(fields[stamp]), fields
    assert fields.get("state", "idle") in ("running", "requires_action", "idle"), fields
    return dict(fields)


async def row(client: AcpClient, cwd: Path, session_id: str) -> dict[str, Any]:
    listed = await client.request("session/list", {"cwd": str(cwd)})
    (found,) = [s for s in listed["sessions"] if s["sessionId"] == session_id]
    return air_of(found)


async def list_changed(client: AcpClient, start: int, cwd: Path) -> int:
    """Wait for ``_session/list_changed {cwd}`` among messages from ``start``; its index."""
    message = await client.wait_for_index(
        start,
        lambda m: m.get("method") == "_session/list_changed" and m["params"] == {"cwd": str(cwd)},
    )
    return client.received.index(message)


@pytest.mark.conversation(capabilities=AIR_INDEX)
async def test_session_index_rows_carry_state_and_times_and_changes_are_pushed(
    conversation: Conversation, workspace: Path
) -> None:
    client, sid = conversation.client, conversation.sid
    assert conversation.init["_meta"]["jetbrains"]["air"] == {
        "version": 1,
        "capabilities": [*ALWAYS, "sessionIndex"],
    }
    await conversation.said("@@ say first")

    first = await row(client, workspace, sid)
    assert first["archived"] is False
    assert first["state"] == "idle"
    assert "lastPromptAt" in first and "lastTurnEndedAt" in first

    # A turn that runs a while: the listed cwd is told its row changed, and the
    # row says running; once the turn ends, again, and idle.
    start = len(client.received)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conversation.said, "@@ sleep 3000\n@@ say done")
        seen = await list_changed(client, start, workspace)
        running = await row(client, workspace, sid)
        assert running["state"] == "running", running
    await list_changed(client, seen + 1, workspace)
    ended = await row(client, workspace, sid)
    assert ended["state"] == "idle"
    assert ended["lastTurnEndedAt"] >= first["lastTurnEndedAt"]
    assert ended["lastPromptAt"] >= first["lastPromptAt"]


async def test_a_client_that_declares_nothing_gets_no_index_fields_and_no_pushes(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            assert "jetbrains" not in talk.init.get("_meta", {})
            await talk.client.request("session/list", {"cwd": str(workspace)})
            await talk.said("@@ say first")
            listed = await talk.client.request("session/list", {"cwd": str(workspace)})
            assert [s["sessionId"] for s in listed["sessions"]] == [talk.sid]
            assert "_meta" not in listed["sessions"][0]
            # An AIR client that did not declare sessionIndex: not offered, nothing added.
            init = await talk.client.initialize(declaring())
            assert init["_meta"]["jetbrains"]["air"] == {
                "version": 1,
                "capabilities": ALWAYS,
            }
            listed = await talk.client.request("session/list", {"cwd": str(workspace)})
            assert "_meta" not in listed["sessions"][0]
            await talk.said("@@ say again")
    assert not [m for m in talk.client.received if m.get("method") == "_session/list_changed"]


def rate_limit_updates(client: AcpClient) -> list[dict[str, Any]]:
    return [
        m["params"]["rateLimits"]
        for m in client.received
        if m.get("method") == "_account/rate_limits_update"
    ]


@pytest.mark.conversation(capabilities=declaring("sessionFailure"))
async def test_usage_windows_are_pushed_and_a_spent_one_is_a_limit_failure_with_its_reset(
    conversation: Conversation,
) -> None:
    """The scripted model answers with OpenAI's rate-limit headers, then refuses for usage
    (HTTP 429 ``usage_limit_reached``): Codex reports both windows, then fails the turn."""
    client, init = conversation.client, conversation.init
    assert init["agentCapabilities"]["_meta"] == {"rateLimits": {}}
    assert init["_meta"]["jetbrains"]["air"] == {
        "version": 1,
        "capabilities": ALWAYS,
    }
    before = int(time.time())
    await conversation.said("@@ limits 42 window_minutes=300 resets_in=3600\n@@ say hi")
    await client.wait_for(lambda m: m.get("method") == "_account/rate_limits_update")
    (first,) = rate_limit_updates(client)
    assert first["limitId"] == "codex"
    window = first["primary"]
    assert window["usedPercent"] == 42 and window["windowDurationMins"] == 300
    assert before + 3600 <= window["resetsAt"] <= int(time.time()) + 3600

    refused = await conversation.prompt("@@ usage_limit resets_in=7200")
    assert refused["stopReason"] == "end_turn"
    failure = refused["_meta"]["jetbrains"]["air"]["sessionFailure"]
    assert failure["id"].endswith(":error") and failure["revision"] == 1
    assert failure["category"] == "limit" and failure["severity"] == "error"
    assert failure["actions"] == []
    assert "usage limit" in failure["title"]
    spent = rate_limit_updates(client)[-1]["primary"]
    assert spent["usedPercent"] == 100
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(spent["resetsAt"]))
    assert failure["details"] == f"The usage limit resets at {reset}."
    assert spent["resetsAt"] >= before + 7200


async def test_a_client_declaring_nothing_is_pushed_the_windows_and_keeps_the_error(
    open_conversation: OpenConversation,
) -> None:
    """The rate-limits extension as the TypeScript adapter defines it: advertised and pushed
    to every client, which declares nothing; a refused turn stays ACP's error for it."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            assert talk.init["agentCapabilities"]["_meta"] == {"rateLimits": {}}
            assert "jetbrains" not in talk.init.get("_meta", {})
            await talk.prompt("@@ limits 10\n@@ say hi")
            assert rate_limit_updates(talk.client)[-1]["primary"]["usedPercent"] == 10
            with pytest.raises(RpcError) as refused:
                await talk.prompt("@@ usage_limit")
            assert refused.value.code == -32603
            assert refused.value.data["codexErrorInfo"] == "usageLimitExceeded"
            assert rate_limit_updates(talk.client)[-1]["primary"]["usedPercent"] == 100


def asked(model: ScriptedModel, text: str) -> bool:
    """Whether a request the model got carries ``text`` (in its user's prompt)."""
    return any(text in json.dumps(body) for body in model.requests)


async def test_providers_switch_new_sessions_to_a_second_provider_without_writing_config(
    nursery: trio.Nursery,
    scripted_model: ScriptedModel,
    codex_home: Path,
    open_conversation: OpenConversation,
    workspace: Path,
) -> None:
    second: ScriptedModel = await nursery.start(serve_scripted_model)
    provider = (
        f'[model_providers.second]\nname = "second"\nbase_url = "{second.base_url}"\n'
        'wire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
        "supports_websockets = false\n"
    )
    config = write_codex_home(codex_home, scripted_model.base_url, extra_toml=provider)
    before = tomllib.loads(config.read_text())

    def in_use(listed: dict[str, Any]) -> list[str]:
        return [p["providerId"] for p in listed["providers"] if p["_meta"]["codex"]["inUse"]]

    # A client of the unstable schema (it declares subagents) is told; it declares nothing else.
    asking = {"capabilities": {"subagents": {}}, "session": False, "unstable": True}
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(**asking) as talk:
            client = talk.client
            assert talk.init["agentCapabilities"]["providers"] == {}
            listed = await client.request("providers/list", {})
            by_id = {p["providerId"]: p for p in listed["providers"]}
            assert by_id["mock"]["current"] == {
                "apiType": "openai",
                "baseUrl": scripted_model.base_url,
            }
            assert by_id["second"]["current"] == {"apiType": "openai", "baseUrl": second.base_url}
            assert all(p["supported"] == ["openai"] and p["required"] for p in by_id.values())
            assert in_use(listed) == ["mock"]

            first = await client.new_session(str(workspace))
            await client.prompt(first, "@@ say from the first provider")
            assert asked(scripted_model, "from the first provider")

            switch = {"providerId": "second", "apiType": "openai", "baseUrl": second.base_url}
            assert await client.request("providers/set", switch) == {}
            assert in_use(await client.request("providers/list", {})) == ["second"]
            other = await client.new_session(str(workspace))
            await client.prompt(other, "@@ say from the second provider")
            assert client.text_of(other) == "from the second provider"
            assert asked(second, "from the second provider")
            assert not asked(scripted_model, "from the second provider")

            # What Codex cannot do is refused with the reason; config.toml is never written.
            for bad in (
                {**switch, "providerId": "elsewhere"},
                {**switch, "baseUrl": "http://127.0.0.1:9/v1"},
                {**switch, "apiType": "anthropic"},
            ):
                with pytest.raises(RpcError) as refused:
                    await client.request("providers/set", bad)
                assert refused.value.code == -32602
            with pytest.raises(RpcError) as required:
                await client.request("providers/disable", {"providerId": "mock"})
            assert required.value.code == -32602 and "required" in required.value.message
            assert await client.request("providers/disable", {"providerId": "second"}) == {}
            assert in_use(await client.request("providers/list", {})) == ["mock"]
    after = tomllib.loads(config.read_text())
    # Codex itself notes the workspace as trusted when a thread starts in it: nothing else.
    after.pop("projects", None)
    assert after == before


@pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])
async def test_a_client_that_declared_nothing_is_told_of_the_providers_and_lists_them(
    open_conversation: OpenConversation, scripted_model: ScriptedModel, version: int
) -> None:
    """As the unstable schema has it: the agent advertises ``providers`` (to every client,
    whatever it declares) and the client just calls; the answers are checked against it."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(version=version, session=False, unstable=True) as talk:
            caps = talk.init["capabilities" if version == 2 else "agentCapabilities"]
            assert caps.get("providers") == {}
            listed = await talk.client.request("providers/list", {})
    [mock] = [p for p in listed["providers"] if p["providerId"] == "mock"]
    assert mock["current"] == {"apiType": "openai", "baseUrl": scripted_model.base_url}
    assert mock["_meta"]["codex"]["inUse"] is True


UNSTABLE = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
    "subagents": {},
}


def fork_at(message_id: str, **more: Any) -> dict[str, Any]:
    return {"jetbrains": {"air": {"fork": {"version": 1, "messageId": message_id, **more}}}}


async def user_messages(client: AcpClient, sid: str, cwd: Path) -> list[tuple[str, str]]:
    """``session/load`` of ``sid``: its replayed user messages, (id, text) in order."""
    start = len(client.received)
    await client.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})
    return [
        (u["update"]["messageId"], u["update"]["content"]["text"])
        for m in client.received[start:]
        if m.get("method") == "session/update"
        and (u := m["params"])["sessionId"] == sid
        and u["update"]["sessionUpdate"] == "user_message_chunk"
    ]


async def prompts_of(client: AcpClient, sid: str, cwd: Path) -> list[str]:
    """The texts of ``sid``'s user messages, as a ``session/load`` replays them."""
    return [text for _, text in await user_messages(client, sid, cwd)]


async def test_fork_at_a_message_keeps_the_history_through_its_turn_only(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    unstable = {"capabilities": UNSTABLE, "unstable": True}
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(**unstable) as talk:
            client, sid = talk.client, talk.sid
            for word in ("one", "two", "three"):
                await talk.said(f"@@ say answer {word}")
            texts: dict[str, str] = {}
            for u in client.updates:
                if u["sessionId"] == sid and u["update"]["sessionUpdate"] == "agent_message_chunk":
                    message = u["update"]["messageId"]
                    texts[message] = texts.get(message, "") + u["update"]["content"]["text"]
            answers = {text: message for message, text in texts.items()}
            base = {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            # At an agent message (AIR's way), by its id with a segment suffix.
            by_id = await client.request(
                "session/fork", {**base, "_meta": fork_at(answers["answer two"] + ":segment:0")}
            )
            # By the fingerprint of its text, when no item has the id.
            digest = "sha256:" + hashlib.sha256(b"answer one").hexdigest()
            by_text = await client.request(
                "session/fork", {**base, "_meta": fork_at("gone", messageFingerprint=digest)}
            )
            with pytest.raises(RpcError) as missing:
                await client.request("session/fork", {**base, "_meta": fork_at("no-such-item")})
            assert missing.value.code == -32602 and "no-such-item" in missing.value.message
            with pytest.raises(RpcError) as invalid:
                await client.request("session/fork", {**base, "_meta": fork_at("")})
            assert invalid.value.code == -32602
            # A fork is a session of its own: it goes on from where it was cut.
            await client.prompt(by_id["sessionId"], "@@ say after the fork")

        async with open_conversation(session=False, **unstable) as reader:
            assert await prompts_of(reader.client, by_id["sessionId"], workspace) == [
                "@@ say answer one",
                "@@ say answer two",
                "@@ say after the fork",
            ]
            assert await prompts_of(reader.client, by_text["sessionId"], workspace) == [
                "@@ say answer one"
            ]
            original = await user_messages(reader.client, sid, workspace)
            assert [text for _, text in original] == [
                "@@ say answer one",
                "@@ say answer two",
                "@@ say answer three",
            ]
            # At a user message, by the id a load showed.
            at_user = await reader.client.request(
                "session/fork", {**base, "_meta": fork_at(original[1][0])}
            )
        async with open_conversation(session=False, **unstable) as last:
            assert await prompts_of(last.client, at_user["sessionId"], workspace) == [
                "@@ say answer one",
                "@@ say answer two",
            ]


async def test_a_file_change_is_one_git_patch_per_file_that_git_applies(
    open_conversation: OpenConversation, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "big.txt").write_text(BIG)
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(capabilities=declaring("diffPatch")) as talk:
            client, sid = talk.client, talk.sid
            await talk.said(PATCH_PROMPT)
    updates = [u["update"] for u in client.updates if u["sessionId"] == sid]
    (edit,) = [
        u["toolCallId"]
        for u in updates
        if u["sessionUpdate"] == "tool_call" and u["kind"] == "edit"
    ]
    final = [u for u in updates if u.get("toolCallId") == edit and "content" in u][-1]
    blocks = {c["path"]: c for c in final["content"] if c["type"] == "diff"}
    assert set(blocks) == {str(workspace / "new.txt"), str(workspace / "big.txt")}
    root = tmp_path / "root"
    before = root / str(workspace / "big.txt").lstrip("/")
    before.parent.mkdir(parents=True)
    before.write_text(BIG)
    for path, block in blocks.items():
        assert block.get("oldText") is None and block["newText"] == ""
        payload = block["_meta"]["jetbrains"]["air"]
        assert payload["version"] == 1
        assert (
            payload["diffPatch"]["version"] == 1 and payload["diffPatch"]["format"] == "git_patch"
        )
        text = payload["diffPatch"]["text"]
        header = path.lstrip("/")
        assert text.startswith(f"diff --git a/{header} b/{header}\n"), text
        with trio.fail_after(SCENARIO_SECONDS):
            applied = await trio.run_process(
                ["git", "apply", "-"],
                cwd=root,
                stdin=text.encode(),
                capture_stderr=True,
                check=False,
            )
        assert applied.returncode == 0, applied.stderr
        assert (root / header).read_text() == Path(path).read_text()
    assert blocks[str(workspace / "new.txt")]["_meta"]["kind"] == "add"
    assert blocks[str(workspace / "big.txt")]["_meta"]["kind"] == "update"


@pytest.mark.conversation(capabilities=declaring("nativeSubagentSessions"), unstable=True)
async def test_native_subagent_sessions_is_airs_name_for_the_subagents_capability(
    conversation: Conversation,
) -> None:
    spawn = '@@ call multi_agent_v1/spawn_agent {"message": "@@ words 2"}\n@@ then\n@@ say ok'
    assert "fork" in conversation.init["agentCapabilities"]["sessionCapabilities"]
    await conversation.said(spawn)
    announced = [
        u
        for u in conversation.client.updates
        if u["sessionId"] == conversation.sid and u["update"]["sessionUpdate"] == "subagent_update"
    ]
    assert announced, "the sub-agent is a session of its own"


@pytest.mark.conversation(capabilities=declaring("recommendedValue"))
async def test_modes_say_their_kind_and_the_model_selector_codexs_recommendation(
    conversation: Conversation, workspace: Path
) -> None:
    client, opened = conversation.client, conversation.opened
    kinds = {
        m["id"]: m["_meta"]["jetbrains"]["air"]["kind"] for m in opened["modes"]["availableModes"]
    }
    # Codex's approvals go to the user (its default reviewer): the asking modes are standard;
    # Codex has a reviewer, so its mode is offered too.
    assert kinds == {
        "read-only": "standard",
        "auto": "standard",
        "full-access": "full_access",
        "auto-review": "auto_review",
    }
    options = {o["id"]: o for o in opened["configOptions"]}
    assert {
        v["value"]: v["_meta"]["jetbrains"]["air"]["kind"] for v in options["mode"]["options"]
    } == kinds
    model = options["model"]
    recommended = model["_meta"]["jetbrains"]["air"]["recommendedValue"]
    # Codex's catalog default (not the mock model the session runs): offered, not current.
    assert recommended in {v["value"] for v in model["options"]}
    assert recommended != model["currentValue"] == "mock-model"

    # An answer's phase, as the model marks it, is on its chunks from the first one
    # (Codex gives it at item/started): AIR tells a progress note from the answer.
    start = len(client.updates)
    await conversation.said(
        "@@ phase commentary\n@@ say Looking around\n@@ phase final_answer\n@@ say Done"
    )
    phases = [
        (u["update"]["content"]["text"], u["update"]["_meta"]["jetbrains"]["air"]["phase"])
        for u in client.updates[start:]
        if u["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert "".join(text for text, phase in phases if phase == "commentary") == "Looking around"
    assert "".join(text for text, phase in phases if phase == "final_answer") == "Done"

    # Without the capability: the kinds (every AIR client), no recommendation.
    await client.initialize(declaring())
    opened = await client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
    options = {o["id"]: o for o in opened["configOptions"]}
    assert "_meta" not in options["model"]
    assert all("_meta" in m for m in opened["modes"]["availableModes"])


def background(command: str) -> str:
    """A command that outlives its turn: Codex answers the model after half a second."""
    call = json.dumps({"cmd": command, "yield_time_ms": 500})
    return f"@@ call exec_command {call}\n@@ then\n@@ say started"


@pytest.mark.conversation(capabilities=declaring("asyncTasks"))
async def test_a_command_that_outlives_its_turn_is_an_async_task_the_user_can_stop(
    conversation: Conversation,
) -> None:
    client, sid = conversation.client, conversation.sid

    def task_updates(sid: str, kind: str) -> list[dict[str, Any]]:
        return [
            u["update"]
            for u in client.updates
            if u["sessionId"] == sid and u["update"]["sessionUpdate"] == kind
        ]

    # Start: announced before the prompt's answer, on the command's own tool call.
    start = len(client.received)
    assert await client.prompt(sid, background("sleep 60")) == Ended({"stopReason": "end_turn"})
    answered = next(i for i, m in enumerate(client.received) if i >= start and "result" in m)
    (spawned,) = task_updates(sid, "async_task_spawned")
    task = spawned["asyncTaskId"]
    assert spawned == {
        "sessionUpdate": "async_task_spawned",
        "asyncTaskId": task,
        "name": "sleep 60",
        "taskType": "shell",
        "showInTranscript": False,
        "canStop": True,
        "toolCallId": task,
    }
    marks = [
        i
        for i, m in enumerate(client.received)
        if m.get("method") == "session/update"
        and m["params"]["update"].get("toolCallId") == task
        and m["params"]["update"]
        .get("_meta", {})
        .get("jetbrains", {})
        .get("air", {})
        .get("asyncTasks")
        == {"backgrounded": True}
    ]
    spawn_at = next(
        i
        for i, m in enumerate(client.received)
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "async_task_spawned"
    )
    assert marks and marks[0] < spawn_at < answered

    # Stop: Codex ends the process; the task says so.
    stop = {"sessionId": sid, "asyncTaskId": task}
    assert await client.request("_session/async_task/stop", stop) == {"stopped": True}
    await client.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "async_task_state_update"
        )
    )
    (stopped,) = task_updates(sid, "async_task_state_update")
    assert (stopped["asyncTaskId"], stopped["state"]) == (task, "stopped")
    with pytest.raises(RpcError) as gone:
        await client.request("_session/async_task/stop", stop)
    assert gone.value.code == -32602

    # A task that ends by itself completes, with its exit code.
    await client.prompt(sid, background("sleep 2; echo done"))
    await client.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"].get("state") == "completed"
        )
    )
    completed = task_updates(sid, "async_task_state_update")[-1]
    assert completed["summary"] == "exit code 0"


@pytest.mark.transports("websocket")
async def test_a_session_loaded_while_its_command_runs_shows_the_task_and_stops_it(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    """One window leaves a command running; another, on the same Codex, loads the session:
    the command is a task there, on its replayed tool call, and that window stops it."""
    tasks = declaring("asyncTasks")
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(capabilities=tasks) as first:
            await first.said(background("sleep 60"))
            async with open_conversation(capabilities=tasks, session=False) as second:
                client = second.client
                load = {"sessionId": first.sid, "cwd": str(workspace), "mcpServers": []}
                await client.request("session/load", load)
                spawned = await client.wait_for(
                    lambda m: (
                        m.get("method") == "session/update"
                        and m["params"]["update"]["sessionUpdate"] == "async_task_spawned"
                    )
                )
                task = spawned["params"]["update"]
                replayed = [
                    u["update"]
                    for u in client.updates
                    if u["update"]["sessionUpdate"] == "tool_call"
                    and u["update"]["toolCallId"] == task["asyncTaskId"]
                ]
                assert replayed and replayed[0]["status"] == "in_progress"
                assert (task["name"], task["toolCallId"]) == ("sleep 60", task["asyncTaskId"])
                stop = {"sessionId": first.sid, "asyncTaskId": task["asyncTaskId"]}
                assert await client.request("_session/async_task/stop", stop) == {"stopped": True}
                ended = await client.wait_for(
                    lambda m: (
                        m.get("method") == "session/update"
                        and m["params"]["update"]["sessionUpdate"] == "async_task_state_update"
                    )
                )
                assert ended["params"]["update"]["state"] == "stopped"


@pytest.mark.conversation(version=2, capabilities=declaring("asyncTasks"), unstable=False)
async def test_acp_v2_gets_the_task_updates_under_extension_names(
    conversation: Conversation,
) -> None:
    client, sid = conversation.client, conversation.sid
    assert "asyncTasks" in conversation.init["_meta"]["jetbrains"]["air"]["capabilities"]
    await client.prompt_v2(sid, background("sleep 1; echo done"))
    await client.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "_async_task_state_update"
        )
    )
    kinds = [
        u["update"]["sessionUpdate"]
        for u in client.updates
        if u["update"]["sessionUpdate"].startswith("_async_task")
    ]
    assert kinds == ["_async_task_spawned", "_async_task_state_update"]


@pytest.mark.conversation(capabilities=declaring("agentFileChangeReport"))
async def test_a_prompt_that_asks_gets_the_files_its_turn_changed_before_its_answer(
    conversation: Conversation, workspace: Path
) -> None:
    (workspace / "big.txt").write_text(BIG)

    async def prompt(
        client: AcpClient, sid: str, text: str, request_id: str | None
    ) -> tuple[Any, list[dict[str, Any]]]:
        params: dict[str, Any] = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        if request_id is not None:
            asked = {"version": 1, "requestId": request_id}
            params["_meta"] = {"jetbrains": {"air": {"agentFileChangeReportRequest": asked}}}
        start = len(client.received)
        try:
            answer: Any = await client.request("session/prompt", params)
        except RpcError as error:
            answer = error
        found = [
            m["params"]["update"]["_meta"]["jetbrains"]["air"]["agentFileChangeReport"]
            for m in client.received[start:]
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "session_info_update"
            and "agentFileChangeReport"
            in m["params"]["update"].get("_meta", {}).get("jetbrains", {}).get("air", {})
        ]
        if found:
            # Sent before the answer.
            last = max(
                i for i, m in enumerate(client.received) if "agentFileChangeReport" in json.dumps(m)
            )
            assert any("result" in m or "error" in m for m in client.received[last:])
        return answer, found

    client, sid = conversation.client, conversation.sid
    answer, (report,) = await prompt(client, sid, PATCH_PROMPT, "r-1")
    assert answer == Ended({"stopReason": "end_turn"})
    assert report["requestId"] == "r-1" and report["status"] == "reported"
    assert sorted(report["paths"]) == [
        str(workspace / "big.txt"),
        str(workspace / "new.txt"),
    ]
    assert report["declaredComplete"] is False and report["truncated"] is False
    assert report["uncertainty"]

    _, (quiet,) = await prompt(client, sid, "@@ say nothing changed", "r-2")
    assert (quiet["status"], quiet["paths"]) == ("reported", [])

    failed, (broken,) = await prompt(client, sid, "@@ fail", "r-3")
    assert isinstance(failed, RpcError)
    assert (broken["status"], broken["reason"]) == ("unavailable", "providerError")

    # A malformed request is ignored; a prompt that asks nothing gets nothing.
    _, none = await prompt(client, sid, "@@ say hi", "bad id with spaces")
    assert none == []
    _, none = await prompt(client, sid, "@@ say hi", None)
    assert none == []


async def test_a_permission_request_carries_airs_title_and_codexs_reason(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    for path, text in GIT_FOLDER:
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(text)
    answers = Answers(permission="allow_once")
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(on_request=answers, capabilities=declaring()) as talk:
            await talk.prompt(ESCALATED)
            await talk.prompt(PATCH_IN_GIT)
    records = [
        params["_meta"]["jetbrains"]["air"]["permission"]
        for params in answers.asked_for("session/request_permission")
    ]
    assert [r["title"] for r in records] == ["Run command?", "Make edits?"]
    assert all(r["version"] == 1 for r in records)
    assert records[0]["description"] == "test"  # the model's justification, as Codex's reason


@pytest.mark.conversation(version=2, capabilities=declaring("sessionFailure"), unstable=False)
async def test_acp_v2_gets_a_failure_record_on_the_sessions_stream(
    conversation: Conversation,
) -> None:
    client, sid = conversation.client, conversation.sid
    _, ended = await client.prompt_v2(sid, "@@ usage_limit")
    records = [
        u["update"]["_meta"]["jetbrains"]["air"]["sessionFailure"]
        for u in client.updates
        if u["update"]["sessionUpdate"] == "session_info_update"
        and "sessionFailure" in u["update"].get("_meta", {}).get("jetbrains", {}).get("air", {})
    ]
    assert [(r["category"], r["actions"]) for r in records] == [("limit", [])]
    assert ended["state"] == "idle"


@pytest.mark.transports("daemon")
async def test_the_index_shows_another_windows_session_running_then_idle(
    open_conversation: OpenConversation, workspace: Path, stderr_file: Path
) -> None:
    """Two windows on the daemon's Codex: the one that keeps the index is pushed the
    other's new session and its turn, and its rows say so (Codex tells every connection
    each thread's status)."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(capabilities=AIR_INDEX, session=False) as keeper:
            index = keeper.client
            assert (await index.request("session/list", {"cwd": str(workspace)}))["sessions"] == []
            async with open_conversation() as other:
                sid = other.sid
                start = len(index.received)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(other.prompt, "@@ sleep 3000\n@@ say done")
                    seen = await list_changed(index, start, workspace)
                    while (running := await row_of(index, workspace, sid)) is None or running.get(
                        "state"
                    ) != "running":
                        seen = await list_changed(index, seen + 1, workspace)
                    assert running["state"] == "running"
                while (await row_of(index, workspace, sid) or {}).get("state") != "idle":
                    seen = await list_changed(index, seen + 1, workspace)
                ended = await row_of(index, workspace, sid)
                assert ended is not None and "lastPromptAt" in ended
    assert ATTACHED in stderr_file.read_text(), "both windows ran on the daemon's Codex"


async def row_of(client: AcpClient, cwd: Path, session_id: str) -> dict[str, Any] | None:
    listed = await client.request("session/list", {"cwd": str(cwd)})
    rows = [air_of(s) for s in listed["sessions"] if s["sessionId"] == session_id]
    return rows[0] if rows else None
