"""A streamable-HTTP MCP server on 127.0.0.1 that wants an OAuth sign-in, for the
end-to-end tests, and the "browser" that signs in to it.

``/mcp`` answers 401 with ``WWW-Authenticate: Bearer resource_metadata=...`` until a
request carries the token it issues; it serves the OAuth metadata Codex discovers
(``/.well-known/oauth-protected-resource``, ``/.well-known/oauth-authorization-server``,
also under the ``/mcp`` suffix), dynamic client registration (``/register``), an
``/authorize`` that redirects at once to the client's redirect URI with a code (the
user's consent, granted), and ``/token``, which trades the code for the token. Signed
in, ``/mcp`` is a minimal MCP server (JSON answers, no SSE stream) with one tool.
Every request is kept in ``seen`` (method, path, headers, body), in order.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import trio

from tests.support.loopback import http_requests

TOKEN = "signed-in-token"
CODE = "the-code"
TOOL = "notes_tool"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def browse(url: str) -> tuple[int, str]:
    """What a browser does with the sign-in page: ``url`` (the authorization endpoint,
    which redirects), then the redirect (Codex's callback). Blocking: run it in a thread.
    The last status, and the redirect's location."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        opener.open(url, timeout=10)
    except urllib.error.HTTPError as redirect:
        location = redirect.headers.get("location", "")
    else:
        raise AssertionError(f"{url} did not redirect")
    with urllib.request.urlopen(location, timeout=10) as callback:
        return callback.status, location


async def serve_oauth_mcp(
    seen: list[dict[str, Any]], *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve until cancelled; ``task_status.started`` gets the port."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    base = f"http://127.0.0.1:{port}"

    def respond(
        method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[str, dict[str, str], bytes]:
        url = urllib.parse.urlsplit(path)
        route = url.path
        if route.startswith("/.well-known/oauth-protected-resource"):
            return _json({"resource": f"{base}/mcp", "authorization_servers": [base]})
        if route.startswith(("/.well-known/oauth-authorization-server", "/.well-known/openid")):
            return _json(
                {
                    "issuer": base,
                    "authorization_endpoint": f"{base}/authorize",
                    "token_endpoint": f"{base}/token",
                    "registration_endpoint": f"{base}/register",
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["authorization_code", "refresh_token"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"],
                }
            )
        if route == "/register" and method == "POST":
            asked = json.loads(body or b"{}")
            return _json(
                {**asked, "client_id": "test-client", "token_endpoint_auth_method": "none"},
                "201 Created",
            )
        if route == "/authorize":
            query = dict(urllib.parse.parse_qsl(url.query))
            target = query["redirect_uri"]
            joiner = "&" if "?" in target else "?"
            state = urllib.parse.urlencode({"code": CODE, "state": query.get("state", "")})
            return "302 Found", {"location": f"{target}{joiner}{state}"}, b""
        if route == "/token" and method == "POST":
            form = dict(urllib.parse.parse_qsl(body.decode()))
            if form.get("code") != CODE and form.get("grant_type") != "refresh_token":
                return _json({"error": "invalid_grant"}, "400 Bad Request")
            return _json(
                {
                    "access_token": TOKEN,
                    "token_type": "Bearer",
                    "expires_in": 3600,
                    "refresh_token": "refresh",
                }
            )
        if route == "/mcp":
            if headers.get("authorization") != f"Bearer {TOKEN}":
                challenge = (
                    f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource"'
                )
                return "401 Unauthorized", {"www-authenticate": challenge}, b""
            return _mcp(method, body)
        return "404 Not Found", {}, b""

    async def handle(stream: trio.SocketStream) -> None:
        async for method, path, headers, body in http_requests(stream):
            seen.append({"method": method, "path": path, "headers": headers, "body": body})
            status, extra, payload = respond(method, path, headers, body)
            lines = [f"HTTP/1.1 {status}", f"content-length: {len(payload)}"]
            lines += [f"{k}: {v}" for k, v in extra.items()]
            await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)

    task_status.started(port)
    await trio.serve_listeners(handle, listeners)


def _json(value: Any, status: str = "200 OK") -> tuple[str, dict[str, str], bytes]:
    return status, {"content-type": "application/json"}, json.dumps(value).encode()


def _mcp(method: str, body: bytes) -> tuple[str, dict[str, str], bytes]:
    """The signed-in MCP endpoint: JSON answers to POSTs, no SSE stream."""
    if method != "POST":
        return "405 Method Not Allowed", {}, b""
    message = json.loads(body or b"{}")
    if "id" not in message:
        return "202 Accepted", {}, b""
    return _json(mcp_answer(message, "notes", TOOL))


def mcp_answer(message: dict[str, Any], server: str, tool: str) -> dict[str, Any]:
    """An MCP server's answer to the request ``message``: named ``server``, its one tool
    ``tool``; an empty result to anything but ``initialize`` and ``tools/list``."""
    result: dict[str, Any] = {}
    if message.get("method") == "initialize":
        result = {
            "protocolVersion": message["params"].get("protocolVersion"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": server, "version": "1"},
        }
    elif message.get("method") == "tools/list":
        result = {
            "tools": [
                {
                    "name": tool,
                    "description": "d",
                    "inputSchema": {"type": "object", "properties": {}},
                }
            ]
        }
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}
