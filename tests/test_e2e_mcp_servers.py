"""The MCP servers a session uses, told to the user in words, end to end: the real bridge,
the real Codex, the scripted model. A server Codex cannot start (a program that is not
there, an HTTP server on a closed port), one the bridge leaves out (SSE), and one that
wants an OAuth sign-in (:mod:`tests.support.oauth_mcp_server`), signed in to through the
page Codex hands out.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient, default_request_handler
from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation
from tests.support.oauth_mcp_server import TOOL, browse, serve_oauth_mcp

pytestmark = pytest.mark.e2e

NOTICES: dict[str, Any] = {"session": {"notices": {}}}


def _stdio(name: str, command: str, version: int) -> dict[str, Any]:
    server: dict[str, Any] = {"name": name, "command": command, "args": [], "env": []}
    if version == 2:
        server["type"] = "stdio"  # v2 names every transport
    return server


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _told(message: dict[str, Any], session: str, needle: str) -> bool:
    """Whether ``message`` tells the user of ``session`` something containing ``needle``."""
    if message.get("method") != "session/update" or message["params"]["sessionId"] != session:
        return False
    return needle in json.dumps(message["params"]["update"])


async def _told_of(client: AcpClient, session: str, needle: str) -> dict[str, Any]:
    """The update that tells ``needle`` on ``session``, once it comes."""
    message = await client.wait_for(lambda m: _told(m, session, needle))
    update: dict[str, Any] = message["params"]["update"]
    return update


@pytest.mark.acp_versions(1, 2)
async def test_a_stdio_server_whose_program_is_missing_is_told_with_codexs_reason(
    open_conversation: OpenConversation, workspace: Path, tmp_path: Path, acp_version: int
) -> None:
    missing = str(tmp_path / "no-such-mcp-server")
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(session=False) as talk:
            client = talk.client
            opened = await client.request(
                "session/new",
                {"cwd": str(workspace), "mcpServers": [_stdio("broken", missing, acp_version)]},
            )
            sid = talk.sid = opened["sessionId"]
            # Told without a prompt: Codex starts a thread's servers as the thread starts.
            update = await _told_of(client, sid, "MCP server 'broken' did not start")
            if acp_version == 2:
                # Every v2 client takes notices.
                assert update["sessionUpdate"] == "notice" and update["severity"] == "error"
                reason = update["description"]
            else:
                # This v1 client declares no notices: an agent message.
                assert update["sessionUpdate"] == "agent_message_chunk"
                reason = update["content"]["text"]
            assert "No such file or directory" in reason, reason
            # Told once, and the session works without it.
            await talk.said("@@ say still here")
            told = [m for m in client.received if _told(m, sid, "'broken' did not start")]
            assert len(told) == 1


@pytest.mark.transports("stdio", "daemon")
async def test_an_http_server_on_a_closed_port_is_told_as_a_notice(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    server = {"type": "http", "name": "gone", "url": f"http://127.0.0.1:{_closed_port()}/mcp"}
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(session=False, capabilities=NOTICES, unstable=True) as talk:
            client = talk.client
            opened = await client.request(
                "session/new", {"cwd": str(workspace), "mcpServers": [server]}
            )
            sid = opened["sessionId"]
            update = await _told_of(client, sid, "MCP server 'gone' did not start")
            assert update["sessionUpdate"] == "notice" and update["severity"] == "error"
            assert update["description"], update


@pytest.mark.acp_versions(1, 2)
async def test_an_sse_server_is_left_out_in_words_or_refused_in_v2(
    open_conversation: OpenConversation, workspace: Path, acp_version: int
) -> None:
    sse = {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}
    params = {"cwd": str(workspace), "mcpServers": [sse]}
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(session=False) as talk:
            client = talk.client
            if acp_version == 2:
                # v2's schema: an agent refuses a transport it does not support, -32602.
                with pytest.raises(RpcError) as refused:
                    await client.request("session/new", params)
                assert refused.value.code == -32602
                assert "MCP server 'old' cannot be used" in refused.value.message
                assert "streamable HTTP URL" in refused.value.message
                return
            sid = (await client.request("session/new", params))["sessionId"]
            update = await _told_of(client, sid, "MCP server 'old' was left out")
            assert update["sessionUpdate"] == "agent_message_chunk"
            assert "Codex has no SSE transport" in update["content"]["text"]


OAuthServer = tuple[dict[str, Any], list[dict[str, Any]]]


@pytest.fixture
async def oauth_server(
    codex_home: Path, scripted_model: ScriptedModel, nursery: trio.Nursery
) -> OAuthServer:
    """The OAuth-guarded server, as the client names it, and the requests it is sent."""
    # Codex keeps the tokens in a file of the test's home, not the machine's keyring.
    write_codex_home(
        codex_home, scripted_model.base_url, extra_toml='mcp_oauth_credentials_store = "file"\n'
    )
    seen: list[dict[str, Any]] = []
    port = await nursery.start(serve_oauth_mcp, seen)
    return {"type": "http", "name": "notes", "url": f"http://127.0.0.1:{port}/mcp"}, seen


def _oauth_requests(seen: list[dict[str, Any]]) -> list[str]:
    return [f"{s['method']} {s['path'].split('?')[0]}" for s in seen]


async def test_an_mcp_server_never_signed_in_is_offered_codexs_sign_in_page(
    open_conversation: OpenConversation,
    workspace: Path,
    scripted_model: ScriptedModel,
    oauth_server: OAuthServer,
) -> None:
    server, seen = oauth_server
    elicited: list[dict[str, Any]] = []
    browsed: list[tuple[int, str]] = []
    # Codex may say the sign-in is done before its callback page has answered the browser.
    page_closed = trio.Event()

    async def on_request(method: str, params: Any) -> Any:
        if method == "elicitation/create":
            elicited.append(params)
            # The user opens the page: the server's consent redirects to Codex's callback.
            browsed.append(await trio.to_thread.run_sync(browse, params["url"]))
            page_closed.set()
            return {"action": "accept"}
        return await default_request_handler(method, params)

    capabilities = {"elicitation": {"url": {}}, **NOTICES}
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(
            session=False, capabilities=capabilities, unstable=True, on_request=on_request
        ) as talk:
            client = talk.client
            opened = await client.request(
                "session/new", {"cwd": str(workspace), "mcpServers": [server]}
            )
            sid = opened["sessionId"]
            # Codex's words: "The notes MCP server is not logged in. Run `codex mcp login
            # notes`."; its status (notLoggedIn) says a sign-in would do: offered at once.
            asked = await _told_of(client, sid, "MCP server 'notes' needs you to sign in")
            assert asked["sessionUpdate"] == "notice" and "not logged in" in asked["description"]
            done = await _told_of(client, sid, "Signed in to MCP server 'notes'")
            assert done["sessionUpdate"] == "notice", done
            await page_closed.wait()
            [page] = elicited
            assert page["mode"] == "url" and page["sessionId"] == sid
            assert page["url"].startswith(server["url"].removesuffix("/mcp") + "/authorize?")
            assert [status for status, _ in browsed] == [200]
            completes = [m for m in client.received if m.get("method") == "elicitation/complete"]
            assert [m["params"]["elicitationId"] for m in completes] == [page["elicitationId"]]
            # What Codex 0.171 asked of the server: the MCP endpoint (401), the metadata,
            # a dynamic registration, the token for the code the redirect carried.
            asked_for = _oauth_requests(seen)
            assert {"POST /register", "POST /token"} <= set(asked_for), asked_for
            # Signed in, the session's next turn has the server's tools.
            talk.sid = sid
            await talk.said("@@ say tools?")
            assert TOOL in str(scripted_model.requests[-1])


@pytest.mark.acp_versions(2)
async def test_mcp_login_answers_with_the_page_and_tells_the_sign_in(
    open_conversation: OpenConversation, workspace: Path, oauth_server: OAuthServer
) -> None:
    server, seen = oauth_server
    with trio.fail_after(SCENARIO_SECONDS):
        # A client that takes no URL elicitation: the page comes in words.
        async with open_conversation(session=False) as talk:
            client = talk.client
            opened = await client.request(
                "session/new", {"cwd": str(workspace), "mcpServers": [server]}
            )
            sid = talk.sid = opened["sessionId"]
            offered = await _told_of(client, sid, "Sign in to MCP server 'notes'")
            assert offered["sessionUpdate"] == "notice"
            # The user asks again, with the command: the page in its answer.
            answer = await talk.said("/mcp login notes")
            url = answer[answer.index("http://") :].split()[0]
            status, _ = await trio.to_thread.run_sync(browse, url)
            assert status == 200
            await _told_of(client, sid, "Signed in to MCP server 'notes'")
            assert "POST /token" in _oauth_requests(seen)
