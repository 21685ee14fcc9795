"""Cancelled work stops its commands too.

``turn/interrupt`` ends a turn, but a command the turn started with
``exec_command`` (a ``sleep 40``, a dev server, a test run) outlives it: Codex
keeps it as a *background terminal* of the thread. ACP's ``session/cancel``
means "stop the work", so after every cancel (``session/cancel``, and
``session/close`` which cancels too) the bridge stops the commands of every
thread whose work was cancelled: the session's own thread and, as the RFD
cascades a cancel, every sub-agent under it. Threads outside the cancelled tree
keep theirs.

Codex's experimental ``thread/backgroundTerminals/clean {threadId}`` stops all
of a thread's commands at once. It is sent twice per thread:

- at once, for what is already running in the background;
- again when the interrupted turn ends, for the command the turn was still
  waiting on as the interrupt arrived (Codex makes it a background terminal
  as the turn stops).

A Codex without the method (experimental methods come and go between Codex
versions) answers with an error: the bridge logs it once and stops asking;
cancels then stop turns only, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ....codex import threads as codex_threads
from ....codex import types as codex_types
from ...core import exchanges
from ...core.answers import unknown_method
from ...core.exchanges import Ask, Exchange, Refused
from ...core.hub import Hub

log = logging.getLogger(__name__)

CLEAN = "thread/backgroundTerminals/clean"


class Terminals:
    """Stops the commands of cancelled threads (see the module docstring)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: Threads whose interrupted turn has not ended yet: cleaned again when it does.
        self._after_turn: set[str] = set()
        #: False once Codex said it has no such method.
        self.supported = True

    def work_cancelled(self, thread_ids: Iterable[str], *, running: Iterable[str]) -> None:
        """The work of ``thread_ids`` was cancelled; ``running`` are those with a turn
        still to end."""
        for thread_id in thread_ids:
            self._clean(thread_id)
        self._after_turn.update(running)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        """Called for every ``turn/completed``, of shown threads or not: a closed
        session's thread still has its commands to stop."""
        if note.threadId in self._after_turn:
            self._after_turn.discard(note.threadId)
            self._clean(note.threadId)

    def codex_lost(self) -> None:
        # Codex's processes, and their commands, are gone with it.
        self._after_turn.clear()

    def _clean(self, thread_id: str) -> None:
        if not self.supported or self.hub.codex.lost_reason is not None:
            return

        exchanges.start(self.hub, self._cleaned(thread_id))

    def _cleaned(self, thread_id: str) -> Exchange:
        try:
            yield Ask(CLEAN, codex_threads.BackgroundTerminalsCleanParams(threadId=thread_id))
        except Refused as refused:
            if unknown_method(refused.error):
                self.supported = False
                log.warning(
                    "Codex does not support %s (%s): cancelling stops turns, not their commands",
                    CLEAN,
                    refused,
                )
            else:
                log.info("%s of %s failed: %s", CLEAN, thread_id, refused)
