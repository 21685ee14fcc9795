"""Tool calls: commands (run, failed, reading, in Zed's terminal), patches, a plan, web search,
an image view and an MCP tool, each as the real Codex reports them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from bridge.acp_client import AcpClient, default_request_handler

from . import Scenario, open_session

#: The tiny MCP server the MCP scenario configures (offline, stdio).
MCP_SERVER = Path(__file__).resolve().parents[1] / "mcp_server.py"

COMMAND = '@@ call exec_command {"cmd": "echo hi"}\n@@ then\n@@ say done'
FAILED_COMMAND = '@@ call exec_command {"cmd": "echo oops >&2; exit 3"}\n@@ then\n@@ say done'
READ_COMMANDS = (
    '@@ call exec_command {"cmd": "cat notes.md"}\n@@ then\n'
    '@@ call exec_command {"cmd": "grep -rn hello ."}\n@@ then\n'
    '@@ call exec_command {"cmd": "ls docs"}\n@@ then\n@@ say done'
)
PATCH = (
    "*** Begin Patch\n"
    "*** Add File: new.txt\n+hello\n+world\n"
    "*** Update File: big.txt\n@@\n l10\n-l11\n+L11\n l12\n"
    "*** End Patch"
)
PATCH_PROMPT = (
    "@@ call exec_command "
    + json.dumps({"cmd": f"apply_patch <<'EOF'\n{PATCH}\nEOF\n"})
    + "\n@@ then\n@@ say patched"
)
PLAN_PROMPT = (
    "@@ call update_plan "
    + json.dumps(
        {
            "explanation": "Three steps",
            "plan": [
                {"step": "Read the code", "status": "completed"},
                {"step": "Fix the bug", "status": "in_progress"},
                {"step": "Run the tests", "status": "pending"},
            ],
        }
    )
    + "\n@@ then\n@@ say planned"
)
WEB_SEARCH = "@@ web_search trio structured concurrency\n@@ say found"
IMAGE_VIEW = '@@ call view_image {"path": "pixel.png"}\n@@ then\n@@ say seen'
MCP_PROMPT = (
    '@@ call mcp__testmcp/echo {"text": "hello"}\n@@ then\n'
    "@@ call mcp__testmcp/fail {}\n@@ then\n@@ say done"
)

PLAN_TOML = "[tools]\nupdate_plan = { enabled = true }\n"
MCP_TOML = (
    "[mcp_servers.testmcp]\n"
    f"command = {json.dumps(sys.executable)}\n"
    f"args = [{json.dumps(str(MCP_SERVER))}]\n"
    # Run its tools without asking: approvals are not what these scenarios show.
    'default_tools_approval_mode = "approve"\n'
)

BIG = "".join(f"l{i}\n" for i in range(1, 41))
NOTES = "# Notes\n\nhello there\n"
#: A one-pixel PNG.
PIXEL_PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

#: What Zed declares: file reads, terminals, and the `_meta` key for terminal output.
ZED_CAPABILITIES: dict[str, Any] = {
    "fs": {"readTextFile": True, "writeTextFile": True},
    "terminal": True,
    "_meta": {"terminal_output": True, "terminal-auth": True},
}
#: A client that reads files for the agent, nothing more.
READER_CAPABILITIES: dict[str, Any] = {"fs": {"readTextFile": True, "writeTextFile": False}}


async def answer_file_reads(method: str, params: Any) -> Any:
    """A client's ``fs/read_text_file``: the file as it is on disk right now."""
    if method == "fs/read_text_file":
        return {"content": await trio.Path(params["path"]).read_text()}
    return await default_request_handler(method, params)


async def _run(client: AcpClient, workspace: str, prompt: str, **kw: Any) -> None:
    session = await open_session(client, workspace, kw.get("capabilities"))
    await client.prompt(session, prompt)


async def tool_command(client: AcpClient, workspace: str) -> None:
    await _run(client, workspace, COMMAND)


async def tool_command_failed(client: AcpClient, workspace: str) -> None:
    await _run(client, workspace, FAILED_COMMAND)


async def tool_command_read(client: AcpClient, workspace: str) -> None:
    await _run(client, workspace, READ_COMMANDS)


async def tool_command_terminal(client: AcpClient, workspace: str) -> None:
    client.on_request = answer_file_reads
    await _run(client, workspace, COMMAND, capabilities=ZED_CAPABILITIES)


async def tool_patch(client: AcpClient, workspace: str) -> None:
    await _run(client, workspace, PATCH_PROMPT)


async def tool_patch_whole_files(client: AcpClient, workspace: str) -> None:
    client.on_request = answer_file_reads
    await _run(client, workspace, PATCH_PROMPT, capabilities=READER_CAPABILITIES)


async def tool_plan(client: AcpClient, workspace: str) -> None:
    await _run(client, workspace, PLAN_PROMPT)


async def tool_web_search(client: AcpClient, workspace: str) -> None:
    await _run(client, workspace, WEB_SEARCH)


async def tool_image_view(client: AcpClient, workspace: str) -> None:
    import base64

    await trio.Path(workspace, "pixel.png").write_bytes(base64.b64decode(PIXEL_PNG_BASE64))
    await _run(client, workspace, IMAGE_VIEW)


async def tool_mcp(client: AcpClient, workspace: str) -> None:
    await _run(client, workspace, MCP_PROMPT)


#: A command the turn waits on for longer than any test: only a cancel ends it.
LONG_COMMAND = (
    '@@ call exec_command {"cmd": "sleep 300", "yield_time_ms": 60000}\n@@ then\n@@ say done'
)


async def cancel_stops_command(client: AcpClient, workspace: str) -> None:
    """The turn waits on a command; the cancel interrupts the turn and stops the command
    (``thread/backgroundTerminals/clean``), then the session takes its next prompt."""
    session = await open_session(client, workspace)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt, session, LONG_COMMAND)
        await client.wait_for(
            lambda _m: any(u["update"]["sessionUpdate"] == "tool_call" for u in client.updates)
        )
        await trio.sleep(0.5)  # the command runs
        await client.notify("session/cancel", {"sessionId": session})
    await client.prompt(session, "@@ say after")


SCENARIOS = [
    Scenario("tool_command", "a command that runs: echo hi, streamed, completed", tool_command),
    Scenario("tool_command_failed", "a command that fails with exit code 3", tool_command_failed),
    Scenario(
        "tool_command_read",
        "commands Codex reads as a file read, a search and a listing (kinds read/search)",
        tool_command_read,
        files=(("notes.md", NOTES), ("docs/guide.txt", "hello guide\n")),
    ),
    Scenario(
        "tool_command_terminal",
        "a command for a client that declares _meta.terminal_output (Zed): terminal meta",
        tool_command_terminal,
    ),
    Scenario(
        "tool_patch",
        "apply_patch adding a file and updating another: diffs from Codex's hunks",
        tool_patch,
        files=(("big.txt", BIG),),
    ),
    Scenario(
        "tool_patch_whole_files",
        "the same patch for a client that reads files: whole old and new texts",
        tool_patch_whole_files,
        files=(("big.txt", BIG),),
    ),
    Scenario("tool_plan", "update_plan: an ACP plan", tool_plan, extra_toml=PLAN_TOML),
    Scenario("tool_web_search", "a hosted web search", tool_web_search),
    Scenario("tool_image_view", "view_image of a workspace file", tool_image_view),
    Scenario(
        "tool_mcp",
        "an MCP tool that answers and one that fails (a local stdio MCP server)",
        tool_mcp,
        extra_toml=MCP_TOML,
    ),
    Scenario(
        "cancel_stops_command",
        "session/cancel while the turn waits on a command: the turn and the command stop",
        cancel_stops_command,
    ),
]
