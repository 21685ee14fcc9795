"""Codex's model catalog (``model/list``, every page), as the settings feature offers it.

Part of :mod:`bridge.engine.features.settings.settings`. It is asked once per connection to
Codex, at its handshake, so that the first ``session/new``, ``load`` or ``resume`` answer
already lists every model (a client that reads only that answer can pick any of them); what
needs it meanwhile waits for it (:meth:`ModelCatalog.when_ready`). A failure leaves it unknown:
sessions keep offering the model they run, and the next handshake asks again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ....codex import settings as codex_settings
from ....jsonrpc.peer import ErrorObject
from ...core.hub import Hub

log = logging.getLogger(__name__)


class ModelCatalog:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: Every page's models but the hidden ones; ``None`` until first asked for (or after a
        #: failure).
        self.models: list[codex_settings.Model] | None = None
        #: What waits for the catalog asked for (``None``: not being asked for).
        self._waiting: list[Callable[[], None]] | None = None
        #: What the asker has done once every page is in.
        self._then: Callable[[], None] = _nothing

    def ask(self, then: Callable[[], None]) -> None:
        """Ask Codex for its models unless they are known or being asked for; ``then`` once
        every page is in (not after a failure: nothing changed)."""
        if self.models is not None:
            return
        self.models, self._waiting, self._then = [], [], then
        self._ask_page(None)

    def when_ready(self, then: Callable[[], None]) -> None:
        """Run ``then`` once the catalog asked for is in (or failed); at once if it is not
        being asked for."""
        if self._waiting is None:
            then()
        else:
            self._waiting.append(then)

    def _ask_page(self, cursor: str | None) -> None:
        params = (
            codex_settings.ModelListParams()
            if cursor is None
            else codex_settings.ModelListParams(cursor=cursor)
        )
        self.hub.codex.request(
            "model/list", params, codex_settings.ModelListResult, self._page_in, self._failed
        )

    def _page_in(self, page: codex_settings.ModelListResult) -> None:
        assert self.models is not None
        self.models.extend(m for m in page.data if not m.hidden)
        if page.nextCursor:
            self._ask_page(page.nextCursor)
            return
        self._then()
        self._release()

    def _failed(self, error: ErrorObject) -> None:
        log.warning("model/list failed: %s", error.message)
        self.models = None
        self._release()

    def _release(self) -> None:
        waiting, self._waiting = self._waiting or [], None
        for then in waiting:
            then()


def _nothing() -> None:
    pass
