"""The page of a ``session/list`` listing after the one just answered, asked of Codex
ahead of the client (see :class:`PageAhead`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ....codex import threads
from ....jsonrpc.peer import ErrorObject

log = logging.getLogger(__name__)


#: Answers a ``session/list`` with Codex's page.
Listed = Callable[[threads.ThreadListResult], None]


class PageAhead:
    """The page of a listing after the one just answered (from the listing's second page
    on), asked of Codex before the client asks for it: a client that pages reads the pages
    back to back, so Codex reads the next while the client takes this one, and the client's
    next request finds it read. It
    answers only the very next ``session/list``, and only if that asks for it (the same
    cursor, ``cwd`` and archive filter): any other listing asks Codex afresh, as does the
    client's request when Codex refused the page asked ahead."""

    def __init__(self, request: threads.ThreadListParams) -> None:
        self.request = request
        self._page: threads.ThreadListResult | None = None
        self._refused = False
        #: The client's request waiting for the page: how to answer it, how to ask afresh.
        self._waiting: tuple[Listed, Callable[[], None]] | None = None

    def arrived(self, page: threads.ThreadListResult) -> None:
        if self._waiting is not None:
            self._waiting[0](page)
        else:
            self._page = page

    def refused(self, error: ErrorObject) -> None:
        log.info("thread/list of the page ahead refused: %s", error.message)
        self._refused = True
        if self._waiting is not None:
            self._waiting[1]()

    def take(self, listed: Listed, ask: Callable[[], None]) -> None:
        """Answer with the page, now or when it arrives; refused, ``ask`` Codex afresh."""
        if self._page is not None:
            listed(self._page)
        elif self._refused:
            ask()
        else:
            self._waiting = (listed, ask)
