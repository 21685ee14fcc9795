"""Part of the palette: ``/rewind [N]``, the last N prompts taken back, their conversation and
their file changes.

One rewind, in order (each step waits for Codex's answer to the one before):

1. **Read** the thread's newest turns (``thread/turns/list``, newest first, every item, a
   page at a time until N prompts are found): the span taken back and what it did
   (:mod:`bridge.engine.features.palette._rewind_plan`). A turn still running there, or a sub-agent of
   the session still at work, refuses the rewind (-32600) with nothing changed; so do too
   few prompts (-32602).
2. **Read the files** the span's changes touch, but those outside the session's folders
   (``rewind_plan.outside_of``: as written, and for a session on this machine once more
   with symlinks resolved by the shell's ``real_path``; on another machine only as
   written, since the shell has no view of its links), through Codex (``fs/readFile``, all at once):
   never the bridge's own file system, which may not be Codex's. On the machine the session
   works on: the app-server's own file methods reach only its machine (they take no
   environment), so for a session on another machine the same methods are asked of that
   machine's ``codex exec-server`` itself (``MachineCall``, paths as ``file://`` URIs), on
   a connection of the shell's own; a machine it cannot reach makes each read an error, so
   each change a conflict, and nothing is written there.
3. **Plan** the undo, newest change first, only where each file is still as its change left
   it (``rewind_plan.plan_undo``); the rest are conflicts, named with their diffs.
4. **Revert** the history (``thread/revert {beforeTurnId}``: Codex keeps the turns before the
   oldest one taken back). Codex refusing is the prompt's error, with nothing changed.
5. **Write** each file's final text (``fs/writeFile``; ``fs/createDirectory`` first for a
   file that is not there now; ``fs/remove``, never of a folder with what it holds, for a file
   the span created), on the same machine as step 2, never outside the session's folders
   (judged again just before, on this machine: a link made meanwhile leads nowhere).
   A write Codex refuses is named in the answer.
6. **Answer**: what was taken back, returned, left alone, and not undone (commands, MCP
   calls, sub-agents); the client is told to reload the session to see the shorter
   conversation (a load then replays what Codex now holds, without the sub-agents the span
   spawned: a load finds them through their spawns).
"""

from __future__ import annotations

import base64
import binascii
import logging
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field

from ....codex import files as codex_files
from ....codex import palette as codex_palette
from ....codex import threads as codex_threads
from ....codex import types as codex_types
from ....jsonrpc import ErrorCode, RpcError
from ...core import exchanges
from ...core.answers import from_codex
from ...core.exchanges import All, Ask, Each, Exchange, Refused, Steps
from ...core.hub import Hub
from ...core.machines import LOCAL, workspace
from ...core.threads import ThreadRecord
from . import _rewind_plan as rewind_plan
from ._rewind_plan import FileNow, Outcome, Span, Unreadable

log = logging.getLogger(__name__)

Done = Callable[[str], None]
Failed = Callable[[RpcError], None]

#: Turns asked of Codex a page (a prompt's turn and the few without a prompt after it).
PAGE = 20


def encode_text(text: str) -> str:
    """A file's text as Codex's base64 (bytes that were not UTF-8 kept as they were)."""
    return base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")


def decode_text(data: str) -> str | None:
    """Codex's base64 as text (``None``: not base64)."""
    try:
        return base64.b64decode(data, validate=True).decode("utf-8", "surrogateescape")
    except (binascii.Error, ValueError):
        return None


@dataclass(slots=True, eq=False)
class _Run:
    """One rewind under way."""

    record: ThreadRecord
    count: int
    done: Done
    failed: Failed
    turns: list[codex_types.Turn] = field(default_factory=list)
    span: Span | None = None
    now: dict[str, FileNow] = field(default_factory=dict)
    outcome: Outcome | None = None
    #: Where the session works: its files are read and written there.
    machine: str = LOCAL
    #: Its folder there (relative paths are taken in it, and shown from it).
    cwd: str = ""
    #: The folders a rewind may write in: ``cwd`` and, on this machine, the session's others.
    roots: tuple[str, ...] = ()
    #: The paths of the span it must not touch, with why.
    outside: dict[str, str] = field(default_factory=dict)


class Rewind:
    """Runs ``/rewind`` (see the module docstring)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def run(self, record: ThreadRecord, count: int, done: Done, failed: Failed) -> None:
        working = [
            child for child in self.hub.threads.descendants(record.id) if child.turn is not None
        ]
        if working:
            names = ", ".join(child.nickname or child.id for child in working)
            failed(
                RpcError(
                    ErrorCode.INVALID_REQUEST,
                    f"/rewind takes back finished prompts only: sub-agents still work ({names})",
                    {"sessionId": record.id},
                )
            )
            return
        settings = record.settings
        machine = self._files_of(settings.machine if settings is not None else LOCAL)
        known = self.hub.machines.get(machine)
        cwd = workspace(known.offer if known is not None else None, record.cwd)
        # The session's other folders are this machine's (a machine's session has its own cwd).
        roots = (cwd, *record.life.folders) if machine == LOCAL else (cwd,)
        run = _Run(record, count, done, failed, machine=machine, cwd=cwd, roots=roots)
        exchanges.start(self.hub, self._rewound(run))

    def _rewound(self, run: _Run) -> Exchange:
        """The steps of the module docstring, in order: the span, the files as they are
        now, the plan, the history reverted, the files written back, the answer."""
        span = yield from self._span(run)
        if span is None:
            return
        run.span = span
        run.outcome = self._outcome(run)
        yield from self._read_files(run)
        run.outcome.plan = rewind_plan.plan_undo(span.changes, run.now, run.outside)
        revert = codex_files.ThreadRevertParams(
            threadId=run.record.id, beforeTurnId=span.before_turn
        )
        try:
            yield Ask(codex_files.REVERT, revert, codex_palette.Empty)
        except Refused as refused:
            run.failed(from_codex(refused.error))
            return
        log.info("session %s: history reverted before turn %s", run.record.id, span.before_turn)
        yield Each(tuple(self._write_back(run, path, text) for path, text in self._writes(run)))
        run.done(rewind_plan.answer_text(run.outcome))

    # -- 1. the span --------------------------------------------------------------------------

    def _files_of(self, machine: str) -> str:
        """Where the files of a turn on ``machine`` are: a session's own container (a
        per-session machine) has the session's folders mounted from here, and is gone
        once the session is."""
        known = self.hub.machines.get(machine)
        return LOCAL if known is not None and known.offer.per_session else machine

    def _span(self, run: _Run) -> Steps[Span | None]:
        """The turns read, newest first, a page at a time, until they hold the prompts to
        take back; ``None`` once the client was told why not."""
        cursor: str | None = None
        while True:
            params = codex_threads.ThreadTurnsListParams(
                threadId=run.record.id, sortDirection="desc", itemsView="full", limit=PAGE
            )
            if cursor:
                params.cursor = cursor
            try:
                page = yield Ask(
                    codex_threads.LIST_TURNS, params, codex_threads.ThreadTurnsListResult
                )
            except Refused as refused:
                error = refused.error
                no_turns = codex_threads.no_turns(error.code, error.message)
                run.failed(_too_few(run.count, 0) if no_turns else from_codex(error))
                return None
            run.turns += page.data
            if run.turns and run.turns[0].status == "inProgress":
                run.failed(_busy(run.record, "a turn is still running"))
                return None
            elsewhere = {
                turn: machine
                for turn, machine in run.record.turn_machines.items()
                if self._files_of(machine) != run.machine
            }
            span = rewind_plan.find_span(run.turns, run.count, run.cwd, elsewhere)
            if span is not None:
                return span
            if not (page.nextCursor and page.data):
                run.failed(_too_few(run.count, rewind_plan.prompts_in(run.turns)))
                return None
            cursor = page.nextCursor

    # -- 2. the files, as they are now ----------------------------------------------------

    def _read_files(self, run: _Run) -> Exchange:
        """The span's files as they are now, read at once (those it may touch)."""
        assert run.span is not None
        touched = rewind_plan.paths_of(run.span.changes)
        # This machine's files: their symlinks resolved too, as the shell sees them (Codex's
        # file system, unless --codex-url names a Codex elsewhere: there a path the shell
        # cannot find is judged as written). Another machine's: as written only, since no
        # one here sees its links.
        real_path = self.hub.setup.real_path if run.machine == LOCAL else None
        run.outside = rewind_plan.outside_of(touched, run.roots, real_path)
        paths = [path for path in touched if path not in run.outside]
        reads = [
            self._fs(
                run,
                codex_files.READ_FILE,
                codex_files.FsReadFileParams(path=self._where(run, path)),
                codex_files.FsReadFileResult,
            )
            for path in paths
        ]
        outcomes = yield All(tuple(reads))
        for path, outcome in zip(paths, outcomes, strict=True):
            if isinstance(outcome, Refused):
                message = outcome.error.message
                run.now[path] = None if codex_files.not_found(message) else Unreadable(message)
            else:
                text = decode_text(outcome.dataBase64)
                run.now[path] = text if text is not None else Unreadable("not base64")

    def _outcome(self, run: _Run) -> Outcome:
        assert run.span is not None
        return Outcome(
            span=run.span,
            plan=rewind_plan.UndoPlan(),
            cwd=run.cwd,
            machine=run.machine if run.machine != LOCAL else "",
            nicknames={t: self._nickname(t) for t in run.span.spawned},
        )

    def _where(self, run: _Run, path: str) -> str:
        """``path`` as the file methods of the session's machine take it."""
        return path if run.machine == LOCAL else codex_files.file_uri(path)

    def _fs(self, run: _Run, method: str, params: object, result: object = None) -> Ask:
        """A file method, asked where the session works: Codex's app-server for this
        machine, else that machine's exec-server."""
        machine = None if run.machine == LOCAL else run.machine
        return Ask(
            method, params, result if result is not None else codex_palette.Empty, machine=machine
        )

    def _nickname(self, thread_id: str) -> str | None:
        record = self.hub.threads.get(thread_id)
        return record.nickname if record is not None else None

    # -- 5. the files, written back -------------------------------------------------------------

    def _writes(self, run: _Run) -> list[tuple[str, str | None]]:
        """What the plan writes (``None``: removes), each path judged again here."""
        assert run.outcome is not None
        writes = dict(run.outcome.plan.writes)
        if run.machine == LOCAL:
            # Judged again: a link made since the files were read (a command that outlived
            # its turn) would lead a write out of the folders. What is left is the instant
            # between this and Codex's write.
            for path, why in rewind_plan.outside_of(
                writes, run.roots, self.hub.setup.real_path
            ).items():
                del writes[path]
                run.outcome.failed[path] = why
        return list(writes.items())

    def _write_back(self, run: _Run, path: str, text: str | None) -> Exchange:
        """One file as it was: removed, or written (its folder made first when the file is
        not there now: the folder may be gone too)."""
        assert run.outcome is not None
        where = self._where(run, path)
        try:
            if text is None:
                params: object = codex_files.FsRemoveParams(path=where, recursive=False)
                yield self._fs(run, codex_files.REMOVE, params)
                return
            if run.now.get(path) is None:
                folder = self._where(run, posixpath.dirname(path))
                params = codex_files.FsCreateDirectoryParams(path=folder, recursive=True)
                yield self._fs(run, codex_files.CREATE_DIRECTORY, params)
            params = codex_files.FsWriteFileParams(path=where, dataBase64=encode_text(text))
            yield self._fs(run, codex_files.WRITE_FILE, params)
        except Refused as refused:
            log.warning("/rewind: Codex could not write %s: %s", path, refused)
            run.outcome.failed[path] = f"Codex: {refused}"


def _busy(record: ThreadRecord, why: str) -> RpcError:
    return RpcError(
        ErrorCode.INVALID_REQUEST,
        f"/rewind takes back finished prompts only: {why}",
        {"sessionId": record.id},
    )


def _too_few(count: int, found: int) -> RpcError:
    if found == 0:
        return RpcError.invalid_params("/rewind: this session has no prompt to take back yet")
    have = f"{found} prompt" + ("s" if found != 1 else "")
    return RpcError.invalid_params(
        f"/rewind {count}: this session has only {have} to take back (/rewind {found} takes them all)"
    )
