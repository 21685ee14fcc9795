"""Opening a root session: ``session/new``, and what every open shares with load,
resume and fork (:mod:`.lifecycle`).

- ``session/new``: ``thread/start`` in the session's folder, with the bridge's overrides,
  the client's MCP servers (:mod:`._thread_config`: those Codex cannot reach are left
  out and said so once the session opens), the provider the client picked, and, where
  machines are offered, this machine until the user picks another.
- Every open makes the session's record (:meth:`Opening.open_root`): the MCP servers
  feature notes it, then what Codex sent for the thread before the client held it is
  handled. Its answer and what follows it (the settings, the commands, the sub-agents a
  load replayed) are the engine's to send: the open says it is ready
  (:class:`~bridge.engine.core.news.SessionReady`).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol

from msgspec import Raw

from ....acp import types as acp_types
from ....codex import types as codex_types
from ....jsonrpc import RequestId
from ...core import exchanges, news
from ...core.answers import decode_params
from ...core.exchanges import Ask, Exchange
from ...core.folders import check_directory, check_folders, workspace_roots
from ...core.hub import Hub
from ...core.machines import LOCAL
from ...core.record_parts import LeftOut
from ...core.threads import ThreadRecord
from ._thread_config import mcp_servers_config


class McpOpening(Protocol):
    """The client's MCP servers (:mod:`bridge.engine.features.sessions.mcp_servers`)."""

    def opening(self, record: ThreadRecord, left_out: tuple[LeftOut, ...]) -> None:
        """A session opens, with the servers left out: their words are kept for it."""


class HeldTraffic(Protocol):
    """Codex's traffic held for threads no session shows yet (:mod:`bridge.engine.features.subagents`)."""

    def session_added(self, record: ThreadRecord) -> None:
        """A thread became a session: what was held for it is handled now."""


class ThreadProviders(Protocol):
    """The model provider the client picked (:mod:`bridge.engine.features.extensions`)."""

    def thread_starting(self, start: codex_types.ThreadStartParams) -> None:
        """Name the picked provider in ``start``."""


@dataclass(eq=False)
class Opening:
    """Makes the record of a root session the client opens, and says when it is ready."""

    hub: Hub
    _: KW_ONLY
    #: Notes the session, for what its MCP servers say.
    mcp: McpOpening
    #: What Codex sent for the thread before the client held it.
    held: HeldTraffic

    def open_root(
        self, thread_id: str, cwd: str, left_out: tuple[LeftOut, ...] = ()
    ) -> ThreadRecord:
        """The client opened a session on ``thread_id`` naming MCP servers Codex cannot
        carry (``left_out``): its record, and what was held for it handled now."""
        record = self.hub.threads.open_root(thread_id, cwd)
        self.mcp.opening(record, left_out)  # before what was held for it is handled
        self.held.session_added(record)
        return record

    def ready(
        self,
        record: ThreadRecord,
        rid: RequestId,
        result: Any,
        opened: codex_types.ThreadStartResult,
    ) -> None:
        """The open of ``record`` is done: its answer, ``result``, is the engine's to send
        with what follows it. The last thing an open does."""
        self.hub.happened(news.SessionReady(record, rid, result, opened))

    def mcp_servers(
        self, mcp_servers: Any, method: str
    ) -> tuple[dict[str, Any], tuple[LeftOut, ...]]:
        """The client's MCP servers as Codex's ``config``; those left out."""
        # ACP v2's schema has an agent refuse a transport it does not support (-32602).
        return mcp_servers_config(
            mcp_servers, method, refuse_unsupported=self.hub.client.face.version == 2
        )


@dataclass(eq=False)
class NewSessions:
    """``session/new``: a thread started, opened as a session."""

    hub: Hub
    _: KW_ONLY
    opening: Opening
    #: The provider the client picked, named in ``thread/start``.
    providers: ThreadProviders

    def session_new(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_types.NewSessionParams, "session/new")
        self.new_session(rid, params.cwd, params.mcpServers, params.additionalDirectories)

    def new_session(
        self,
        rid: RequestId,
        cwd: str,
        mcp_servers: list[dict[str, Any]] | None,
        additional: list[str] | None = None,
    ) -> None:
        """``session/new`` (v1 and v2): a thread started in ``cwd``, its other folders
        ``additional`` writable as ``cwd`` is."""
        hub = self.hub
        check_directory(hub, cwd, "session/new")
        folders = check_folders(hub, cwd, additional, "session/new")
        start = codex_types.ThreadStartParams(cwd=cwd)
        if hub.thread_config:
            start.config = dict(hub.thread_config)
        start.runtimeWorkspaceRoots = workspace_roots(cwd, folders)
        if hub.machines:
            # Here until the user picks a machine: Codex would otherwise give the thread every
            # machine it knows, and reach each of them as the thread starts.
            here = codex_types.TurnEnvironment(
                environmentId=LOCAL, cwd=cwd, runtimeWorkspaceRoots=workspace_roots(cwd, folders)
            )
            start.environments = [here]
        servers, left_out = self.opening.mcp_servers(mcp_servers, "session/new")
        if servers:
            base = start.config if isinstance(start.config, dict) else {}
            start.config = {**base, **servers}
        self.providers.thread_starting(start)
        exchanges.start(hub, self._thread_started(rid, cwd, start, folders, left_out))

    def _thread_started(
        self,
        rid: RequestId,
        cwd: str,
        start: codex_types.ThreadStartParams,
        folders: tuple[str, ...],
        left_out: tuple[LeftOut, ...],
    ) -> Exchange:
        opened = yield Ask("thread/start", start, codex_types.ThreadStartResult, refuse=rid)
        record = self.opening.open_root(opened.thread.id, cwd, left_out)
        record.life.started(folders)  # Codex writes a thread at its first turn
        self.opening.ready(record, rid, acp_types.NewSessionResult(sessionId=record.id), opened)
