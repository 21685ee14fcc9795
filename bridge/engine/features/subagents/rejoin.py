"""A resumed or loaded root's sub-agents that Codex still holds: this connection subscribed to them.

Codex sends a thread's ``turn/*`` and ``item/*`` events only to the connections subscribed to
that thread (``thread/start``, ``thread/resume`` and ``thread/fork`` subscribe the one that
asks). A sub-agent spawned while another connection held its root is subscribed to that
connection only; a Codex that outlives it (``--codex-url``, a daemon's, Codex's own daemon)
keeps the sub-agent's thread loaded. Opening the root again subscribes the new connection to
the root alone: work the root then gives that sub-agent (``send_input``) runs in Codex, and
none of its events would reach this connection.

So after ``session/resume`` or ``session/load`` of a root Codex already held (its thread was
loaded before the open), before the open is answered:

1. ``thread/loaded/list``: what Codex holds;
2. ``thread/list {ancestorThreadId, sourceKinds}``: the root's sub-agents at any depth;
3. ``thread/resume`` of each loaded one: a subscription, nothing more. Its answer is not
   shown: a load replayed the sub-agent already (its association and history), and a resume
   announces it as its live traffic arrives (:mod:`bridge.engine.features.subagents._placement`).

A root Codex did not hold has no sub-agent loaded: Codex loads one when the root gives it
work, for the connections subscribed to the root. Best effort: a refusal (a Codex without
these experimental methods) opens the root all the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from msgspec import UNSET

from ....codex import threads as codex_threads
from ....jsonrpc.peer import ErrorObject
from ...core.hub import Hub
from ...core.threads import ThreadRecord

log = logging.getLogger(__name__)

#: Threads asked for a page of ``thread/list``.
LIST_PAGE = 100


class SubagentRejoin:
    """Subscribes this connection to a reopened root's loaded sub-agents (module docstring)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def rejoin(self, root: ThreadRecord, then: Callable[[], None]) -> None:
        """Subscribe to the sub-agents of ``root`` Codex holds, then ``then`` (the answer)."""
        loaded: set[str] = set()

        def loaded_page(page: codex_threads.ThreadLoadedListResult) -> None:
            loaded.update(page.data)
            if page.nextCursor:
                ask_loaded(page.nextCursor)
                return
            loaded.discard(root.id)
            if not loaded:
                then()
                return
            self._descendants(root.id, loaded, then)

        def ask_loaded(cursor: str | None = None) -> None:
            self.hub.codex_request(
                "thread/loaded/list",
                codex_threads.ThreadLoadedListParams(cursor=cursor if cursor else UNSET),
                codex_threads.ThreadLoadedListResult,
                loaded_page,
                self._refused("thread/loaded/list", root.id, then),
            )

        ask_loaded()

    def _descendants(self, root_id: str, loaded: set[str], then: Callable[[], None]) -> None:
        """The sub-agents under ``root_id`` among ``loaded``, each subscribed to."""
        found: list[str] = []

        def page(result: codex_threads.ThreadListResult) -> None:
            found.extend(t.id for t in result.data if t.id in loaded and t.id not in found)
            if result.nextCursor:
                ask(result.nextCursor)
                return
            self._subscribe(found, then)

        def ask(cursor: str | None = None) -> None:
            self.hub.codex_request(
                "thread/list",
                codex_threads.ThreadListParams(
                    cursor=cursor if cursor else UNSET,
                    limit=LIST_PAGE,
                    ancestorThreadId=root_id,
                    sourceKinds=codex_threads.SUBAGENT_SOURCE_KINDS,
                ),
                codex_threads.ThreadListResult,
                page,
                self._refused("thread/list", root_id, then),
            )

        ask()

    def _subscribe(self, thread_ids: list[str], then: Callable[[], None]) -> None:
        """``thread/resume`` of each of ``thread_ids``; ``then`` once every one is answered."""
        if not thread_ids:
            then()
            return
        outstanding = len(thread_ids)

        def answered() -> None:
            nonlocal outstanding
            outstanding -= 1
            if outstanding == 0:
                then()

        for thread_id in thread_ids:

            def refused(error: ErrorObject, thread_id: str = thread_id) -> None:
                log.info("thread/resume of sub-agent %s refused: %s", thread_id, error.message)
                answered()

            self.hub.codex_request(
                "thread/resume",
                codex_threads.ThreadResumeParams(threadId=thread_id, excludeTurns=True),
                None,
                lambda _result: answered(),
                refused,
            )

    @staticmethod
    def _refused(
        method: str, root_id: str, then: Callable[[], None]
    ) -> Callable[[ErrorObject], None]:
        def refused(error: ErrorObject) -> None:
            log.info("%s for the sub-agents of %s refused: %s", method, root_id, error.message)
            then()

        return refused
