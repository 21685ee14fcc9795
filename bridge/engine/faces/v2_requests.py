"""ACP v2's client requests: each decoded once, into its v2 params, for the feature that
does it (the same feature method v1's request reaches).

Where v1 and v2 share a request's params (``session/list``, ``session/close``, the
steering extension, ``auth/login`` as ``authenticate``), the v1 handler is v2's too.
v1 methods v2 removed, and v2 methods Codex cannot do, are refused with -32601 and the
reason; none of them is advertised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Protocol

from msgspec import Raw

from ...acp import steering as acp_steering
from ...acp import v2
from ...jsonrpc import ErrorCode, RequestId, RpcError
from ..core.hub import RequestHandler, decode_params

#: v1 methods v2 removed.
V1_ONLY = ("session/load", "session/set_mode", "authenticate")

#: v2 methods Codex cannot do, and why.
NOT_OFFERED = {
    "providers/list": "Codex's model providers live in its config.toml, which the bridge "
    "never writes",
    "providers/set": "Codex's model providers live in its config.toml, which the bridge "
    "never writes",
    "providers/disable": "Codex's model providers live in its config.toml, which the bridge "
    "never writes",
    "auth/status": "not advertised (the auth.status capability is not offered)",
}

#: Does something to one session: (request, session id).
SessionHandler = Callable[[RequestId, str], None]


class OpenExisting(Protocol):
    """Opens a stored session (``Lifecycle.open_existing``)."""

    def __call__(
        self,
        rid: RequestId,
        method: str,
        session_id: str,
        cwd: str,
        mcp_servers: Sequence[dict[str, Any]] | None,
        *,
        replay: bool,
    ) -> None: ...


def requests(
    *,
    initialize: RequestHandler,
    new_session: Callable[[RequestId, str, list[dict[str, Any]] | None], None],
    prompt: Callable[[RequestId, str, list[Raw]], None],
    open_existing: OpenExisting,
    fork: Callable[[RequestId, str, str, list[dict[str, Any]] | None], None],
    set_config: Callable[[RequestId, str, str, Any, Any], None],
    status: SessionHandler,
    set_title: Callable[[RequestId, str, str], None],
    archive: SessionHandler,
    unarchive: SessionHandler,
    delete: SessionHandler,
    logout: Callable[[RequestId], None],
    cancel_tool_call: Callable[[RequestId, str, str], None],
    same_as_v1: dict[str, RequestHandler],
    after_catalog: Callable[[RequestHandler], RequestHandler],
) -> dict[str, RequestHandler]:
    """The v2 method → handler table, over the features' methods that do the work (the
    engine's). ``same_as_v1``: the v1 handlers of the methods whose params v2 shares."""

    def session_prompt(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.PromptParams, "session/prompt")
        prompt(rid, params.sessionId, params.prompt)

    def session_new(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.NewSessionParams, "session/new")
        new_session(rid, params.cwd, params.mcpServers)

    def session_fork(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.ForkSessionParams, "session/fork")
        fork(rid, params.sessionId, params.cwd, params.mcpServers)

    def resume(rid: RequestId, raw: Raw) -> None:
        """With ``replayFrom: {type: "start"}``, the history first (v1's load); without
        it, none (v1's resume). Either way the session's current state goes out just
        before the answer (the v2 face, on the session's opening)."""
        params = decode_params(raw, v2.ResumeSessionParams, "session/resume")
        replay = params.replayFrom
        if replay is not None and replay.type != "start":
            raise RpcError.invalid_params(
                f"session/resume: replayFrom {replay.type!r} is not supported "
                '(only {"type": "start"}, or none)',
                {"replayFrom": replay.type},
            )
        # Errors name the v1 method whose work it is, as they always have.
        method = "session/load" if replay is not None else "session/resume"

        def open_session(rid: RequestId, _raw: Raw) -> None:
            open_existing(
                rid,
                method,
                params.sessionId,
                params.cwd,
                params.mcpServers,
                replay=replay is not None,
            )

        after_catalog(open_session)(rid, raw)

    def set_config_option(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.SetConfigOptionParams, "session/set_config_option")
        set_config(rid, params.sessionId, params.configId, params.value, params.type)

    def of_session(method: str, handler: SessionHandler) -> RequestHandler:
        """A request whose params name one session, and nothing else."""

        def handle(rid: RequestId, raw: Raw) -> None:
            handler(rid, decode_params(raw, v2.SessionParams, method).sessionId)

        return handle

    def session_set_title(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.SetTitleParams, "session/set_title")
        set_title(rid, params.sessionId, params.title)

    def auth_logout(rid: RequestId, _raw: Raw) -> None:
        logout(rid)

    def tool_call_cancel(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.ToolCallCancelParams, "tool_call/cancel")
        cancel_tool_call(rid, params.sessionId, params.toolCallId)

    def cancel_terminal(_rid: RequestId, raw: Raw) -> None:
        # Commands are tool calls with their output as content, not terminals of the
        # agent's: no terminal advertises cancel.
        params = decode_params(raw, v2.TerminalCancelParams, "terminal/cancel")
        raise RpcError.invalid_params(
            f"terminal/cancel: terminal {params.terminalId} does not advertise cancel "
            "(use session/cancel)",
            {"terminalId": params.terminalId},
        )

    table: dict[str, RequestHandler] = {
        "initialize": initialize,
        "session/new": after_catalog(session_new),
        "session/prompt": session_prompt,
        "session/resume": resume,
        "session/fork": after_catalog(session_fork),
        "session/list": same_as_v1["session/list"],
        "session/close": same_as_v1["session/close"],
        "session/set_config_option": set_config_option,
        "session/status": of_session("session/status", status),
        "session/set_title": session_set_title,
        "session/archive": of_session("session/archive", archive),
        "session/unarchive": of_session("session/unarchive", unarchive),
        "session/delete": of_session("session/delete", delete),
        "auth/login": same_as_v1["authenticate"],
        "auth/logout": auth_logout,
        "tool_call/cancel": tool_call_cancel,
        "terminal/cancel": cancel_terminal,
        acp_steering.METHOD: same_as_v1[acp_steering.METHOD],
    }
    for method in V1_ONLY:
        table[method] = _refuse(f"Method not found: {method} (not in ACP v2)")
    for method, why in NOT_OFFERED.items():
        table[method] = _refuse(f"Method not found: {method}: {why}")
    return table


def _refuse(message: str) -> RequestHandler:
    def refuse(_rid: RequestId, _raw: Raw) -> NoReturn:
        raise RpcError(ErrorCode.METHOD_NOT_FOUND, message)

    return refuse
