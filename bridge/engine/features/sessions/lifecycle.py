"""The session lifecycle beyond ``session/new``: ``session/load``, ``session/resume``,
``session/list``, ``session/close``, ``session/fork`` (unstable), and the client's
MCP servers reaching Codex.

A session is a Codex thread, so every method here is a thread method:

- ``session/load``: ``thread/read`` (an error means there is no such thread),
  then ``thread/resume`` (subscribes this connection), then the history replayed
  as updates, then the response. Replay before the response is what ACP asks: the
  client knows the history is complete when the load returns. The history comes
  with the read (``includeTurns``), or, with the store paged (``Hub.paged_store``),
  in pages of ``thread/items/list`` after the resume, each replayed as it arrives.
- ``session/resume``: the same without the replay.
- ``session/fork``: ``thread/fork``; the new thread's id is the new session's id.
- ``session/list``: ``thread/list`` (interactive root threads only); with the store
  paged, a page of :data:`LIST_PAGE` from Codex's index, the next one asked for as a
  page is answered (:class:`PageAhead`), and once a connection has listed to the last
  page, one page read from the thread files to repair that index
  (:meth:`~bridge.engine.features.sessions._listing.Listing._repair_index`).
- ``session/close``: the running prompt is cancelled and is answered ``cancelled``
  once Codex confirms; then ``thread/unsubscribe``, and the session is forgotten.
- A thread Codex deleted or archived (``session/delete``, ``session/archive``,
  :mod:`.admin`, here or in another window of a shared Codex): a session open here on
  it is closed the same way, without the unsubscribe (Codex unloaded it), and forgotten.

The client may cancel a load, a resume, a fork or a list (``$/cancel_request``) until
Codex has answered what it needs: the request is answered -32800 at once
(:meth:`~bridge.engine.core.client_link.ClientLink.cancel_request`), Codex's answer to what was
asked already ends it, nothing more is asked of Codex for it, and a thread Codex
subscribed this connection to meanwhile (a resume's, a fork's) is unsubscribed. Once a
load's history is going out, it is answered as it ends.

Sessions opened here are opened as ``session/new``'s are (:mod:`.opening`: the root's
record made, then the engine sends the answer with the modes and config options), and later
prompts find them in the thread registry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from msgspec import UNSET, Raw

from ....acp import air
from ....acp import sessions as acp_sessions
from ....acp import types as acp_types
from ....codex import settings as codex_settings
from ....codex import threads
from ....codex import types as codex_types
from ....jsonrpc import ErrorCode, RequestId, RpcError
from ....jsonrpc.peer import ErrorObject
from ...core import exchanges, news, turns
from ...core.answers import decode_params, from_codex, malformed
from ...core.codex_asks import OpenStored
from ...core.exchanges import Ask, Exchange, Refused
from ...core.folders import check_directory, check_folders, workspace_roots
from ...core.hub import Hub, StoredSessionParams
from ...core.record_parts import LeftOut, Status, TurnKind
from ...core.threads import ThreadRecord
from ...views.stored_sessions import NO_ROLLOUT, is_unstored, not_found_message
from ._fork_point import Fork, turn_holding
from ._listing import ListedRows, Listing
from ._ports import HistoryReplay, Opener, PromptControl, Rejoin, SubagentTree
from ._thread_config import thread_policies

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Lifecycle:
    """Load, resume, fork, list and close (see the module docstring)."""

    hub: Hub
    _: KW_ONLY
    #: Makes a root session's record, and says when its open is done.
    opening: Opener
    #: Replays a stored thread's history (and its sub-agents') before the answer.
    history: HistoryReplay
    #: The prompts of a session being closed.
    prompts: PromptControl
    #: The sub-agents under a session: their work cancelled by a close; told that a
    #: load, resume or fork failed.
    subagents: SubagentTree
    #: Told of each listed page's rows (the session index).
    index: ListedRows | None = None
    #: Subscribes to a reopened root's sub-agents Codex holds, then calls the last argument.
    rejoin: Rejoin | None = None
    #: ``session/list`` (:mod:`bridge.engine.features.sessions._listing`).
    listing: Listing = field(init=False)
    #: Sessions Codex deleted or archived, closing here (their close unsubscribes from
    #: nothing: Codex unloaded the thread).
    _gone: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.listing = Listing(self.hub, self.index)

    # -- capabilities ----------------------------------------------------------------

    def advertise(self, result: acp_types.InitializeResult) -> None:
        caps = result.agentCapabilities
        caps.loadSession = True
        # Codex 0.169 connects to streamable-HTTP MCP servers (``url``), not to SSE ones.
        caps.mcpCapabilities.http = True
        # A session's other folders, on new, load, resume and fork: writable as its cwd.
        caps.sessionCapabilities.update(
            list={}, resume={}, close={}, delete={}, additionalDirectories={}
        )
        if self.fork_offered:
            caps.sessionCapabilities["fork"] = {}

    @property
    def fork_offered(self) -> bool:
        """``session/fork`` is unstable ACP, offered only to a client that speaks the
        unstable schema (:attr:`Hub.speaks_unstable`). ACP gives fork no client capability
        of its own: the agent advertises ``sessionCapabilities.fork``.
        """
        return self.hub.speaks_unstable

    # -- session/load, session/resume, session/fork --------------------------------------

    def session_load(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_sessions.LoadSessionParams, "session/load")
        self.open_existing(rid, "session/load", params, replay=True)

    def session_resume(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_sessions.ResumeSessionParams, "session/resume")
        self.open_existing(rid, "session/resume", params, replay=False)

    def open_existing(
        self, rid: RequestId, method: str, params: StoredSessionParams, *, replay: bool
    ) -> None:
        """Open a stored session (v1's load and resume, v2's resume): with ``replay``, its
        history (and its sub-agents') goes out before the answer. ``method`` names the
        request in errors."""
        session_id, cwd, mcp_servers = params.sessionId, params.cwd, params.mcpServers
        hub = self.hub
        check_directory(hub, cwd, method)
        folders = check_folders(hub, cwd, params.additionalDirectories, method)
        config, left_out = self._thread_config(mcp_servers, method)
        existing = hub.threads.get(session_id)
        if existing is not None and (existing.session or existing.life.opening):
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"{method}: session {session_id} is already open on this connection",
                {"sessionId": session_id},
            )
        opening = hub.threads.record(session_id)
        opening.life.opening = True
        asked = OpenStored(rid, method, cwd, config, folders, replay, left_out)

        def cancel() -> None:
            asked.cancelled = True
            opening.life.opening = False  # a load or resume may start again at once

        hub.client.cancellable(rid, cancel)
        # Paged, the history is listed after the resume (``Replay``): this read only says
        # the thread is there.
        self._read_stored(
            opening, asked, replay and not hub.setup.paged_store, self._stored_missing
        )

    def _read_stored(
        self,
        record: ThreadRecord,
        asked: OpenStored,
        include_turns: bool,
        missing: Callable[[ThreadRecord, OpenStored, ErrorObject], None],
    ) -> None:
        """``thread/read``: it has no side effect, so an error means the thread is not there."""
        self.hub.codex.ask(
            record,
            asked,
            "thread/read",
            threads.ThreadReadParams(threadId=record.id, includeTurns=include_turns),
            threads.ThreadReadResult,
            self._stored_found,
            missing,
        )

    def _stored_missing(self, record: ThreadRecord, asked: OpenStored, error: ErrorObject) -> None:
        if self._dropped(record, asked):
            return
        if asked.replay and is_unstored(error):
            # Codex holds the thread but has stored no turn of it (never prompted):
            # it is there, with an empty history.
            self._read_stored(record, asked, False, self._stored_not_there)
            return
        self._stored_not_there(record, asked, error)

    def _stored_not_there(
        self, record: ThreadRecord, asked: OpenStored, error: ErrorObject
    ) -> None:
        if self._dropped(record, asked):
            return
        record.life.opening = False
        self.subagents.open_failed(record.id)
        self.hub.client.refuse(asked.rid, self._not_found(record.id, error))

    def _stored_found(
        self, record: ThreadRecord, asked: OpenStored, result: threads.ThreadReadResult
    ) -> None:
        if self._dropped(record, asked):
            return
        asked.stored = result.thread
        self._resume_stored(record, asked)

    def _resume_stored(
        self, record: ThreadRecord, asked: OpenStored, _answer: object = None
    ) -> None:
        if self._dropped(record, asked):
            return
        self.hub.codex.ask(
            record,
            asked,
            "thread/resume",
            threads.ThreadResumeParams(
                threadId=record.id,
                cwd=asked.cwd,
                config=asked.config or UNSET,
                excludeTurns=True,
                # Named, they replace those Codex keeps in the thread; none named, the
                # answer says whether the thread has others (:func:`opened_with_folders`).
                runtimeWorkspaceRoots=workspace_roots(asked.cwd, asked.folders),
            ),
            codex_types.ThreadStartResult,
            self._stored_resumed,
            self._stored_resume_refused,
        )

    def _stored_resumed(
        self, record: ThreadRecord, asked: OpenStored, opened: codex_types.ThreadStartResult
    ) -> None:
        if self._dropped(record, asked, subscribed=True):
            return
        self._open_stored(record, asked, opened, asked.written)

    def _stored_resume_refused(
        self, record: ThreadRecord, asked: OpenStored, error: ErrorObject
    ) -> None:
        if self._dropped(record, asked, subscribed=is_unstored(error)):
            return
        if is_unstored(error):
            # Subscribed, but a thread never prompted has no turns to list, and
            # Codex fails the whole answer for it: its settings are read instead.
            self._open_unstored(record, asked)
        elif error.message.startswith(NO_ROLLOUT) and not asked.written:
            # Held by this Codex (the read found it) but never written, and nobody
            # subscribed to it: reading its turns writes its rollout (and fails, it
            # has none), after which a resume finds it.
            asked.written = True
            self.hub.codex.ask(
                record,
                asked,
                "thread/read",
                threads.ThreadReadParams(threadId=record.id, includeTurns=True),
                None,
                self._resume_stored,
                self._resume_stored,
            )
        else:
            record.life.opening = False
            self.subagents.open_failed(record.id)
            if error.message.startswith(NO_ROLLOUT):
                # Read, yet not resumable even once its rollout was written: not a thread
                # this Codex can give back (it never answers so for one it holds).
                self.hub.client.refuse(asked.rid, self._not_found(record.id, error))
                return
            self.hub.client.refuse(asked.rid, from_codex(error))

    def _open_stored(
        self,
        opening: ThreadRecord,
        asked: OpenStored,
        opened: codex_types.ThreadStartResult,
        unstored: bool,
    ) -> None:
        """Codex subscribed this connection to the stored thread: the session opens (and
        its history goes out: too late to cancel)."""
        stored, rid, replay = asked.stored, asked.rid, asked.replay
        self.hub.client.not_cancellable(rid)
        assert stored is not None
        opening.life.opening = False
        record = self.opening.open_root(opening.id, asked.cwd, asked.left_out)
        opened_with_folders(record, asked.folders, opened)
        record.life.unstored = unstored
        # Codex's word on the thread now: a turn may still run (a shared Codex).
        record.work.seen(Status.of(opened.thread.status or stored.status))
        if record.work.status is not None and record.work.status.type == "active":
            # Another client's turn runs (another window, Codex's TUI): this session's
            # turn too, named by the thread's turns when they were read (a load).
            last = stored.turns[-1] if stored.turns else None
            running = last is not None and last.status == "inProgress"
            turns.joined(record, last.id if running and last else None)
        response = (
            acp_sessions.LoadSessionResult() if replay else acp_sessions.ResumeSessionResult()
        )

        def answer() -> None:
            self.opening.ready(record, rid, response, opened)

        rejoin = self.rejoin
        # A thread never prompted spawned no sub-agent.
        held = not unstored and (stored.status or {}).get("type", "notLoaded") != "notLoaded"

        def then() -> None:
            if rejoin is not None and held:
                # Codex held the root: it may hold sub-agents of it too, subscribed
                # to the connection that spawned them only. Subscribed to here first.
                rejoin.rejoin(record, answer)
            else:
                answer()

        if not replay:
            then()
            return
        # The history, then its sub-agents' associations and histories, all
        # before the response.
        self.history.replay(record, stored, then)

    def _dropped(
        self, record: ThreadRecord, asked: OpenStored, *, subscribed: bool = False
    ) -> bool:
        """Whether the client cancelled this load or resume: then Codex's answer to what
        was asked ends it, nothing more is asked, and a thread Codex subscribed this
        connection to (``subscribed``) is unsubscribed, unless the client opened the
        session again meanwhile (that open goes on)."""
        if not asked.cancelled:
            return False
        if record.session or any(isinstance(a, OpenStored) for a in record.codex_asks):
            return True
        self.subagents.open_failed(record.id)
        if subscribed:
            exchanges.start(self.hub, _unsubscribe(record.id))
        return True

    def _open_unstored(self, record: ThreadRecord, asked: OpenStored) -> None:
        """The settings of a thread Codex holds but never stored, as ``thread/resume``
        would report them: its model and effort from ``thread/read``; its approval and
        sandbox policies from ``config/read`` and this bridge's overrides. That is what
        ``thread/start`` resolved them from, and nothing changed them since: a client's
        picks reach Codex with a turn (``turn/start``), and this thread had none."""
        assert asked.stored is not None
        self.hub.codex.ask(
            record,
            asked,
            "config/read",
            codex_settings.ConfigReadParams(cwd=asked.stored.cwd or asked.cwd),
            codex_settings.ConfigReadResult,
            self._unstored_config,
            self._unstored_config_unread,
        )

    def _unstored_config(
        self, record: ThreadRecord, asked: OpenStored, result: codex_settings.ConfigReadResult
    ) -> None:
        if self._dropped(record, asked, subscribed=True):
            return
        stored = asked.stored
        assert stored is not None
        approval, sandbox = thread_policies({**result.config, **asked.config})
        opened = codex_types.ThreadStartResult(
            thread=_unstored_thread(stored, asked.cwd),
            model=stored.model if stored.model is not None else UNSET,
            approvalPolicy=approval,
            sandbox=sandbox,
            reasoningEffort=stored.reasoningEffort,
        )
        self._open_stored(record, asked, opened, True)

    def _unstored_config_unread(
        self, record: ThreadRecord, asked: OpenStored, error: ErrorObject
    ) -> None:
        if self._dropped(record, asked, subscribed=True):
            return
        # Without its policies, the session opens with no modes rather than guessed ones.
        stored = asked.stored
        assert stored is not None
        log.warning("config/read for session %s refused: %s", stored.id, error.message)
        opened = codex_types.ThreadStartResult(thread=_unstored_thread(stored, asked.cwd))
        self._open_stored(record, asked, opened, True)

    def session_fork(self, rid: RequestId, raw: Raw) -> None:
        if not self.fork_offered:
            raise RpcError(
                ErrorCode.METHOD_NOT_FOUND,
                "session/fork is unstable ACP, offered only to clients that declare an "
                "unstable capability (clientCapabilities.subagents)",
            )
        params = decode_params(raw, acp_sessions.ForkSessionParams, "session/fork")
        self.fork(rid, params, air.fork_point(params.meta))

    def fork(
        self, rid: RequestId, params: StoredSessionParams, at: air.ForkPoint | None = None
    ) -> None:
        """``session/fork`` (v1 and v2): a new session from a copy of ``params.sessionId``;
        ``at``: only its history through the turn that holds that message."""
        cwd, mcp_servers = params.cwd, params.mcpServers
        hub = self.hub
        check_directory(hub, cwd, "session/fork")
        folders = check_folders(hub, cwd, params.additionalDirectories, "session/fork")
        config, left_out = self._thread_config(mcp_servers, "session/fork")
        # The client may cancel it until Codex answers: no fork is asked for then, or the
        # fork Codex made meanwhile is left (unsubscribed, as a stored session).
        cancelled: list[bool] = []
        hub.client.cancellable(rid, lambda: cancelled.append(True))
        fork = Fork(rid, params, at, folders, config, left_out, cancelled)
        exchanges.start(hub, self._fork(fork))

    def _fork(self, fork: Fork) -> Exchange:
        """The session read (with its turns, to fork at a message), then forked, then open."""
        hub, session_id, cwd, at = self.hub, fork.params.sessionId, fork.params.cwd, fork.at
        read = threads.ThreadReadParams(threadId=session_id, includeTurns=at is not None)
        try:
            stored: threads.ThreadReadResult = yield Ask("thread/read", read, _READ)
        except Refused as refused:
            # thread/read has no side effect: an error means the thread is not there.
            if not fork.cancelled:
                hub.client.refuse(fork.rid, self._not_found(session_id, refused.error))
            return
        if fork.cancelled:
            return
        last_turn = turn_holding(at, stored.thread.turns) if at is not None else None
        if at is not None and last_turn is None:
            hub.client.refuse(
                fork.rid,
                RpcError.invalid_params(
                    f"session/fork: no message {at.message_id!r} in session {session_id}",
                    {"sessionId": session_id, "messageId": at.message_id},
                ),
            )
            return
        params = threads.ThreadForkParams(
            threadId=session_id,
            cwd=cwd,
            config=fork.config or UNSET,
            excludeTurns=True,
            lastTurnId=last_turn if last_turn is not None else UNSET,
            # A fork starts with ``cwd`` alone (Codex 0.169 and 0.171): its folders are the
            # ones the client names now, as ACP has it.
            runtimeWorkspaceRoots=workspace_roots(cwd, fork.folders),
        )
        try:
            opened: codex_types.ThreadStartResult = yield Ask("thread/fork", params, _STARTED)
        except Refused as refused:
            if not fork.cancelled:
                hub.client.refuse(fork.rid, from_codex(refused.error))
            return
        if fork.cancelled:
            # The fork Codex made meanwhile is left, unsubscribed, as a stored session.
            yield from _unsubscribe(opened.thread.id)
            return
        record = self.opening.open_root(opened.thread.id, cwd, fork.left_out)
        opened_with_folders(record, fork.folders, opened)
        response = acp_sessions.ForkSessionResult(sessionId=record.id)
        self.opening.ready(record, fork.rid, response, opened)

    def _not_found(self, session_id: str, error: ErrorObject) -> RpcError:
        if self.hub.codex.lost_reason is not None or malformed(error):
            return from_codex(error)
        # Codex's own words ("thread not loaded: ...", "invalid thread id: ...") go in data.
        return RpcError.not_found(
            not_found_message(session_id, error.message),
            {"sessionId": session_id, "codex": error.message},
        )

    # -- session/list ------------------------------------------------------------------

    def session_list(self, rid: RequestId, raw: Raw) -> None:
        self.listing.session_list(rid, raw)

    # -- session/close -----------------------------------------------------------------

    def session_close(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_sessions.CloseSessionParams, "session/close")
        record = self.hub.threads.require(params.sessionId)
        if record.life.closing is not None:  # already closing: answered together
            record.life.closing.append(rid)
            return
        record.life.closing = [rid]
        self._close(record)

    def thread_gone(self, note: threads.ThreadGone) -> None:
        """Codex deleted or archived a thread (``session/delete`` or ``session/archive``
        here, or another window's on a shared Codex; Codex stopped its turn and unloaded
        it): a session open here on it is closed as ``session/close`` would (its
        sub-agents' work stopped, its prompts answered ``cancelled``) and forgotten, so
        that a later request for it is not found, as Codex finds it (ACP: archiving an
        active session closes it)."""
        record = self.hub.threads.session(note.threadId)
        if record is None or record.is_child:
            return
        self._gone.add(record.id)
        if record.life.closing is None:
            record.life.closing = []
            self._close(record)

    def _close(self, record: ThreadRecord) -> None:
        if record.turn is not None and record.turn.kind is TurnKind.FOREIGN:
            # Another client's turn (another window, Codex's TUI): closing this window
            # leaves it to them, sub-agents and all; what this client queued behind it ends.
            self.prompts.cancel_queued(record)
            self._finish_close(record)
            return
        # RFD: closing a parent cancels its active descendant work (Codex does not).
        self.subagents.cancel_work(record.id)
        if record.turn is not None:
            # ACP: close cancels ongoing work as session/cancel would. The prompt
            # is answered when Codex confirms; prompt_answered finishes the close then.
            self.prompts.cancel(record)
            return
        self._finish_close(record)

    def prompt_answered(self, record: ThreadRecord) -> None:
        if record.life.closing is not None and record.turn is None:
            self._finish_close(record)

    def _finish_close(self, record: ThreadRecord) -> None:
        """The close may finish: the engine forgets the session and every sub-agent under it
        (gone for the client from here on), then has it closed (:meth:`closed`)."""
        waiting = tuple(record.life.closing or ())
        record.life.closing = None
        self.hub.happened(news.CloseDue(record, waiting))

    def closed(self, record: ThreadRecord, waiting: Sequence[RequestId]) -> None:
        """The session is forgotten: Codex unsubscribes this connection from its thread,
        then the closes ``waiting`` are answered."""
        hub = self.hub
        if record.id in self._gone:
            # Codex holds no such thread any more: nothing to unsubscribe from.
            self._gone.discard(record.id)
            for rid in waiting:
                hub.client.answer(rid, acp_sessions.CloseSessionResult())
            return
        exchanges.start(hub, self._closed(record.id, waiting))

    def _closed(self, thread_id: str, waiting: Sequence[RequestId]) -> Exchange:
        """Codex unsubscribes this connection from the thread, then the closes are answered."""
        hub = self.hub
        try:
            yield Ask("thread/unsubscribe", threads.ThreadUnsubscribeParams(threadId=thread_id))
        except Refused as refused:
            if hub.codex.lost_reason is not None:
                for rid in waiting:
                    hub.client.refuse(rid, from_codex(refused.error))
                return
            # The session is gone on this side whatever Codex says; its events are ignored.
            log.info("thread/unsubscribe %s refused: %s", thread_id, refused.error.message)
        for rid in waiting:
            hub.client.answer(rid, acp_sessions.CloseSessionResult())

    def codex_lost(self, reason: str) -> None:
        self._gone.clear()  # the closes they were for end here, unfinished
        for record in self.hub.threads:
            waiting, record.life.closing = record.life.closing, None
            for rid in waiting or []:
                self.hub.client.refuse(rid, RpcError.internal(reason))

    # -- MCP servers ------------------------------------------------------------------

    def _thread_config(
        self, mcp_servers: Sequence[dict[str, Any]] | None, method: str
    ) -> tuple[dict[str, Any], tuple[LeftOut, ...]]:
        """``config`` for a resume or fork: the bridge's overrides and the client's MCP
        servers; the servers left out."""
        servers, left_out = self._mcp_servers(mcp_servers, method)
        return {**(self.hub.thread_config or {}), **servers}, left_out

    def _mcp_servers(
        self, mcp_servers: Sequence[dict[str, Any]] | None, method: str
    ) -> tuple[dict[str, Any], tuple[LeftOut, ...]]:
        return self.opening.mcp_servers(mcp_servers, method)


def opened_with_folders(
    record: ThreadRecord, folders: tuple[str, ...], opened: codex_types.ThreadStartResult
) -> None:
    """The session's folders are the ones the client named at this open (ACP: none named,
    none activated). Codex keeps a thread's folders across restarts, so a thread stored
    with others, opened naming none, is told the client's at its next turn."""
    record.life.folders = folders
    reported = opened.runtimeWorkspaceRoots
    record.life.folders_unsent = isinstance(reported, list) and set(reported) - {record.cwd} != set(
        folders
    )


def _unstored_thread(stored: codex_types.Thread, cwd: str) -> codex_types.Thread:
    """A thread Codex holds but never stored, as ``thread/resume`` would report it."""
    return codex_types.Thread(id=stored.id, cwd=stored.cwd or cwd, status=stored.status)


_READ = threads.ThreadReadResult
_STARTED = codex_types.ThreadStartResult


def _unsubscribe(thread_id: str) -> Exchange:
    """This connection leaves the thread's events (a refusal is only logged: nothing waits)."""
    try:
        yield Ask("thread/unsubscribe", threads.ThreadUnsubscribeParams(threadId=thread_id))
    except Refused as refused:
        log.info("thread/unsubscribe %s refused: %s", thread_id, refused.error.message)
