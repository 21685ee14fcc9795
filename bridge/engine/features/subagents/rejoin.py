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
from ...core import exchanges
from ...core.exchanges import All, Ask, Exchange, Refused, Steps
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
        exchanges.start(self.hub, _rejoin(root.id, then))


def _rejoin(root_id: str, then: Callable[[], None]) -> Exchange:
    """Steps 1-3 of the module docstring; a refusal of any is logged and ends them."""
    try:
        loaded = yield from _loaded()
        loaded.discard(root_id)
        found = (yield from _descendants(root_id, loaded)) if loaded else []
        resumes = [
            Ask("thread/resume", codex_threads.ThreadResumeParams(threadId=t, excludeTurns=True))
            for t in found
        ]
        outcomes = yield All(tuple(resumes))
        for thread_id, outcome in zip(found, outcomes, strict=True):
            if isinstance(outcome, Refused):
                log.info("thread/resume of sub-agent %s refused: %s", thread_id, outcome)
    except Refused as refused:
        log.info("%s for the sub-agents of %s refused: %s", refused.method, root_id, refused)
    then()


def _loaded() -> Steps[set[str]]:
    """Every thread Codex holds (``thread/loaded/list``, page by page)."""
    loaded: set[str] = set()
    cursor: str | None = None
    while True:
        params = codex_threads.ThreadLoadedListParams(cursor=cursor or UNSET)
        page = yield Ask("thread/loaded/list", params, codex_threads.ThreadLoadedListResult)
        loaded.update(page.data)
        if not page.nextCursor:
            return loaded
        cursor = page.nextCursor


def _descendants(root_id: str, loaded: set[str]) -> Steps[list[str]]:
    """The sub-agents under ``root_id`` among ``loaded`` (``thread/list``, page by page)."""
    found: list[str] = []
    cursor: str | None = None
    while True:
        params = codex_threads.ThreadListParams(
            cursor=cursor or UNSET,
            limit=LIST_PAGE,
            ancestorThreadId=root_id,
            sourceKinds=codex_threads.SUBAGENT_SOURCE_KINDS,
        )
        page = yield Ask("thread/list", params, codex_threads.ThreadListResult)
        found.extend(t.id for t in page.data if t.id in loaded and t.id not in found)
        if not page.nextCursor:
            return found
        cursor = page.nextCursor
