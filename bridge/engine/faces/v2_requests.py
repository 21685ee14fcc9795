"""ACP v2's client requests: each decoded once, into its v2 params, for the feature that
does it (the same feature method v1's request reaches). The features are handed in as
objects behind the small protocols below (only the wiring imports a feature).

Where v1 and v2 share a request's params (``session/list``, ``session/close``, the
steering extension, ``auth/login`` as ``authenticate``, ``auth/status``), the v1
handler is v2's too.
v1 methods v2 removed, and v2 methods Codex cannot do, are refused with -32601 and the
reason; none of them is advertised.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NoReturn, Protocol

from msgspec import Raw

from ...acp import air, v2
from ...acp import sessions as acp_sessions
from ...acp import steering as acp_steering
from ...jsonrpc import ErrorCode, RequestId, RpcError
from ..core import client_routing
from ..core.answers import decode_params
from ..core.client_routing import CatalogWait
from ..core.hub import Hub, RequestHandler, StoredSessionParams

#: v1 methods v2 removed.
V1_ONLY = ("session/load", "session/set_mode", "authenticate")

#: v2 methods Codex cannot do, and why.
NOT_OFFERED: dict[str, str] = {}

#: Does something to one session: (request, session id).
SessionHandler = Callable[[RequestId, str], None]


Servers = list[dict[str, Any]] | None
Folders = list[str] | None


class Starting(Protocol):
    """Starts sessions (:mod:`bridge.engine.features.sessions.opening`)."""

    def new_session(
        self, rid: RequestId, cwd: str, mcp_servers: Servers, additional: Folders = None
    ) -> None: ...


class Prompting(Protocol):
    """Prompts sessions (:mod:`bridge.engine.features.prompts.prompts`)."""

    def prompt(self, rid: RequestId, session_id: str, content: list[Raw]) -> None: ...


class Opening(Protocol):
    """Opens stored sessions and forks them (:mod:`bridge.engine.features.sessions.lifecycle`)."""

    def open_existing(
        self, rid: RequestId, method: str, params: StoredSessionParams, *, replay: bool
    ) -> None: ...

    def fork(
        self, rid: RequestId, params: StoredSessionParams, at: air.ForkPoint | None = None
    ) -> None: ...


class Configuring(CatalogWait, Protocol):
    """Sets a session's config options (:mod:`bridge.engine.features.settings.settings`)."""

    def set_config(
        self, rid: RequestId, session_id: str, config_id: str, value: Any, kind: Any
    ) -> None: ...


class Administering(Protocol):
    """What v2 adds around a session (:mod:`bridge.engine.features.sessions.admin`)."""

    def status(self, rid: RequestId, session_id: str) -> None: ...

    def set_title(self, rid: RequestId, session_id: str, title: str) -> None: ...

    def archive(self, rid: RequestId, session_id: str) -> None: ...

    def unarchive(self, rid: RequestId, session_id: str) -> None: ...

    def delete(self, rid: RequestId, session_id: str) -> None: ...

    def logout(self, rid: RequestId) -> None: ...

    def cancel_tool_call(self, rid: RequestId, session_id: str, call_id: str) -> None: ...


def requests(
    *,
    initialize: RequestHandler,
    new_sessions: Starting,
    prompts: Prompting,
    lifecycle: Opening,
    settings: Configuring,
    admin: Administering,
    same_as_v1: Mapping[str, RequestHandler],
    hub: Hub,
) -> dict[str, RequestHandler]:
    """The v2 method → handler table, over the features that do the work.
    ``same_as_v1``: the v1 handlers of the methods whose params v2 shares."""
    v2_requests = V2Requests(new_sessions, prompts, lifecycle, settings, admin, hub)
    return v2_requests.table(initialize, same_as_v1)


class V2Requests:
    """Each v2 request decoded once, for the feature method that does it."""

    def __init__(
        self,
        new_sessions: Starting,
        prompts: Prompting,
        lifecycle: Opening,
        settings: Configuring,
        admin: Administering,
        hub: Hub,
    ) -> None:
        self.new_sessions = new_sessions
        self.prompts = prompts
        self.lifecycle = lifecycle
        self.settings = settings
        self.admin = admin
        self.hub = hub

    def after_catalog(self, handler: RequestHandler) -> RequestHandler:
        """``handler``, run once Codex's model catalog is in (a session's first answer
        lists every model)."""
        return client_routing.after_catalog(self.hub, self.settings, handler)

    def table(
        self, initialize: RequestHandler, same_as_v1: Mapping[str, RequestHandler]
    ) -> dict[str, RequestHandler]:
        admin, after_catalog, of_session = self.admin, self.after_catalog, self._of_session
        table: dict[str, RequestHandler] = {
            "initialize": initialize,
            "session/new": after_catalog(self.session_new),
            "session/prompt": self.session_prompt,
            "session/resume": self.resume,
            "session/fork": after_catalog(self.session_fork),
            "session/list": same_as_v1["session/list"],
            "session/close": same_as_v1["session/close"],
            "session/set_config_option": self.set_config_option,
            "session/status": partial(of_session, "session/status", admin.status),
            "session/set_title": self.session_set_title,
            "session/archive": partial(of_session, "session/archive", admin.archive),
            "session/unarchive": partial(of_session, "session/unarchive", admin.unarchive),
            "session/delete": partial(of_session, "session/delete", admin.delete),
            "auth/login": same_as_v1["authenticate"],
            "auth/logout": self.auth_logout,
            "auth/status": same_as_v1["auth/status"],
            "tool_call/cancel": self.tool_call_cancel,
            "terminal/cancel": self.cancel_terminal,
            acp_steering.METHOD: same_as_v1[acp_steering.METHOD],
        }
        for method in V1_ONLY:
            table[method] = partial(_refuse, f"Method not found: {method} (not in ACP v2)")
        for method, why in NOT_OFFERED.items():
            table[method] = partial(_refuse, f"Method not found: {method}: {why}")
        return table

    def session_prompt(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.PromptParams, "session/prompt")
        self.prompts.prompt(rid, params.sessionId, params.prompt)

    def session_new(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.NewSessionParams, "session/new")
        self.new_sessions.new_session(
            rid, params.cwd, params.mcpServers, params.additionalDirectories
        )

    def session_fork(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.ForkSessionParams, "session/fork")
        self.lifecycle.fork(rid, params, air.fork_point(params.meta))

    def resume(self, rid: RequestId, raw: Raw) -> None:
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
        opening = partial(self._open, method, params, replay is not None)
        self.after_catalog(opening)(rid, raw)

    def _open(
        self, method: str, params: StoredSessionParams, replay: bool, rid: RequestId, _raw: Raw
    ) -> None:
        self.lifecycle.open_existing(rid, method, params, replay=replay)

    def set_config_option(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.SetConfigOptionParams, "session/set_config_option")
        self.settings.set_config(rid, params.sessionId, params.configId, params.value, params.type)

    @staticmethod
    def _of_session(method: str, handler: SessionHandler, rid: RequestId, raw: Raw) -> None:
        """A request whose params name one session, and nothing else."""
        handler(rid, decode_params(raw, acp_sessions.SessionParams, method).sessionId)

    def session_set_title(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_sessions.SetSessionTitleParams, "session/set_title")
        self.admin.set_title(rid, params.sessionId, params.title)

    def auth_logout(self, rid: RequestId, _raw: Raw) -> None:
        self.admin.logout(rid)

    def tool_call_cancel(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.ToolCallCancelParams, "tool_call/cancel")
        self.admin.cancel_tool_call(rid, params.sessionId, params.toolCallId)

    @staticmethod
    def cancel_terminal(_rid: RequestId, raw: Raw) -> None:
        # A command's terminal is its tool call's display: the call is what may be
        # cancelled (``tool_call/cancel``, advertised on it), so no terminal advertises cancel.
        params = decode_params(raw, v2.TerminalCancelParams, "terminal/cancel")
        raise RpcError.invalid_params(
            f"terminal/cancel: terminal {params.terminalId} does not advertise cancel "
            "(use tool_call/cancel on its command's tool call, or session/cancel)",
            {"terminalId": params.terminalId},
        )


def _refuse(message: str, _rid: RequestId, _raw: Raw) -> NoReturn:
    raise RpcError(ErrorCode.METHOD_NOT_FOUND, message)
