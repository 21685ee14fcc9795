"""A tiny MCP server over stdio for the end-to-end tests: tools ``echo`` and ``fail``, no network.

Codex starts it from its config (``[mcp_servers.NAME] command = PYTHON, args = [THIS_FILE]``).
MCP's stdio transport is JSON-RPC 2.0, one message per line. The server answers
``initialize``, ``tools/list`` and ``tools/call``; the tool ``echo {text}`` returns
``echo: TEXT`` as text content, and ``fail`` returns a tool error (``isError: true``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "fail",
        "description": "Always fails.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


def handle(method: str, params: dict[str, Any]) -> Any:
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bridge-test-mcp", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if name == "echo":
            text = f"echo: {arguments.get('text', '')}"
            return {"content": [{"type": "text", "text": text}], "isError": False}
        if name == "fail":
            return {"content": [{"type": "text", "text": "it failed"}], "isError": True}
        raise LookupError(f"unknown tool {name}")
    if method == "ping":
        return {}
    raise LookupError(f"method not found: {method}")


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # notifications (initialized, cancelled) and responses need no answer
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        try:
            reply["result"] = handle(message["method"], message.get("params") or {})
        except LookupError as exc:
            reply["error"] = {"code": -32601, "message": str(exc)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
