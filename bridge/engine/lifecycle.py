"""The session lifecycle beyond ``session/new``: ``session/load``, ``session/resume``,
``session/list``, ``session/close``, ``session/fork`` (unstable), and the client's
MCP servers reaching Codex.

A session is a Codex thread, so every method here is a thread method:

- ``session/load``: ``thread/read {includeTurns}`` (the history; an error means
  there is no such thread), then ``thread/resume`` (subscribes this connection),
  then the history replayed as updates, then the response. Replay before the
  response is what ACP asks: the client knows the history is complete when the
  load returns.
- ``session/resume``: the same without the replay.
- ``session/fork``: ``thread/fork``; the new thread's id is the new session's id.
- ``session/list``: ``thread/list`` (interactive root threads only).
- ``session/close``: the running prompt is cancelled and settles ``cancelled``
  once Codex confirms; then ``thread/unsubscribe``, and the session is forgotten.

Sessions opened here run ``engine.session_opened_hooks`` exactly like
``session/new``'s, so modes and config options come with them, and later
prompts find them in ``engine.sessions``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET, Raw

from ..acp import sessions as acps
from ..acp import types as acp
from ..codex import threads
from ..codex import types as codex
from ..jsonrpc import ErrorCode, RequestId, RpcError
from ..jsonrpc.peer import ErrorObject
from . import history
from .engine import codex_error, decode_params
from .sessions import Session

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger(__name__)

#: The order of ``session/list``: most recently active first.
LIST_SORT_KEY = "updated_at"


class Lifecycle:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        #: Session ids a load, resume or fork is opening (their request is in flight).
        self._opening: set[str] = set()
        #: Session id → the ``session/close`` requests waiting for it to close.
        self._closing: dict[str, list[RequestId]] = {}
        engine.on_client_request("session/load", self._session_load)
        engine.on_client_request("session/resume", self._session_resume)
        engine.on_client_request("session/fork", self._session_fork)
        engine.on_client_request("session/list", self._session_list)
        engine.on_client_request("session/close", self._session_close)
        engine.initialize_hooks.append(self._advertise)
        engine.thread_start_hooks.append(self._new_session_mcp_servers)
        engine.prompts.settled_hooks.append(self._prompt_settled)
        engine.lost_hooks.append(self._on_codex_lost)

    # -- capabilities ----------------------------------------------------------------

    def _advertise(self, result: acp.InitializeResult) -> None:
        caps = result.agentCapabilities
        caps.loadSession = True
        # Codex 0.169 connects to streamable-HTTP MCP servers (``url``), not to SSE ones.
        caps.mcpCapabilities.http = True
        caps.sessionCapabilities.update(list={}, resume={}, close={})
        if self.fork_offered:
            caps.sessionCapabilities["fork"] = {}

    @property
    def fork_offered(self) -> bool:
        """``session/fork`` is unstable ACP, offered only to a client that speaks the
        unstable schema. ACP gives fork no client capability of its own (the agent
        advertises ``sessionCapabilities.fork``), so the sign is a capability only the
        unstable schema has: ``clientCapabilities.subagents``, the one the bridge reads.
        """
        return self.engine.client_capabilities.subagents is not None

    # -- session/load, session/resume, session/fork --------------------------------------

    def _session_load(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acps.LoadSessionParams, "session/load")
        self._open_existing(
            rid, "session/load", params.sessionId, params.cwd, params.mcpServers, replay=True
        )

    def _session_resume(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acps.ResumeSessionParams, "session/resume")
        self._open_existing(
            rid, "session/resume", params.sessionId, params.cwd, params.mcpServers, replay=False
        )

    def _open_existing(
        self,
        rid: RequestId,
        method: str,
        session_id: str,
        cwd: str,
        mcp_servers: Sequence[dict[str, Any]] | None,
        *,
        replay: bool,
    ) -> None:
        engine = self.engine
        _check_cwd(cwd, method)
        config = self._thread_config(mcp_servers, method)
        if session_id in engine.sessions or session_id in self._opening:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"{method}: session {session_id} is already open on this connection",
                {"sessionId": session_id},
            )
        self._opening.add(session_id)

        def failed(error: ErrorObject) -> None:
            self._opening.discard(session_id)
            engine.client_error(rid, codex_error(error))

        def found(stored: threads.StoredThread) -> None:
            resume = threads.ThreadResumeParams(
                threadId=session_id, cwd=cwd, config=config or UNSET, excludeTurns=True
            )

            def resumed(result: Raw) -> None:
                self._opening.discard(session_id)
                opened = msgspec.json.decode(result, type=codex.ThreadStartResult)
                session = self._register(opened, cwd)
                response = acps.LoadSessionResult() if replay else acps.ResumeSessionResult()
                if not replay:
                    self._opened(rid, session, response, opened)
                    return
                collab = engine.subagents.history_item(session.session_id)
                for update in history.replay_updates(stored, first=collab):
                    engine.update(session.session_id, update)
                # Sub-agents' associations and histories come before the response too.
                engine.subagents.replay_children(
                    session, stored, lambda: self._opened(rid, session, response, opened)
                )

            engine.codex_request("thread/resume", resume, resumed, failed)

        def missing(error: ErrorObject) -> None:
            self._opening.discard(session_id)
            engine.client_error(rid, self._not_found(session_id, error))

        self._read(session_id, replay, found, missing)

    def _session_fork(self, rid: RequestId, raw: Raw) -> None:
        engine = self.engine
        if not self.fork_offered:
            raise RpcError(
                ErrorCode.METHOD_NOT_FOUND,
                "session/fork is unstable ACP, offered only to clients that declare an "
                "unstable capability (clientCapabilities.subagents)",
            )
        params = decode_params(raw, acps.ForkSessionParams, "session/fork")
        _check_cwd(params.cwd, "session/fork")
        config = self._thread_config(params.mcpServers, "session/fork")

        def found(_stored: threads.StoredThread) -> None:
            fork = threads.ThreadForkParams(
                threadId=params.sessionId, cwd=params.cwd, config=config or UNSET, excludeTurns=True
            )

            def forked(result: Raw) -> None:
                opened = msgspec.json.decode(result, type=codex.ThreadStartResult)
                session = self._register(opened, params.cwd)
                response = acps.ForkSessionResult(sessionId=session.session_id)
                self._opened(rid, session, response, opened)

            engine.codex_request("thread/fork", fork, forked, engine.forward_error(rid))

        def missing(error: ErrorObject) -> None:
            engine.client_error(rid, self._not_found(params.sessionId, error))

        self._read(params.sessionId, False, found, missing)

    def _read(
        self,
        thread_id: str,
        include_turns: bool,
        found: Callable[[threads.StoredThread], None],
        missing: Callable[[ErrorObject], None],
    ) -> None:
        """``thread/read``: it has no side effect, so an error means the thread is not there."""

        def read(result: Raw) -> None:
            found(msgspec.json.decode(result, type=threads.ThreadReadResult).thread)

        params = threads.ThreadReadParams(threadId=thread_id, includeTurns=include_turns)
        self.engine.codex_request("thread/read", params, read, missing)

    def _not_found(self, session_id: str, error: ErrorObject) -> RpcError:
        if self.engine.codex_lost_reason is not None:
            return codex_error(error)
        # Codex's own words ("thread not loaded: ...", "no rollout found ...") go in data.
        return RpcError.not_found(
            f"Session not found: {session_id}", {"sessionId": session_id, "codex": error.message}
        )

    def _register(self, opened: codex.ThreadStartResult, cwd: str) -> Session:
        session = Session(session_id=opened.thread.id, cwd=cwd)
        self.engine.add_session(session)
        return session

    def _opened(
        self, rid: RequestId, session: Session, response: Any, opened: codex.ThreadStartResult
    ) -> None:
        for hook in self.engine.session_opened_hooks:
            hook(session, response, opened)
        self.engine.client_result(rid, response)
        for announced in self.engine.session_announced_hooks:
            announced(session)

    # -- session/list ------------------------------------------------------------------

    def _session_list(self, rid: RequestId, raw: Raw) -> None:
        engine = self.engine
        params = decode_params(raw, acps.ListSessionsParams, "session/list")
        if params.cwd is not None:
            _check_cwd(params.cwd, "session/list")
        request = threads.ThreadListParams(
            cursor=params.cursor if params.cursor is not None else UNSET,
            cwd=params.cwd if params.cwd is not None else UNSET,
            sortKey=LIST_SORT_KEY,
        )

        def listed(result: Raw) -> None:
            page = msgspec.json.decode(result, type=threads.ThreadListResult)
            sessions = [session_info(t) for t in page.data if is_root(t)]
            engine.client_result(
                rid,
                acps.ListSessionsResult(
                    sessions=sessions,
                    nextCursor=page.nextCursor if page.nextCursor is not None else UNSET,
                ),
            )

        def refused(error: ErrorObject) -> None:
            if params.cursor is not None and "cursor" in error.message.lower():
                engine.client_error(
                    rid,
                    RpcError.invalid_params(
                        f"session/list: invalid cursor {params.cursor!r} (pass back a nextCursor)",
                        {"cursor": params.cursor, "codex": error.message},
                    ),
                )
            else:
                engine.client_error(rid, codex_error(error))

        engine.codex_request("thread/list", request, listed, refused)

    # -- session/close -----------------------------------------------------------------

    def _session_close(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acps.CloseSessionParams, "session/close")
        session = self.engine.session(params.sessionId)
        waiting = self._closing.get(session.session_id)
        if waiting is not None:  # already closing: answered together
            waiting.append(rid)
            return
        self._closing[session.session_id] = [rid]
        # RFD: closing a parent cancels its active descendant work (Codex does not).
        self.engine.subagents.cancel_tree(session.session_id)
        if session.prompt is not None:
            # ACP: close cancels ongoing work as session/cancel would. The prompt
            # settles when Codex confirms; _prompt_settled finishes the close then.
            self.engine.prompts.cancel(session)
            return
        self._finish_close(session)

    def _prompt_settled(self, session: Session) -> None:
        if session.session_id in self._closing and session.prompt is None:
            self._finish_close(session)

    def _finish_close(self, session: Session) -> None:
        engine = self.engine
        waiting = self._closing.pop(session.session_id)
        engine.sessions.pop(session.session_id, None)
        for hook in engine.session_closed_hooks:
            hook(session)

        def unsubscribed(_result: Raw) -> None:
            for rid in waiting:
                engine.client_result(rid, acps.CloseSessionResult())

        def refused(error: ErrorObject) -> None:
            if engine.codex_lost_reason is not None:
                for rid in waiting:
                    engine.client_error(rid, codex_error(error))
                return
            # The session is gone on this side whatever Codex says; its events are ignored.
            log.info("thread/unsubscribe %s refused: %s", session.thread_id, error.message)
            unsubscribed(Raw(b"{}"))

        engine.codex_request(
            "thread/unsubscribe",
            threads.ThreadUnsubscribeParams(threadId=session.thread_id),
            unsubscribed,
            refused,
        )

    def _on_codex_lost(self, reason: str) -> None:
        closing, self._closing = self._closing, {}
        for waiting in closing.values():
            for rid in waiting:
                self.engine.client_error(rid, RpcError.internal(reason))

    # -- MCP servers ------------------------------------------------------------------

    def _new_session_mcp_servers(
        self, params: acp.NewSessionParams, start: codex.ThreadStartParams
    ) -> None:
        servers = mcp_servers_config(params.mcpServers, "session/new")
        if servers:
            base = start.config if isinstance(start.config, dict) else {}
            start.config = {**base, **servers}

    def _thread_config(
        self, mcp_servers: Sequence[dict[str, Any]] | None, method: str
    ) -> dict[str, Any]:
        """``config`` for a resume or fork: the bridge's overrides and the client's MCP servers."""
        return {**(self.engine.thread_config or {}), **mcp_servers_config(mcp_servers, method)}


# -- pure helpers ---------------------------------------------------------------------


def _check_cwd(cwd: str, method: str) -> None:
    if not cwd.startswith("/"):
        raise RpcError.invalid_params(f"{method}: cwd must be an absolute path, got {cwd!r}")


def is_root(thread: threads.StoredThread) -> bool:
    """An interactive thread a person started, not a sub-agent's."""
    if thread.parentThreadId is not None:
        return False
    return not (isinstance(thread.source, dict) and "subAgent" in thread.source)


def session_info(thread: threads.StoredThread) -> acps.SessionInfo:
    """A listed thread: its name, else its preview (first user message), on one line."""
    title = " ".join((thread.name or thread.preview).split())
    return acps.SessionInfo(
        sessionId=thread.id,
        cwd=thread.cwd,
        title=title or UNSET,
        updatedAt=iso_time(thread.updatedAt) if thread.updatedAt is not None else UNSET,
    )


def iso_time(unix_seconds: int) -> str:
    """Codex's Unix seconds as ISO 8601 in UTC (``2026-11-30T05:01:16Z``)."""
    return datetime.fromtimestamp(unix_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def mcp_servers_config(servers: Sequence[dict[str, Any]] | None, method: str) -> dict[str, Any]:
    """ACP ``McpServer``s → Codex ``config`` overrides, one ``mcp_servers.NAME`` table each.

    Dotted keys, like the ``-c`` overrides they sit next to: a whole ``mcp_servers``
    table would replace those (Codex applies the keys in order). A name becomes
    one Codex accepts in a dotted key (``[A-Za-z0-9_-]``; Codex refuses spaces, and
    a dot would split the key); two that meet get a ``_2`` suffix. SSE servers are
    skipped with a warning (Codex speaks stdio and streamable HTTP only; the bridge
    does not advertise ``mcpCapabilities.sse``), as are unknown transports.
    """
    config: dict[str, Any] = {}
    for index, entry in enumerate(servers or ()):
        try:
            server = acps.decode_mcp_server(entry)
        except (msgspec.ValidationError, TypeError) as exc:
            raise RpcError.invalid_params(f"{method}: mcpServers[{index}]: {exc}") from None
        table: dict[str, Any]
        match server:
            case acps.McpServerStdio(command=command, args=args, env=env):
                table = {"command": command, "args": args}
                if env:
                    table["env"] = {e.name: e.value for e in env}
            case acps.McpServerHttp(url=url, headers=headers):
                table = {"url": url}
                if headers:
                    table["http_headers"] = {h.name: h.value for h in headers}
            case _:
                kind = "sse" if isinstance(server, acps.McpServerSse) else server.type
                log.warning(
                    "%s: MCP server %r uses the %s transport, which Codex does not support; skipped",
                    method,
                    server.name,
                    kind,
                )
                continue
        name = _UNSAFE_NAME.sub("_", server.name).strip("_") or "mcp"
        key, n = name, 1
        while f"mcp_servers.{key}" in config:
            n += 1
            key = f"{name}_{n}"
        config[f"mcp_servers.{key}"] = table
    return config
