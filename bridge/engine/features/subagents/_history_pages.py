"""Reading a stored thread's history a page at a time, for ``session/load``.

Codex lists a thread's items (``thread/items/list``, 0.171 on) a page at a time; a thread
it has no item history of is read by pages of turns instead (``thread/turns/list``).
Each page is replayed as it arrives while the next is asked for, so a load streams and
holds at most a page or two of history, whatever the thread's length.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

import msgspec
from msgspec import UNSET

from ....codex import threads as codex_threads
from ....codex import types as codex_types
from ....codex.messages import ThreadItem, decode_item
from ....jsonrpc import ErrorCode
from ....jsonrpc.peer import ErrorObject
from ...core.hub import Hub

log = logging.getLogger(__name__)

#: Turns in a page of a loaded history: enough that a page's round trip to Codex is small
#: beside its work, few enough that one page's items are all the history held at once.
TURN_PAGE = 50
#: Items in a page of a loaded history (``thread/items/list``): the most Codex gives.
ITEM_PAGE = 100


#: Replays a page of a stored thread's items, then calls the second argument.
PageReplay = Callable[[list[ThreadItem], Callable[[], None]], None]


class HistoryPages:
    """One stored thread's items a page at a time, oldest first, each handed to ``replay``
    as it arrives; the next page is asked for as one starts to be replayed, so Codex reads
    it meanwhile and at most two pages are held. Then ``done``, with the thread's last turn
    when ``last_turn`` asks for it (its id and status: whether it runs).

    The pages are ``thread/items/list``'s, which Codex reads from its history store, at a
    small fraction of the cost of ``thread/turns/list``'s ``full`` pages (it reads those
    from the thread file); a thread Codex has no items of (``-32601``: one it holds and
    never stored) is read by ``thread/turns/list`` instead, as before it. A page Codex
    refuses midway ends the history with what was replayed (logged)."""

    def __init__(
        self,
        hub: Hub,
        thread_id: str,
        replay: PageReplay,
        done: Callable[[codex_types.Turn | None], None],
        *,
        last_turn: bool = False,
    ) -> None:
        self.hub = hub
        self.thread_id = thread_id
        self._replay = replay
        self._done = done
        self._want_last = last_turn
        #: Pages arrived and not replayed yet (raw items, the next cursor); ``None``: no more.
        self._arrived: deque[tuple[list[msgspec.Raw], str | None] | None] = deque()
        self._replaying = False
        self._by_turns = False
        self._read_any = False
        self._last: codex_types.Turn | None = None

    def start(self) -> None:
        self._ask(None)

    def _ask(self, cursor: str | None) -> None:
        after = cursor if cursor is not None else UNSET
        if self._by_turns:
            self.hub.codex.request(
                codex_threads.LIST_TURNS,
                codex_threads.ThreadTurnsListParams(
                    threadId=self.thread_id,
                    cursor=after,
                    limit=TURN_PAGE,
                    sortDirection="asc",
                    itemsView="full",
                ),
                codex_threads.ThreadTurnsListResult,
                self._turns_listed,
                self._failed,
            )
            return
        self.hub.codex.request(
            codex_threads.LIST_ITEMS,
            codex_threads.ThreadItemsListParams(
                threadId=self.thread_id, cursor=after, limit=ITEM_PAGE, sortDirection="asc"
            ),
            codex_threads.ThreadItemsListResult,
            self._items_listed,
            self._failed,
        )

    def _items_listed(self, page: codex_threads.ThreadItemsListResult) -> None:
        self._listed([entry.item for entry in page.data], page.nextCursor)

    def _turns_listed(self, page: codex_threads.ThreadTurnsListResult) -> None:
        if page.data:
            self._last = page.data[-1]
        self._listed([raw for turn in page.data for raw in turn.items], page.nextCursor)

    def _listed(self, items: list[msgspec.Raw], cursor: str | None) -> None:
        self._read_any = True
        self._arrived.append((items, cursor))
        self._next()

    def _failed(self, error: ErrorObject) -> None:
        if not self._read_any and not self._by_turns and error.code == ErrorCode.METHOD_NOT_FOUND:
            self._by_turns = True
            self._ask(None)
            return
        if not codex_threads.no_turns(error.code, error.message):
            # What was replayed stays, the rest is lost.
            log.warning("history of %s not fully read: %s", self.thread_id, error.message)
        # else: a thread Codex holds and never stored has no turns to list.
        self._arrived.append(None)
        self._next()

    def _next(self) -> None:
        if self._replaying or not self._arrived:
            return
        page = self._arrived.popleft()
        if page is None:
            self._end()
            return
        raw, cursor = page
        self._replaying = True
        if cursor:
            self._ask(cursor)

        def replayed() -> None:
            self._replaying = False
            if not cursor:
                self._arrived.append(None)
            self._next()

        self._replay([decode_item(item) for item in raw], replayed)

    def _end(self) -> None:
        if self._by_turns or not self._want_last or not self._read_any:
            self._done(self._last)
            return

        def listed(page: codex_threads.ThreadTurnsListResult) -> None:
            self._done(page.data[0] if page.data else None)

        def failed(error: ErrorObject) -> None:
            log.info("last turn of %s not read: %s", self.thread_id, error.message)
            self._done(None)

        # Its id and status only: Codex reads no item for it.
        self.hub.codex.request(
            codex_threads.LIST_TURNS,
            codex_threads.ThreadTurnsListParams(
                threadId=self.thread_id, limit=1, sortDirection="desc", itemsView="notLoaded"
            ),
            codex_threads.ThreadTurnsListResult,
            listed,
            failed,
        )
