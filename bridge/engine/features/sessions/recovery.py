"""After Codex comes back: every session resumed, every sub-agent's state made fresh.

When the shell has restarted Codex (or reconnected to it) and the new
connection's handshake is done, the engine calls :meth:`Recovery.recover`:

- each root session is resumed (``thread/resume``: this connection subscribes
  again, and Codex re-sends the requests still waiting on the user, with their
  ids), so its next prompt works with the same session id;
- each sub-agent is resumed too and read (``thread/read`` with its turns): its
  status and its last turn replace the ``unknown`` the loss left, and the new
  snapshot is sent on its parent's stream;
- threads still being placed when Codex went away start over (their traffic
  will be read again when it arrives).

A session Codex no longer knows stays open here; its next request gets
Codex's own error, or, for a session never prompted (Codex never stored it), a
-32002 saying it does not survive a restart of Codex. A session never prompted
on the same Codex reconnected is resumed as ``session/resume`` does it (its
turns read to write it, then resumed). Nothing is guessed: a sub-agent that
cannot be read stays ``unknown``.
"""

from __future__ import annotations

import logging
from dataclasses import KW_ONLY, dataclass
from typing import Protocol

from msgspec import UNSET

from ....codex import threads as codex_threads
from ....jsonrpc.peer import ErrorObject
from ...core import turns, workstate
from ...core.codex_asks import ReadSubagent, ResumeThread, WriteThread
from ...core.folders import workspace_roots
from ...core.hub import Hub
from ...core.record_parts import Status
from ...core.threads import ThreadRecord

log = logging.getLogger(__name__)

#: How Codex 0.169 refuses ``thread/resume`` of a thread it neither holds nor stored.
_NOT_THERE = (codex_threads.NO_ROLLOUT, "thread not loaded", "thread not found")


class WorkReports(Protocol):
    """Reports sub-agents' work (:mod:`bridge.engine.features.subagents.subagents`)."""

    def report(self, record: ThreadRecord) -> None:
        """Send a sub-agent's work state when it changed."""


class Resumes(Protocol):
    """Waits on a session's resume (:mod:`bridge.engine.features.prompts.prompts`)."""

    def resume_done(self, record: ThreadRecord) -> None:
        """The session's resume is done, whichever way (its prompts wait for it)."""


@dataclass(eq=False)
class Recovery:
    """Resumes every session on a new Codex connection (see the module docstring)."""

    hub: Hub
    _: KW_ONLY
    #: Told each sub-agent's state once it was read.
    subagents: WorkReports
    #: Told once each session's resume is done.
    prompts: Resumes

    def recover(self) -> None:
        for record in self.hub.threads:
            if not record.session:
                # HeldMessage traffic was for the connection that is gone.
                record.placing.forget_held()
                continue
            self._resume(record)

    def _resume(self, record: ThreadRecord) -> None:
        # A session Codex may not have written: its prompts wait for the resume, which may
        # take a second try (below). Others' go along with it, as Codex takes them in order.
        record.life.resume_begun()
        self._ask_resume(record, ResumeThread())

    def _ask_resume(self, record: ThreadRecord, asked: ResumeThread) -> None:
        self.hub.codex.ask(
            record,
            asked,
            "thread/resume",
            codex_threads.ThreadResumeParams(
                threadId=record.id,
                cwd=record.cwd or UNSET,
                excludeTurns=True,
                # Codex kept them in the stored thread; said again, as the session has them.
                runtimeWorkspaceRoots=workspace_roots(record.cwd, record.life.folders),
            ),
            None,
            self._subscribed,
            self._resume_refused,
        )

    def _done(self, record: ThreadRecord) -> None:
        if record.life.resuming:
            record.life.resume_ended()
            self.prompts.resume_done(record)

    def _subscribed(self, record: ThreadRecord, _asked: ResumeThread, _result: object) -> None:
        record.life.found()
        if record.is_child:
            self._read(record)
        self._done(record)

    def _resume_refused(
        self, record: ThreadRecord, asked: ResumeThread, error: ErrorObject
    ) -> None:
        if codex_threads.no_turns(error.code, error.message):
            # Subscribed: a thread never prompted has no turns to list.
            record.life.found()
            self._done(record)
            return
        log.warning("thread/resume %s after Codex came back: %s", record.id, error.message)
        if record.is_child or not error.message.startswith(_NOT_THERE):
            self._done(record)
            return  # its next request carries Codex's own words; nothing is invented
        if error.message.startswith(codex_threads.NO_ROLLOUT) and not asked.written:
            # Perhaps the same Codex, reconnected, which holds the session but never
            # wrote it: reading its turns writes it, after which a resume subscribes
            # (as a load does). Its prompts wait for that.
            self.hub.codex.ask(
                record,
                WriteThread(),
                "thread/read",
                codex_threads.ThreadReadParams(threadId=record.id, includeTurns=True),
                None,
                self._resume_written,
                self._resume_written,
            )
            return
        # A session never prompted: a new Codex does not know it (Codex never stored
        # it), and its requests say so rather than Codex's bare words.
        record.life.found(
            f"Session {record.id} is gone: Codex restarted, and a session never "
            "prompted is not stored, so it does not survive a restart of Codex "
            f"(Codex: {error.message})"
        )
        self._done(record)

    def _resume_written(self, record: ThreadRecord, _asked: WriteThread, _answer: object) -> None:
        """The session's turns were read (or not: its resume says what Codex thinks)."""
        self._ask_resume(record, ResumeThread(written=True))

    def _read(self, record: ThreadRecord) -> None:
        """Read a sub-agent's state (its status, its last turn), unless it is forgotten
        before Codex answers."""
        self.hub.codex.ask(
            record,
            ReadSubagent(),
            "thread/read",
            codex_threads.ThreadReadParams(threadId=record.id, includeTurns=True),
            codex_threads.ThreadReadResult,
            self._subagent_read,
            _subagent_unread,
        )

    def _subagent_read(
        self, record: ThreadRecord, _asked: ReadSubagent, result: codex_threads.ThreadReadResult
    ) -> None:
        stored = result.thread
        record.work.found(Status.of(stored.status))
        last = stored.turns[-1] if stored.turns else None
        if last is not None and last.status == "inProgress":
            turns.subagent_running(record, last.id, last.rootTurnId)
        else:
            turns.subagent_running(record, None)
            if last is not None:
                error = last.error.message if last.error else None
                record.work.last_ended(workstate.turn_outcome(last.status, error))
        self.subagents.report(record)


def _subagent_unread(record: ThreadRecord, _asked: ReadSubagent, error: ErrorObject) -> None:
    log.warning("sub-agent %s unreadable after Codex came back: %s", record.id, error.message)
