"""The session lifecycle's scenarios: load with history, resume, list, close, fork, MCP servers.

A load needs a history made before it: ``prepare`` makes it through a first bridge
(not recorded) on the same Codex home; the recorded connection finds the session with
``session/list`` and loads it, as an editor does after a restart.
"""

from __future__ import annotations

import contextlib
import sys

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError

from . import Scenario, open_session, streaming

COMMAND_PROMPT = '@@ call exec_command {"cmd": "echo from-the-shell"}\n@@ then\n@@ say ran it'

#: A stdio MCP server that offers one tool without arguments, ``TOOL_NAME``, and answers
#: every other request with an empty result.
_PROBE_SERVER = """\
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": message["params"].get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "probe", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "TOOL_NAME", "description": "d",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def probe_mcp_server(tool: str, prelude: str = "") -> str:
    """The script of a stdio MCP server offering the one tool ``tool``; ``prelude``: Python
    it runs first."""
    return prelude + _PROBE_SERVER.replace("TOOL_NAME", tool)


MCP_PROBE = probe_mcp_server("probe_tool")


async def make_history(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace)
    await client.prompt(session, "@@ reason 4\n@@ words 6")
    await client.prompt(session, COMMAND_PROMPT)


async def only_session(client: AcpClient) -> str:
    listed = await client.request("session/list", {})
    [info] = listed["sessions"]
    return str(info["sessionId"])


async def load_with_history(client: AcpClient, workspace: str) -> None:
    await client.initialize()
    session = await only_session(client)
    await client.request("session/load", {"sessionId": session, "cwd": workspace, "mcpServers": []})
    await client.prompt(session, "@@ words 3")
    with contextlib.suppress(RpcError):  # already open: a clear error
        await client.request("session/load", {"sessionId": session, "cwd": workspace})


async def resume_session(client: AcpClient, workspace: str) -> None:
    await client.initialize()
    session = await only_session(client)
    await client.request("session/resume", {"sessionId": session, "cwd": workspace})
    await client.prompt(session, "@@ words 3")
    with contextlib.suppress(RpcError):  # already open
        await client.request("session/resume", {"sessionId": session, "cwd": workspace})
    with contextlib.suppress(RpcError):  # no such thread
        missing = "019a0000-0000-7000-8000-000000000000"
        await client.request("session/load", {"sessionId": missing, "cwd": workspace})


async def list_sessions(client: AcpClient, workspace: str) -> None:
    await client.initialize()
    for n in range(3):
        session = await client.new_session(workspace)
        await client.prompt(session, f"@@ say session {n}")
    other = await client.new_session(f"{workspace}/sub")
    await client.prompt(other, "@@ say elsewhere")
    await client.request("session/list", {})
    await client.request("session/list", {"cwd": f"{workspace}/sub"})
    with contextlib.suppress(RpcError):  # a cursor Codex never gave
        await client.request("session/list", {"cursor": "not-a-cursor"})


async def close_while_running(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace)
    async with streaming(client, session, "@@ words 2000 delay_ms=10", 15):
        await client.request("session/close", {"sessionId": session})
    for method, params in [
        ("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}),
        ("session/close", {"sessionId": session}),
    ]:
        with contextlib.suppress(RpcError):  # the session is gone: not found
            await client.request(method, params)


async def fork_session(client: AcpClient, workspace: str) -> None:
    # ``session/fork`` is unstable ACP: offered to a client that speaks the unstable schema.
    session = await open_session(client, workspace, {"subagents": {}})
    await client.prompt(session, "@@ say remember ZEBRA-42")
    forked = await client.request(
        "session/fork", {"sessionId": session, "cwd": workspace, "mcpServers": []}
    )
    await client.prompt(forked["sessionId"], "@@ say in the fork")


async def mcp_servers(client: AcpClient, workspace: str) -> None:
    await client.initialize()
    server = {
        "name": "probe server",
        "command": sys.executable,
        "args": [f"{workspace}/mcp_probe.py"],
        "env": [{"name": "PROBE", "value": "1"}],
    }
    result = await client.request("session/new", {"cwd": workspace, "mcpServers": [server]})
    await client.prompt(result["sessionId"], "@@ say tools?")


SCENARIOS = [
    Scenario(
        "load_with_history",
        "a new bridge lists and loads a session: reasoning, answers, a command, replayed first",
        load_with_history,
        prepare=make_history,
    ),
    Scenario(
        "resume_session",
        "a new bridge resumes a session without replay; a missing one is not found",
        resume_session,
        prepare=make_history,
    ),
    Scenario(
        "list_sessions",
        "session/list of root threads, filtered by cwd, and a bad cursor",
        list_sessions,
        files=(("sub/.keep", ""),),
    ),
    Scenario(
        "close_while_running",
        "session/close mid-stream: the prompt ends cancelled, then the session is gone",
        close_while_running,
    ),
    Scenario("fork_session", "session/fork for a client of the unstable schema", fork_session),
    Scenario(
        "mcp_servers",
        "a client's stdio MCP server reaches Codex in thread/start's config",
        mcp_servers,
        files=(("mcp_probe.py", MCP_PROBE),),
    ),
]
