"""ACP v2's client requests: each decoded once, into its v2 params, for the feature that
does it (the same feature method v1's request reaches).

Where v1 and v2 share a request's params (``session/list``, ``session/close``, the
steering extension, ``auth/login`` as ``authenticate``), the v1 handler is v2's too.
v1 methods v2 removed, and v2 methods Codex cannot do, are refused with -32601 and the
reason; none of them is advertised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from msgspec import Raw

from ...acp import steering as acp_steering
from ...acp import v2
from ...jsonrpc import ErrorCode, RequestId, RpcError
from ..core.hub import RequestHandler, decode_params
from ..features.auth import Authentication
from ..features.lifecycle import Lifecycle
from ..features.prompts import Prompts
from ..features.session_admin import THREAD_METHODS, SessionAdmin
from ..features.settings import Configuration
from ..features.steering import Steering

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


def requests(
    *,
    initialize: RequestHandler,
    prompts: Prompts,
    lifecycle: Lifecycle,
    settings: Configuration,
    auth: Authentication,
    steering: Steering,
    admin: SessionAdmin,
    after_catalog: Callable[[RequestHandler], RequestHandler],
) -> dict[str, RequestHandler]:
    """The v2 method → handler table (the features are the engine's)."""

    def prompt(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.PromptParams, "session/prompt")
        prompts.prompt(rid, params.sessionId, params.prompt)

    def new(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.NewSessionParams, "session/new")
        prompts.new_session(rid, params.cwd, params.mcpServers)

    def fork(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.ForkSessionParams, "session/fork")
        lifecycle.fork(rid, params.sessionId, params.cwd, params.mcpServers)

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
            lifecycle.open_existing(
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
        settings.set_config(rid, params.sessionId, params.configId, params.value, params.type)

    def status(rid: RequestId, raw: Raw) -> None:
        admin.status(rid, decode_params(raw, v2.SessionParams, "session/status").sessionId)

    def set_title(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.SetTitleParams, "session/set_title")
        admin.set_title(rid, params.sessionId, params.title)

    def thread_request(method: str) -> RequestHandler:
        def handle(rid: RequestId, raw: Raw) -> None:
            admin.thread_request(
                rid, method, decode_params(raw, v2.SessionParams, method).sessionId
            )

        return handle

    def logout(rid: RequestId, _raw: Raw) -> None:
        admin.logout(rid)

    def cancel_tool_call(rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.ToolCallCancelParams, "tool_call/cancel")
        admin.cancel_tool_call(rid, params.sessionId, params.toolCallId)

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
        "session/new": after_catalog(new),
        "session/prompt": prompt,
        "session/resume": resume,
        "session/fork": after_catalog(fork),
        "session/list": lifecycle.session_list,
        "session/close": lifecycle.session_close,
        "session/set_config_option": set_config_option,
        "session/status": status,
        "session/set_title": set_title,
        **{method: thread_request(method) for method in THREAD_METHODS},
        "auth/login": auth.authenticate,
        "auth/logout": logout,
        "tool_call/cancel": cancel_tool_call,
        "terminal/cancel": cancel_terminal,
        acp_steering.METHOD: steering.steer,
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
