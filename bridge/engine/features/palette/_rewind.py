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
from typing import Any

from ....codex import files as codex_files
from ....codex import palette as codex_palette
from ....codex import threads as codex_threads
from ....codex import types as codex_types
from ....jsonrpc import ErrorCode, RpcError
from ....jsonrpc.peer import ErrorObject
from ...core.answers import from_codex
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
    #: Writes sent and not answered yet.
    writing: int = 0
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
        roots = (cwd, *record.folders) if machine == LOCAL else (cwd,)
        run = _Run(record, count, done, failed, machine=machine, cwd=cwd, roots=roots)
        self._read_turns(run)

    # -- 1. the span --------------------------------------------------------------------------

    def _files_of(self, machine: str) -> str:
        """Where the files of a turn on ``machine`` are: a session's own container (a
        per-session machine) has the session's folders mounted from here, and is gone
        once the session is."""
        known = self.hub.machines.get(machine)
        return LOCAL if known is not None and known.offer.per_session else machine

    def _read_turns(self, run: _Run, cursor: str | None = None) -> None:
        params = codex_threads.ThreadTurnsListParams(
            threadId=run.record.id, sortDirection="desc", itemsView="full", limit=PAGE
        )
        if cursor:
            params.cursor = cursor

        def listed(page: codex_threads.ThreadTurnsListResult) -> None:
            run.turns += page.data
            if run.turns and run.turns[0].status == "inProgress":
                run.failed(_busy(run.record, "a turn is still running"))
                return
            elsewhere = {
                turn: machine
                for turn, machine in run.record.turn_machines.items()
                if self._files_of(machine) != run.machine
            }
            span = rewind_plan.find_span(run.turns, run.count, run.cwd, elsewhere)
            if span is None and page.nextCursor and page.data:
                self._read_turns(run, page.nextCursor)
            elif span is None:
                run.failed(_too_few(run.count, rewind_plan.prompts_in(run.turns)))
            else:
                run.span = span
                self._read_files(run)

        def refused(error: ErrorObject) -> None:
            if codex_threads.no_turns(error.code, error.message):
                run.failed(_too_few(run.count, 0))
            else:
                run.failed(from_codex(error))

        self.hub.codex_request(
            codex_threads.LIST_TURNS, params, codex_threads.ThreadTurnsListResult, listed, refused
        )

    # -- 2. the files, as they are now ----------------------------------------------------

    def _read_files(self, run: _Run) -> None:
        assert run.span is not None
        touched = rewind_plan.paths_of(run.span.changes)
        # This machine's files: their symlinks resolved too, as the shell sees them (Codex's
        # file system, unless --codex-url names a Codex elsewhere: there a path the shell
        # cannot find is judged as written). Another machine's: as written only, since no
        # one here sees its links.
        real_path = self.hub.setup.real_path if run.machine == LOCAL else None
        run.outside = rewind_plan.outside_of(touched, run.roots, real_path)
        paths = [path for path in touched if path not in run.outside]
        run.outcome = Outcome(
            span=run.span,
            plan=rewind_plan.UndoPlan(),
            cwd=run.cwd,
            machine=run.machine if run.machine != LOCAL else "",
            nicknames={t: self._nickname(t) for t in run.span.spawned},
        )
        if not paths:
            self._plan(run)
            return
        waiting = set(paths)

        def answered(path: str, now: FileNow) -> None:
            run.now[path] = now
            waiting.discard(path)
            if not waiting:
                self._plan(run)

        for path in paths:

            def read(result: codex_files.FsReadFileResult, path: str = path) -> None:
                text = decode_text(result.dataBase64)
                answered(path, text if text is not None else Unreadable("not base64"))

            def unread(error: ErrorObject, path: str = path) -> None:
                answered(
                    path,
                    None if codex_files.not_found(error.message) else Unreadable(error.message),
                )

            self._fs(
                run,
                codex_files.READ_FILE,
                codex_files.FsReadFileParams(path=self._where(run, path)),
                codex_files.FsReadFileResult,
                read,
                unread,
            )

    def _where(self, run: _Run, path: str) -> str:
        """``path`` as the file methods of the session's machine take it."""
        return path if run.machine == LOCAL else codex_files.file_uri(path)

    def _fs(
        self,
        run: _Run,
        method: str,
        params: object,
        result: object,
        on_result: Callable[[Any], None],
        on_error: Callable[[ErrorObject], None],
    ) -> None:
        """A file method, asked where the session works: Codex's app-server for this
        machine, else that machine's exec-server."""
        if run.machine == LOCAL:
            self.hub.codex_request(method, params, result, on_result, on_error)
        else:
            self.hub.machine_request(run.machine, method, params, result, on_result, on_error)

    def _nickname(self, thread_id: str) -> str | None:
        record = self.hub.threads.get(thread_id)
        return record.nickname if record is not None else None

    # -- 3. the plan --------------------------------------------------------------------------

    def _plan(self, run: _Run) -> None:
        assert run.span is not None and run.outcome is not None
        run.outcome.plan = rewind_plan.plan_undo(run.span.changes, run.now, run.outside)
        self._revert(run)

    # -- 4. the history -----------------------------------------------------------------------

    def _revert(self, run: _Run) -> None:
        assert run.span is not None

        def reverted(_result: codex_palette.Empty) -> None:
            log.info(
                "session %s: history reverted before turn %s",
                run.record.id,
                run.span.before_turn if run.span else "?",
            )
            self._write(run)

        self.hub.codex_request(
            codex_files.REVERT,
            codex_files.ThreadRevertParams(
                threadId=run.record.id, beforeTurnId=run.span.before_turn
            ),
            codex_palette.Empty,
            reverted,
            lambda error: run.failed(from_codex(error)),
        )

    # -- 5. the files, written back -------------------------------------------------------------

    def _write(self, run: _Run) -> None:
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
        if not writes:
            self._answer(run)
            return
        run.writing = len(writes)
        for path, text in writes.items():
            if text is None:
                self._ask_write(
                    run,
                    path,
                    codex_files.REMOVE,
                    codex_files.FsRemoveParams(path=self._where(run, path), recursive=False),
                )
            elif run.now.get(path) is None:
                self._create_then_write(run, path, text)
            else:
                self._write_file(run, path, text)

    def _create_then_write(self, run: _Run, path: str, text: str) -> None:
        """A file that is not there now: its folder first (it may be gone too)."""

        def created(_result: codex_palette.Empty) -> None:
            self._write_file(run, path, text)

        self._fs(
            run,
            codex_files.CREATE_DIRECTORY,
            codex_files.FsCreateDirectoryParams(
                path=self._where(run, posixpath.dirname(path)), recursive=True
            ),
            codex_palette.Empty,
            created,
            lambda error: self._written(run, path, error),
        )

    def _write_file(self, run: _Run, path: str, text: str) -> None:
        self._ask_write(
            run,
            path,
            codex_files.WRITE_FILE,
            codex_files.FsWriteFileParams(
                path=self._where(run, path), dataBase64=encode_text(text)
            ),
        )

    def _ask_write(self, run: _Run, path: str, method: str, params: object) -> None:
        self._fs(
            run,
            method,
            params,
            codex_palette.Empty,
            lambda _result: self._written(run, path, None),
            lambda error: self._written(run, path, error),
        )

    def _written(self, run: _Run, path: str, error: ErrorObject | None) -> None:
        assert run.outcome is not None
        if error is not None:
            log.warning("/rewind: Codex could not write %s: %s", path, error.message)
            run.outcome.failed[path] = f"Codex: {error.message}"
        run.writing -= 1
        if run.writing == 0:
            self._answer(run)

    # -- 6. the answer ----------------------------------------------------------------------

    def _answer(self, run: _Run) -> None:
        assert run.outcome is not None
        run.done(rewind_plan.answer_text(run.outcome))


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
