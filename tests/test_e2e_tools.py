"""Tool calls end to end: a real ACP client, the bridge, the real Codex 0.169, the scripted model."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation
from tests.support.reading import Ended
from tests.support.scenarios.tools import (
    BIG,
    COMMAND,
    FAILED_COMMAND,
    IMAGE_VIEW,
    MCP_PROMPT,
    MCP_TOML,
    NOTES,
    PATCH_PROMPT,
    PIXEL_PNG_BASE64,
    PLAN_PROMPT,
    PLAN_TOML,
    READ_COMMANDS,
    READER_CAPABILITIES,
    WEB_SEARCH,
    ZED_CAPABILITIES,
    answer_file_reads,
)

pytestmark = pytest.mark.e2e


def tool_updates(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return [
        u["update"]
        for u in client.updates
        if u["sessionId"] == sid
        and u["update"]["sessionUpdate"] in ("tool_call", "tool_call_update")
    ]


def calls(client: AcpClient, sid: str) -> dict[str, list[dict[str, Any]]]:
    """Each tool call's updates, by tool call id, in order; the first is its ``tool_call``."""
    found: dict[str, list[dict[str, Any]]] = {}
    for update in tool_updates(client, sid):
        found.setdefault(update["toolCallId"], []).append(update)
    for updates in found.values():
        assert updates[0]["sessionUpdate"] == "tool_call", "announced before it is updated"
        assert all(u["sessionUpdate"] == "tool_call_update" for u in updates[1:])
    return found


def merged(updates: list[dict[str, Any]]) -> dict[str, Any]:
    """A tool call as the client ends up seeing it: each update's fields replace the last."""
    state: dict[str, Any] = {}
    for update in updates:
        state.update({k: v for k, v in update.items() if k != "_meta"})
    return state


def texts(call: dict[str, Any]) -> str:
    return "\n".join(
        c["content"]["text"]
        for c in call.get("content", [])
        if c["type"] == "content" and c["content"]["type"] == "text"
    )


Run = Callable[..., Awaitable[tuple[AcpClient, str, Any]]]


@pytest.fixture
def run(
    open_conversation: OpenConversation, codex_home: Path, scripted_model: ScriptedModel
) -> Run:
    """``client, sid, result = await run(prompt, **options)``: one prompt in a conversation
    of its own (options: ``open_conversation``'s, and ``extra_toml`` for Codex's config),
    returned once the bridge has gone."""

    async def prompted(
        prompt: str, *, extra_toml: str = "", **options: Any
    ) -> tuple[AcpClient, str, Any]:
        if extra_toml:
            write_codex_home(codex_home, scripted_model.base_url, extra_toml=extra_toml)
        with trio.fail_after(SCENARIO_SECONDS):
            async with open_conversation(**options) as talk:
                result = await talk.prompt(prompt)
        return talk.client, talk.sid, result

    return prompted


async def test_a_command_streams_its_output_and_completes(run: Run) -> None:
    client, sid, result = await run(COMMAND)
    assert result == Ended({"stopReason": "end_turn"})
    [updates] = calls(client, sid).values()
    call = updates[0]
    assert (call["title"], call["kind"], call["status"]) == ("echo hi", "execute", "in_progress")
    assert call["rawInput"]["command"].endswith("'echo hi'")  # Codex's shell line, raw
    final = merged(updates)
    assert final["status"] == "completed"
    assert "hi" in texts(final)
    assert final["rawOutput"]["exitCode"] == 0
    assert client.text_of(sid) == "done"


async def test_output_shows_while_the_command_still_runs(run: Run) -> None:
    # Codex 0.169 sometimes drops a command's very first output delta (its
    # aggregatedOutput still has it), so output is printed at three moments.
    slow = (
        '@@ call exec_command {"cmd": "echo first; sleep 2; echo second; sleep 2; echo third"}'
        "\n@@ then\n@@ say done"
    )
    client, sid, _ = await run(slow)
    [updates] = calls(client, sid).values()
    running = [texts(u) for u in updates[1:-1] if "content" in u]
    assert any(("first" in t or "second" in t) and "third" not in t for t in running), running
    assert all(word in texts(merged(updates)) for word in ("first", "second", "third"))


async def test_a_failed_command_fails_with_its_exit_code(run: Run) -> None:
    client, sid, result = await run(FAILED_COMMAND)
    assert result == Ended({"stopReason": "end_turn"})  # the turn goes on after a failed command
    [updates] = calls(client, sid).values()
    final = merged(updates)
    assert (final["title"], final["status"]) == ("echo oops >&2; exit 3", "failed")
    assert "oops" in texts(final) and "Exit code 3" in texts(final)
    assert final["rawOutput"]["exitCode"] == 3


async def test_reading_commands_are_read_and_search_calls_with_locations(
    run: Run, workspace: Path
) -> None:
    (workspace / "notes.md").write_text(NOTES)
    (workspace / "docs").mkdir()
    (workspace / "docs" / "guide.txt").write_text("hello guide\n")
    client, sid, _ = await run(READ_COMMANDS)
    cat, grep, ls = (merged(u) for u in calls(client, sid).values())
    assert (cat["title"], cat["kind"], cat["status"]) == ("cat notes.md", "read", "completed")
    assert cat["locations"] == [{"path": str(workspace / "notes.md")}]
    assert "```md\n" in texts(cat) and "hello there" in texts(cat)
    assert (grep["title"], grep["kind"]) == ("grep -rn hello .", "search")
    assert grep["locations"] == [{"path": str(workspace)}]
    assert (ls["title"], ls["kind"]) == ("ls docs", "search")
    assert ls["locations"] == [{"path": str(workspace / "docs")}]
    assert "guide.txt" in texts(ls)


async def test_zed_gets_command_output_as_terminal_meta(run: Run, workspace: Path) -> None:
    client, sid, _ = await run(
        COMMAND,
        capabilities=ZED_CAPABILITIES,
        on_request=answer_file_reads,
    )
    [updates] = calls(client, sid).values()
    call, *middle, final = updates
    call_id = call["toolCallId"]
    assert call["content"] == [{"type": "terminal", "terminalId": call_id}]
    assert call["_meta"]["terminal_info"] == {"terminal_id": call_id, "cwd": str(workspace)}
    data = "".join(u["_meta"]["terminal_output"]["data"] for u in middle)
    assert "hi" in data
    assert all(set(u) == {"sessionUpdate", "toolCallId", "_meta"} for u in middle)
    assert final["_meta"]["terminal_exit"] == {
        "terminal_id": call_id,
        "exit_code": 0,
        "signal": None,
    }
    assert final["status"] == "completed"


async def test_a_patch_shows_an_added_file_and_the_hunks_of_an_updated_one(
    run: Run, workspace: Path
) -> None:
    (workspace / "big.txt").write_text(BIG)
    client, sid, result = await run(PATCH_PROMPT)
    assert result == Ended({"stopReason": "end_turn"})
    assert (workspace / "new.txt").read_text() == "hello\nworld\n"
    [updates] = calls(client, sid).values()
    final = merged(updates)
    assert (final["kind"], final["status"]) == ("edit", "completed")
    assert final["title"] == "Edit 2 files: big.txt, new.txt"
    diffs = {d["path"]: d for d in final["content"] if d["type"] == "diff"}
    added = diffs[str(workspace / "new.txt")]
    assert added.get("oldText") is None and added["newText"] == "hello\nworld\n"
    hunk = diffs[str(workspace / "big.txt")]
    assert (hunk["oldText"], hunk["newText"]) == ("l10\nl11\nl12\n", "l10\nL11\nl12\n")
    assert hunk["_meta"]["hunk"]["oldStart"] == 10
    assert {loc["path"] for loc in final["locations"]} == set(diffs)


async def test_a_client_that_reads_files_sees_whole_files_even_once_patched(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    big = workspace / "big.txt"
    big.write_text(BIG)
    reads: list[str] = []

    async def reader(method: str, params: Any) -> Any:
        if method == "fs/read_text_file":
            reads.append(params["path"])
            # Answer only once Codex reports the patch applied: the bridge must tell the
            # patched text from the original and still show the change the right way round.
            await client.wait_for(patch_completed)
        return await answer_file_reads(method, params)

    def patch_completed(message: dict[str, Any]) -> bool:
        update = message.get("params", {}).get("update", {})
        return bool(update.get("kind") == "edit" and update.get("status") == "completed")

    def whole_diff(message: dict[str, Any]) -> bool:
        update = message.get("params", {}).get("update", {})
        content = update.get("content")
        # Tool call content is a list; an answer's chunk (a single block) can come first.
        return isinstance(content, list) and any(
            c.get("type") == "diff" and c["path"] == str(big) and "_meta" not in c for c in content
        )

    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(capabilities=READER_CAPABILITIES, on_request=reader) as talk:
            client, sid = talk.client, talk.sid
            assert await client.prompt(sid, PATCH_PROMPT) == Ended({"stopReason": "end_turn"})
            # The answer may come after the turn: the update follows it whenever it does.
            await client.wait_for(whole_diff)
    assert reads == [str(big)], "only the updated file is read, once"
    [updates] = calls(client, sid).values()
    final = merged(updates)
    assert final["status"] == "completed"
    [whole] = [d for d in final["content"] if d["path"] == str(big)]
    assert whole["oldText"] == BIG
    assert whole["newText"] == BIG.replace("l11\n", "L11\n")
    [added] = [d for d in final["content"] if d["path"] == str(workspace / "new.txt")]
    assert added["newText"] == "hello\nworld\n"


async def test_a_plan_is_sent_as_an_acp_plan(run: Run) -> None:
    client, sid, result = await run(PLAN_PROMPT, extra_toml=PLAN_TOML)
    assert result == Ended({"stopReason": "end_turn"})
    [plan] = [u["update"] for u in client.updates if u["update"]["sessionUpdate"] == "plan"]
    assert plan["entries"] == [
        {"content": "Read the code", "priority": "medium", "status": "completed"},
        {"content": "Fix the bug", "priority": "medium", "status": "in_progress"},
        {"content": "Run the tests", "priority": "medium", "status": "pending"},
    ]
    assert plan["_meta"] == {"explanation": "Three steps"}
    assert tool_updates(client, sid) == [], "update_plan is the plan, not a tool call"


async def test_a_web_search_is_a_search_tool_call(run: Run) -> None:
    client, sid, _ = await run(WEB_SEARCH)
    [updates] = calls(client, sid).values()
    final = merged(updates)
    assert (final["kind"], final["status"]) == ("search", "completed")
    assert final["title"] == "Search the web: trio structured concurrency"
    assert client.text_of(sid) == "found"


async def test_an_image_view_is_a_read_of_the_image(run: Run, workspace: Path) -> None:
    (workspace / "pixel.png").write_bytes(base64.b64decode(PIXEL_PNG_BASE64))
    client, sid, _ = await run(IMAGE_VIEW)
    [updates] = calls(client, sid).values()
    final = merged(updates)
    assert (final["title"], final["kind"], final["status"]) == (
        "View image pixel.png",
        "read",
        "completed",
    )
    assert final["locations"] == [{"path": str(workspace / "pixel.png")}]
    [link] = [c["content"] for c in final["content"]]
    assert link["type"] == "resource_link" and link["mimeType"] == "image/png"


async def test_mcp_tool_calls_show_their_result_and_their_failure(run: Run) -> None:
    client, sid, result = await run(MCP_PROMPT, extra_toml=MCP_TOML)
    assert result == Ended({"stopReason": "end_turn"})
    echo, fail = (merged(u) for u in calls(client, sid).values())
    assert (echo["title"], echo["kind"], echo["status"]) == ("testmcp: echo", "other", "completed")
    assert echo["rawInput"] == {"text": "hello"}
    assert texts(echo) == "echo: hello"
    assert (fail["title"], fail["status"]) == ("testmcp: fail", "failed")
    assert texts(fail) == "it failed"
