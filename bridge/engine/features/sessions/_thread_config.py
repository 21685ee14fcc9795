"""What a new or opened thread is configured with: the policies a configuration gives
it, and a client's MCP servers as Codex ``config`` overrides."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import msgspec
from msgspec import UNSET

from ....acp import sessions as acp_sessions
from ....jsonrpc import RpcError
from ...core.record_parts import LeftOut

log = logging.getLogger(__name__)


#: ``config.toml``'s ``sandbox_mode`` → the ``type`` of the sandbox policy Codex reports.
_SANDBOX_TYPES = {
    "read-only": "readOnly",
    "workspace-write": "workspaceWrite",
    "danger-full-access": "dangerFullAccess",
}


def thread_policies(config: dict[str, Any]) -> tuple[Any, Any]:
    """The approval and sandbox policies, as ``thread/start`` reports them, that a
    configuration (``config/read``'s keys, overrides as dotted keys) gives a new thread;
    ``UNSET`` for both when it does not say."""
    approval = config.get("approval_policy")
    mode = config.get("sandbox_mode")
    kind = _SANDBOX_TYPES.get(mode) if isinstance(mode, str) else None
    if approval is None or kind is None:
        return UNSET, UNSET
    sandbox: dict[str, Any] = {"type": kind}
    if kind == "workspaceWrite":
        table = config.get("sandbox_workspace_write")
        table = dict(table) if isinstance(table, dict) else {}
        prefix = "sandbox_workspace_write."
        table.update({k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)})
        sandbox.update(
            writableRoots=list(table.get("writable_roots") or []),
            networkAccess=bool(table.get("network_access")),
            excludeTmpdirEnvVar=bool(table.get("exclude_tmpdir_env_var")),
            excludeSlashTmp=bool(table.get("exclude_slash_tmp")),
        )
    return approval, sandbox


# Compiled at first use (the re module caches it), not at import.
_UNSAFE_NAME = r"[^A-Za-z0-9_-]+"


def mcp_servers_config(
    servers: Sequence[dict[str, Any]] | None, method: str, *, refuse_unsupported: bool = False
) -> tuple[dict[str, Any], tuple[LeftOut, ...]]:
    """ACP ``McpServer``s → Codex ``config`` overrides, one ``mcp_servers.NAME`` table
    each, and the servers left out (name, transport).

    Dotted keys, like the ``-c`` overrides they sit next to: a whole ``mcp_servers``
    table would replace those (Codex applies the keys in order). A name becomes
    one Codex accepts in a dotted key (``[A-Za-z0-9_-]``; Codex refuses spaces, and
    a dot would split the key); two that meet get a ``_2`` suffix. Codex speaks stdio
    and streamable HTTP only: an SSE server (the bridge does not advertise
    ``mcpCapabilities.sse``), an ``acp`` one or another transport is left out, for the
    session to tell the user when it opens; with ``refuse_unsupported`` (ACP v2, whose
    schema has an agent refuse a transport it does not support) the request is refused
    -32602 instead, in the same words.
    """
    config: dict[str, Any] = {}
    left_out: list[LeftOut] = []
    for index, entry in enumerate(servers or ()):
        try:
            server = acp_sessions.decode_mcp_server(entry)
        except (msgspec.ValidationError, TypeError) as exc:
            raise RpcError.invalid_params(f"{method}: mcpServers[{index}]: {exc}") from None
        table: dict[str, Any]
        match server:
            case acp_sessions.McpServerStdio(command=command, args=args, env=env):
                table = {"command": command, "args": args}
                if env:
                    table["env"] = {e.name: e.value for e in env}
            case acp_sessions.McpServerHttp(url=url, headers=headers):
                table = {"url": url}
                if headers:
                    table["http_headers"] = {h.name: h.value for h in headers}
            case _:
                kind = "sse" if isinstance(server, acp_sessions.McpServerSse) else server.type
                if refuse_unsupported:
                    raise RpcError.invalid_params(
                        f"{method}: mcpServers[{index}]: MCP server {server.name!r} cannot be "
                        f"used: {left_out_reason(kind)}",
                        {"name": server.name, "type": kind},
                    )
                log.warning(
                    "%s: MCP server %r uses the %s transport, which Codex does not support; skipped",
                    method,
                    server.name,
                    kind,
                )
                left_out.append((server.name, kind))
                continue
        name = re.sub(_UNSAFE_NAME, "_", server.name).strip("_") or "mcp"
        key, n = name, 1
        while f"mcp_servers.{key}" in config:
            n += 1
            key = f"{name}_{n}"
        config[f"mcp_servers.{key}"] = table
    return config, tuple(left_out)


def left_out_reason(transport: str) -> str:
    """Why a server the client named is left out, and what to give instead."""
    kind = "SSE" if transport == "sse" else repr(transport)
    return (
        f"Codex has no {kind} transport; give the server's streamable HTTP URL (type http) "
        "or a stdio command instead"
    )
