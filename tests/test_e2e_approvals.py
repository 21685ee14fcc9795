"""Approvals and questions end to end: the real Codex (0.171 and 0.169) asks, a scripted ACP client answers.

The model is scripted (``@@ call exec_command {... "sandbox_permissions": "require_escalated"}``
makes Codex ask before running a command); what Codex did with the answer is read from the
workspace, from what Codex told the model (``ScriptedModel.requests``), and, where the exact
answers matter, from a recording of the bridge's traffic with Codex (``codex-acp-bridge record``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from bridge.acp_client import AcpClient
from bridge.recording import read_recording
from bridge.recording.format import MessageRecord
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation, record_argv
from tests.support.reading import Ended
from tests.support.scenarios.approvals import (
    ESCALATED,
    MCP_ECHO,
    MCP_SERVER_TOML,
    PATCH_IN_GIT,
    QUESTION,
    QUESTIONS_TOML,
    Answers,
)

# Version-sensitive: run against both ends of the tested Codex range.
pytestmark = [pytest.mark.e2e, pytest.mark.codex_versions]

FORMS = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
    "elicitation": {"form": {}},
}


def with_config(bridge_env: dict[str, str], model: ScriptedModel, extra_toml: str) -> None:
    """``bridge_env``'s Codex home now holds ``extra_toml`` too. Codex reads its config for
    each thread it starts, so a daemon already running on that home takes it as well."""
    write_codex_home(Path(bridge_env["CODEX_HOME"]), model.base_url, extra_toml=extra_toml)


def tool_outputs(model: ScriptedModel) -> list[Any]:
    """Each tool result Codex sent the model, once per call, in order (what the model learned).

    Every request repeats the conversation so far, so a result shows up again in later ones.
    """
    outputs: dict[str, Any] = {}
    for body in model.requests:
        for item in body.get("input", []):
            if item.get("type") == "function_call_output":
                outputs.setdefault(item["call_id"], item["output"])
    return list(outputs.values())


async def answered(
    open_conversation: OpenConversation,
    answers: Answers,
    prompt: str,
    stop: str = "end_turn",
    **options: Any,
) -> Conversation:
    """A conversation of one prompt that ends ``stop``, the client answering what the agent
    asks with ``answers``; returned once the bridge has gone."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(on_request=answers, **options) as talk:
            assert await talk.prompt(prompt) == Ended({"stopReason": stop})
    return talk


def recorded(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(dir, message)`` of every message a recording holds (from the client, to and from Codex)."""
    return [
        (entry.record.dir, msgspec.json.decode(entry.record.data()))
        for entry in read_recording(path).entries
        if isinstance(entry.record, MessageRecord) and entry.record.message is not msgspec.UNSET
    ]


# -- permission requests ------------------------------------------------------------------------


@pytest.mark.transports("stdio", "daemon")
async def test_an_escalated_command_allowed_once_runs_and_the_turn_ends(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    answers = Answers(permission="allow_once")
    talk = await answered(open_conversation, answers, ESCALATED)
    client, sid = talk.client, talk.sid
    [request] = answers.asked_for("session/request_permission")
    assert request["sessionId"] == sid
    tool_call = request["toolCall"]
    assert tool_call["toolCallId"] == "call_resp_1_0"  # Codex's item id for the call
    assert tool_call["title"] == "touch approved.txt"
    assert tool_call["kind"] == "execute"
    assert tool_call["rawInput"]["cwd"] == str(workspace)
    options = [o["optionId"] for o in request["options"]]
    assert options == ["allow_once", "allow_session", "allow_prefix", "reject_once"]
    # It names the tool call the client was shown when Codex started the item.
    kinds = [
        (m.get("method"), (m.get("params") or {}).get("update", {}).get("sessionUpdate"))
        for m in client.received
    ]
    announced = next(
        i
        for i, m in enumerate(client.received)
        if kinds[i] == ("session/update", "tool_call")
        and m["params"]["update"]["toolCallId"] == tool_call["toolCallId"]
    )
    asked_at = kinds.index(("session/request_permission", None))
    assert announced < asked_at
    assert (workspace / "approved.txt").exists()
    assert client.text_of(sid).endswith("done")


@pytest.mark.transports("stdio", "daemon")
async def test_a_rejected_command_ends_declined_and_the_turn_goes_on(
    open_conversation: OpenConversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    answers = Answers(permission="reject_once")
    talk = await answered(open_conversation, answers, ESCALATED)
    client, sid = talk.client, talk.sid
    assert not (workspace / "approved.txt").exists()
    [output] = tool_outputs(scripted_model)
    assert "rejected by user" in output  # Codex declined the item and told the model so
    assert client.text_of(sid).endswith("done")


@pytest.mark.transports("stdio", "daemon")
async def test_a_cancelled_outcome_cancels_the_turn(
    open_conversation: OpenConversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    answers = Answers(permission=None)
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(on_request=answers) as talk:
            assert await talk.prompt(ESCALATED) == Ended({"stopReason": "cancelled"})
            # The session keeps working.
            assert await talk.prompt("@@ say again") == Ended({"stopReason": "end_turn"})
    assert not (workspace / "approved.txt").exists()
    # The turn stopped there: the model hears of the call only with the next prompt.
    [output] = tool_outputs(scripted_model)
    assert "aborted by user" in output


@asynccontextmanager
async def interrupted_while_asked(
    open_conversation: OpenConversation,
    out: Path,
    interrupt: Callable[[Conversation], Awaitable[None]],
) -> AsyncIterator[Conversation]:
    """A conversation recorded to ``out`` whose prompt (the escalated command) is cancelled
    by ``interrupt``, run while the client is asked; the client's "allow" arrives after it."""
    answers = Answers(permission="allow_once", hold=True)
    async with open_conversation(argv=record_argv(out), on_request=answers) as talk:
        outcome: dict[str, Any] = {}

        async def prompt() -> None:
            outcome["result"] = await talk.prompt(ESCALATED)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            await answers.asked.wait()
            await interrupt(talk)
            answers.release()  # the client answers "allow", after the interruption
            await wait_all_tasks_blocked()
        assert outcome["result"] == Ended({"stopReason": "cancelled"})
        yield talk


def codex_approval(traffic: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    """Codex's command approval in a recording, and the bridge's answers to it."""
    [approval] = [
        m for _d, m in traffic if m.get("method") == "item/commandExecution/requestApproval"
    ]
    answers = [
        m
        for d, m in traffic
        if d == "to_codex" and m.get("id") == approval["id"] and "method" not in m
    ]
    return approval, answers


def permission_request_id(client: AcpClient) -> Any:
    [rid] = [m["id"] for m in client.received if m.get("method") == "session/request_permission"]
    return rid


async def test_cancel_while_asking_answers_codex_cancel_once_and_the_late_allow_counts_for_nothing(
    open_conversation: OpenConversation, workspace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cancel.codex.jsonl"

    async def cancel(talk: Conversation) -> None:
        await talk.client.notify("session/cancel", {"sessionId": talk.sid})
        await talk.client.wait_for(lambda m: m.get("result") == Ended({"stopReason": "cancelled"}))

    with trio.fail_after(SCENARIO_SECONDS):
        async with interrupted_while_asked(open_conversation, out, cancel) as talk:
            assert await talk.prompt("@@ say still here") == Ended({"stopReason": "end_turn"})
    assert not (workspace / "approved.txt").exists()

    traffic = recorded(out)
    approval, answers_to_codex = codex_approval(traffic)
    assert answers_to_codex == [{"id": approval["id"], "result": {"decision": "cancel"}}]
    # ... at once: before Codex reported the turn over.
    order = [m for _d, m in traffic]
    ended = next(i for i, m in enumerate(order) if m.get("method") == "turn/completed")
    assert order.index(answers_to_codex[0]) < ended
    # The client's allow did arrive, after the cancel, and was not passed on.
    permission_id = permission_request_id(talk.client)
    late = [
        m
        for d, m in traffic
        if d == "from_client" and m.get("id") == permission_id and "method" not in m
    ]
    assert late and late[0]["result"]["outcome"]["optionId"] == "allow_once"


async def test_closing_the_session_while_asking_cancels_and_withdraws_the_question(
    open_conversation: OpenConversation, workspace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "close.codex.jsonl"

    async def close(talk: Conversation) -> None:
        assert await talk.client.request("session/close", {"sessionId": talk.sid}) == {}

    with trio.fail_after(SCENARIO_SECONDS):
        async with interrupted_while_asked(open_conversation, out, close) as talk:
            pass
    assert not (workspace / "approved.txt").exists()
    # The client's dialog is withdrawn: the turn it was about has ended.
    assert {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": permission_request_id(talk.client)},
    } in (talk.client.received)
    approval, to_codex = codex_approval(recorded(out))
    assert to_codex == [{"id": approval["id"], "result": {"decision": "cancel"}}]


async def test_a_client_that_disconnects_while_asked_leaves_codex_a_cancel(
    open_conversation: OpenConversation, workspace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "gone.codex.jsonl"
    answers = Answers(permission="allow_once", hold=True)
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(argv=record_argv(out), on_request=answers) as talk:
            client, sid = talk.client, talk.sid
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.prompt, sid, ESCALATED)
                await answers.asked.wait()
                nursery.cancel_scope.cancel()
        # Leaving the block closes the bridge's stdin: the client is gone, never answering.
    entries = read_recording(out).entries
    lost = next(
        i
        for i, e in enumerate(entries)
        if not isinstance(e.record, MessageRecord) and e.record.event == "client_lost"
    )
    after = [
        msgspec.json.decode(e.record.data())
        for e in entries[lost:]
        if isinstance(e.record, MessageRecord) and e.record.dir == "to_codex"
    ]
    approval, _ = codex_approval(recorded(out))
    assert {"id": approval["id"], "result": {"decision": "cancel"}} in after
    assert not (workspace / "approved.txt").exists()


@pytest.mark.transports("stdio", "daemon")
async def test_a_patch_inside_git_asks_with_its_path_and_applies_once_allowed(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    (workspace / ".git").mkdir()
    answers = Answers(permission="allow_once")
    await answered(open_conversation, answers, PATCH_IN_GIT)
    [request] = answers.asked_for("session/request_permission")
    tool_call = request["toolCall"]
    assert tool_call["title"] == "Create .git/approved-note.txt"
    assert tool_call["kind"] == "edit"
    assert tool_call["locations"] == [{"path": str(workspace / ".git" / "approved-note.txt")}]
    assert [o["optionId"] for o in request["options"]] == [
        "allow_once",
        "allow_session",
        "reject_once",
    ]
    assert (workspace / ".git" / "approved-note.txt").read_text() == "hi\n"


@pytest.mark.transports("stdio", "daemon")
async def test_a_permissions_request_grants_what_the_model_asked_for(
    open_conversation: OpenConversation,
    bridge_env: dict[str, str],
    scripted_model: ScriptedModel,
    tmp_path: Path,
) -> None:
    with_config(bridge_env, scripted_model, "[features]\nrequest_permissions_tool = true\n")
    wanted = str(tmp_path / "elsewhere")
    script = (
        '@@ call request_permissions {"permissions":{"file_system":{"write":["'
        + wanted
        + '"]}},"reason":"need it"}\n@@ then\n@@ say done'
    )
    answers = Answers(permission="allow_session")
    client = (await answered(open_conversation, answers, script)).client
    [request] = answers.asked_for("session/request_permission")
    assert request["toolCall"]["title"] == f"Grant write access to {wanted}"
    [output] = tool_outputs(scripted_model)
    granted = msgspec.json.decode(output)
    assert granted["scope"] == "session"
    assert granted["permissions"]["file_system"]["write"] == [wanted]
    closed = [
        u["update"]
        for u in client.updates
        if u["update"].get("toolCallId") == request["toolCall"]["toolCallId"]
    ]
    assert closed[-1]["status"] == "completed"


@pytest.mark.parametrize(
    ("option", "asked", "ran"),
    [("allow_once", 2, True), ("allow_session", 1, True), ("reject_once", 2, False)],
)
@pytest.mark.transports("stdio", "daemon")
async def test_an_mcp_tool_call_asks_permission_first(
    open_conversation: OpenConversation,
    option: str,
    asked: int,
    ran: bool,
    bridge_env: dict[str, str],
    scripted_model: ScriptedModel,
) -> None:
    with_config(bridge_env, scripted_model, MCP_SERVER_TOML)
    answers = Answers(permission=option)
    twice = MCP_ECHO.replace("@@ then\n@@ say done", "@@ then\n" + MCP_ECHO)
    talk = await answered(open_conversation, answers, twice)
    client, sid = talk.client, talk.sid
    requests = answers.asked_for("session/request_permission")
    assert len(requests) == asked  # "for this session": Codex does not ask again
    assert requests[0]["toolCall"]["toolCallId"] == "call_resp_1_0"
    assert requests[0]["toolCall"]["title"] == "testmcp: echo"
    assert [o["optionId"] for o in requests[0]["options"]] == [
        "allow_once",
        "allow_session",
        "allow_always",
        "reject_once",
    ]
    outputs = msgspec.json.encode(tool_outputs(scripted_model)).decode()
    if ran:
        assert outputs.count("echo: hello") == 2
    else:
        assert outputs.count("user rejected MCP tool call") == 2
    assert client.text_of(sid).endswith("done")


# -- questions ---------------------------------------------------------------------------------


@pytest.mark.transports("stdio", "daemon")
async def test_a_question_reaches_a_client_with_forms_and_its_answer_the_model(
    open_conversation: OpenConversation, bridge_env: dict[str, str], scripted_model: ScriptedModel
) -> None:
    with_config(bridge_env, scripted_model, QUESTIONS_TOML)
    answers = Answers(elicitation={"action": "accept", "content": {"color": "Blue"}})
    talk = await answered(open_conversation, answers, QUESTION, capabilities=FORMS, unstable=True)
    sid = talk.sid
    [form] = answers.asked_for("elicitation/create")
    assert form["sessionId"] == sid and form["mode"] == "form"
    assert form["message"] == "Which color?"
    choices = form["requestedSchema"]["properties"]["color"]["oneOf"]
    assert [c["const"] for c in choices] == ["Red", "Blue"]
    [output] = tool_outputs(scripted_model)
    assert msgspec.json.decode(output) == {"answers": {"color": {"answers": ["Blue"]}}}


@pytest.mark.transports("stdio", "daemon")
async def test_a_question_for_a_client_without_forms_gets_no_answers_and_the_turn_goes_on(
    open_conversation: OpenConversation, bridge_env: dict[str, str], scripted_model: ScriptedModel
) -> None:
    with_config(bridge_env, scripted_model, QUESTIONS_TOML)
    answers = Answers()
    talk = await answered(open_conversation, answers, QUESTION)
    client, sid = talk.client, talk.sid
    assert answers.requests == []  # never asked: the client cannot show a form
    [output] = tool_outputs(scripted_model)
    assert msgspec.json.decode(output) == {"answers": {}}
    assert client.text_of(sid).endswith("done")
