"""``session/list``: Codex's ``thread/list`` (interactive root threads only), a page a request.

Part of :mod:`bridge.engine.features.sessions.lifecycle`. With the store paged
(``Hub.paged_store``), a page of :data:`LIST_PAGE` from Codex's index, the next one asked for
as a page is answered (:class:`~bridge.engine.features.sessions._page_ahead.PageAhead`), and
once a connection has listed to the last page, one page read from the thread files to repair
that index (:meth:`Listing._repair_index`). The client may cancel a listing until Codex
answers: the page is then dropped.
"""

from __future__ import annotations

import logging
from typing import Protocol

import msgspec
from msgspec import UNSET, Raw

from ....acp import sessions as acp_sessions
from ....codex import threads
from ....codex import types as codex_types
from ....jsonrpc import RequestId, RpcError
from ....jsonrpc.peer import ErrorObject
from ...core import exchanges
from ...core.answers import decode_params, from_codex
from ...core.exchanges import Ask, Exchange, Refused
from ...core.hub import Hub
from ...views.stored_sessions import is_root, session_info
from ._page_ahead import PageAhead

log = logging.getLogger(__name__)


Threads = list[codex_types.Thread]
Rows = list[acp_sessions.SessionInfo]


class ListedRows(Protocol):
    """Decorates one ``session/list`` page's rows (:mod:`bridge.engine.features.sessions.index`)."""

    def rows(
        self, params: acp_sessions.ListSessionsParams, threads: Threads, rows: Rows, archived: bool
    ) -> None:
        """The listed ``threads``, their ``rows``; ``archived``: the archived ones listed."""


#: The order of ``session/list``: most recently active first.
LIST_SORT_KEY = "updated_at"
#: Sessions in a page of ``session/list`` (ACP lets the agent choose): a screenful or two,
#: as an editor's picker shows them.
LIST_PAGE = 50


class Listing:
    def __init__(self, hub: Hub, index: ListedRows | None) -> None:
        self.hub = hub
        #: Told of each listed page's rows (the session index).
        self.index = index
        #: This connection asked Codex to repair its index (:meth:`_repair_index`).
        self._index_repaired = False
        #: The next page of the last listing answered, asked ahead (paged store only).
        self._ahead: PageAhead | None = None

    def session_list(self, rid: RequestId, raw: Raw) -> None:
        hub = self.hub
        params = decode_params(raw, acp_sessions.ListSessionsParams, "session/list")
        if params.cwd is not None and not params.cwd.startswith("/"):
            raise RpcError.invalid_params(
                f"session/list: cwd must be an absolute path, got {params.cwd!r}"
            )
        archived = params.archived or "exclude"
        if archived not in ("exclude", "only"):
            # Codex lists archived threads or the others, one at a time: two lists cannot
            # share one cursor.
            raise RpcError.invalid_params(
                f'session/list: archived {archived!r} is not supported ("exclude" or "only")',
                {"archived": archived},
            )
        request = threads.ThreadListParams(
            cursor=params.cursor if params.cursor is not None else UNSET,
            cwd=params.cwd if params.cwd is not None else UNSET,
            sortKey=LIST_SORT_KEY,
            archived=True if archived == "only" else UNSET,
        )
        if hub.setup.paged_store:
            # Without ``useStateDbOnly`` Codex reads every stored thread file for every
            # page (to repair its index): a page costs what the whole store does.
            request.limit = LIST_PAGE
            request.useStateDbOnly = True
        # The client may cancel it until Codex answers: the page is then dropped.
        cancelled: list[bool] = []
        hub.client.cancellable(rid, lambda: cancelled.append(True))

        def listed(page: threads.ThreadListResult) -> None:
            if cancelled:
                return
            roots = [t for t in page.data if is_root(t)]
            sessions = [session_info(t) for t in roots]
            if archived == "only" or self.hub.speaks_unstable:
                # Every row says it, to a client told of sessionCapabilities.archive.
                for info in sessions:
                    info.archived = archived == "only"
            if self.index is not None:
                self.index.rows(params, roots, sessions, archived == "only")
            hub.client.answer(
                rid,
                acp_sessions.ListSessionsResult(
                    sessions=sessions,
                    nextCursor=page.nextCursor if page.nextCursor is not None else UNSET,
                ),
            )
            if hub.setup.paged_store and page.nextCursor is not None and params.cursor is not None:
                # A client that asked for a second page reads on; one that asked only for
                # the first (an editor's picker) costs Codex no page it will not take.
                self._ask_ahead(msgspec.structs.replace(request, cursor=page.nextCursor))
            # After a listing's last page: the repair then never competes with the client's
            # paging (an editor reads its pages back to back).
            if hub.setup.paged_store and not self._index_repaired and page.nextCursor is None:
                self._repair_index()

        def refused(error: ErrorObject) -> None:
            if cancelled:
                return
            if params.cursor is not None and "cursor" in error.message.lower():
                hub.client.refuse(
                    rid,
                    RpcError.invalid_params(
                        f"session/list: invalid cursor {params.cursor!r} (pass back a nextCursor)",
                        {"cursor": params.cursor, "codex": error.message},
                    ),
                )
            else:
                hub.client.refuse(rid, from_codex(error))

        def ask() -> None:
            hub.codex.request("thread/list", request, threads.ThreadListResult, listed, refused)

        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead.request == request:
            ahead.take(listed, ask)
        else:
            ask()

    def _ask_ahead(self, request: threads.ThreadListParams) -> None:
        ahead = self._ahead = PageAhead(request)
        self.hub.codex.request(
            "thread/list", request, threads.ThreadListResult, ahead.arrived, ahead.refused
        )

    def _repair_index(self) -> None:
        """Once a connection has listed to the end: one page read from the thread files, the newest
        first, its answer unused. Codex's index lacks a thread file no Codex indexed (one
        copied into the store from elsewhere, say: Codex indexes what it writes, 0.169 and
        0.171 alike), and an index-only page leaves such a thread out; a page read from the
        files indexes the ones it reads, so the next listing has them. It costs Codex what
        every page cost before (it looks at every file), once, after the client has its last
        page instead of before every one."""
        self._index_repaired = True
        exchanges.start(self.hub, _read_thread_files())


def _read_thread_files() -> Exchange:
    """One page of ``thread/list`` read from the thread files, its answer unused."""
    try:
        yield Ask("thread/list", threads.ThreadListParams(sortKey=LIST_SORT_KEY, limit=LIST_PAGE))
    except Refused as refused:
        log.info("thread/list reading the thread files refused: %s", refused)
