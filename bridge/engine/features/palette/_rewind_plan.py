"""``/rewind``'s plan, pure: which stored turns a rewind takes back, how their file changes are
undone, and what the answer says.

**The span.** A prompt is a stored turn that holds a user message (a ``/compact`` or a goal's
own turn holds none). ``/rewind N`` takes back the N newest prompts and every turn after the
oldest of them (:func:`find_span`, fed Codex's turns newest first): that oldest one is the
``beforeTurnId`` of ``thread/revert``. What those turns did beside talking is gathered, oldest
first: the file changes of their ``fileChange`` items that applied (``completed``), the
commands that ran (every ``commandExecution`` not ``declined``, except a plain read or search,
:func:`~.command_kind.command_kind`: those changed nothing), the MCP tool calls, and the
sub-agents they spawned.

**The undo.** :func:`plan_undo` replays the changes backwards, newest first, over the files as
they are now (read through Codex): each change is undone only where the file is still as that
change left it, as far as its diff can tell:

- an added file is removed when it still holds exactly the text the change gave it;
- a deleted file is written back (its whole old text is the diff) when nothing is there now;
- an updated file is returned when each hunk's new side still stands at its place (and,
  when the hunks reach the end of the file, nothing follows), and its old side does not
  (:func:`~.diffs.rebuild`): lines the change did not touch may have changed meanwhile and
  keep that; a moved file also needs its old path free again.

A change a turn made on another machine than the session works on now (the bridge started
that turn there) is left alone and named: the files a rewind reaches are not its.

**The session's folders.** A rewind writes (creates, overwrites, removes) only below the
session's folders (:func:`inside`: its ``cwd``, and any other folder the session was given),
whatever the history names: a crafted or foreign one can name any path (``~/.bashrc``,
``../../x``). Every path is made absolute in the session's ``cwd`` and normalised (no ``..``
is left for the file system to follow), then judged (:func:`outside_of`): lexically, and,
where the shell can resolve it (a session on this machine), once more with its symlinks
resolved, so that a link inside that leads out counts as out. A change that touches a path
outside is left alone and named (neither read nor written), as is every older change of
the same file.

A change that does not fit is a *conflict*: left alone and named, with its diff; so is every
older change of the same file (they would apply to a text that is no longer there). A file
Codex could not read is a conflict of each change to it. Only the final text of each file is
written, once, and only where it differs from what is there now.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from ....codex import items as codex_items
from ....codex import types as codex_types
from ....codex.messages import decode_item
from ...views.change_views import path_shown
from ...views.command_kind import command_kind
from ...views.content import fenced
from ...views.diffs import DiffError, parse_hunks, rebuild
from ...views.tool_views import unwrap_shell

#: How many lines of a conflict's diff the answer shows.
DIFF_LINES = 60
#: How much of each prompt taken back the answer quotes.
PROMPT_CHARS = 80


# -- the span -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    """A command a turn taken back ran: what its effects are not undone for."""

    command: str
    cwd: str
    #: The user's own (``/shell``), not the model's.
    user: bool = False


@dataclass(slots=True)
class Span:
    """The turns ``/rewind`` takes back, and what they did."""

    #: The oldest turn taken back: ``thread/revert``'s ``beforeTurnId``.
    before_turn: str
    #: Each prompt's text, oldest first.
    prompts: list[str] = field(default_factory=list)
    #: The file changes that applied, oldest first.
    changes: list[codex_items.FileUpdateChange] = field(default_factory=list)
    #: Those made on another machine than the session's now (its turn said so), with it:
    #: left alone, since its files are not the ones a rewind reaches.
    elsewhere: list[tuple[codex_items.FileUpdateChange, str]] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    #: MCP tool calls, as ``server/tool``.
    tool_calls: list[str] = field(default_factory=list)
    #: The sub-agents the turns spawned (thread ids).
    spawned: list[str] = field(default_factory=list)


def is_prompt(turn: codex_types.Turn) -> bool:
    return any(type(decode_item(raw)) is codex_types.UserMessageItem for raw in turn.items)


def find_span(
    newest_first: list[codex_types.Turn],
    count: int,
    cwd: str,
    elsewhere: Mapping[str, str] | None = None,
) -> Span | None:
    """The span of the ``count`` newest prompts of ``newest_first`` (the thread's newest turns,
    newest first), ``None`` when these turns hold fewer; relative paths are taken in ``cwd``.
    ``elsewhere``: the turns known to have worked on another machine, by id → its name."""
    prompts = 0
    for index, turn in enumerate(newest_first):
        prompts += is_prompt(turn)
        if prompts == count:
            return _span(list(reversed(newest_first[: index + 1])), cwd, elsewhere or {})
    return None


def prompts_in(turns: Iterable[codex_types.Turn]) -> int:
    return sum(1 for turn in turns if is_prompt(turn))


def _span(turns: list[codex_types.Turn], cwd: str, elsewhere: Mapping[str, str]) -> Span:
    span = Span(before_turn=turns[0].id)
    for turn in turns:
        asked = False
        changes = len(span.changes)
        for raw in turn.items:
            item = decode_item(raw)
            if type(item) is codex_types.UserMessageItem:
                if not asked:
                    span.prompts.append(_prompt_text(item))
                asked = True
            else:
                _gather(span, item, cwd)
        machine = elsewhere.get(turn.id)
        if machine is not None:
            span.elsewhere += [(change, machine) for change in span.changes[changes:]]
            del span.changes[changes:]
    return span


def _gather(span: Span, item: object, cwd: str) -> None:
    """What ``item`` did that a rewind does or cannot undo, into ``span``."""
    if isinstance(item, codex_items.FileChangeItem) and item.status == "completed":
        span.changes += [_absolute_change(c, cwd) for c in item.changes]
    elif isinstance(item, codex_items.CommandExecutionItem) and item.status != "declined":
        if command_kind(item.command, item.commandActions) not in ("read", "search"):
            span.commands.append(
                Command(
                    unwrap_shell(item.command), item.cwd or cwd, user=item.source == "userShell"
                )
            )
    elif isinstance(item, codex_items.McpToolCallItem):
        span.tool_calls.append(f"{item.server}/{item.tool}")
    elif isinstance(item, codex_items.CollabAgentToolCallItem) and item.tool == "spawnAgent":
        span.spawned += [t for t in item.receiverThreadIds if t not in span.spawned]


def _prompt_text(item: codex_types.UserMessageItem) -> str:
    texts = [str(part.get("text", "")) for part in item.content if part.get("type") == "text"]
    text = " ".join(" ".join(texts).split())
    if not text:
        return "(no text)"
    return text if len(text) <= PROMPT_CHARS else text[: PROMPT_CHARS - 1] + "…"


def _absolute(path: str, cwd: str) -> str:
    """``path`` absolute in ``cwd`` and normalised (a relative one stays relative without a
    ``cwd``: :func:`inside` takes it for outside)."""
    if not path.startswith("/"):
        if not cwd:
            return path
        path = posixpath.join(cwd, path)
    return posixpath.normpath(path)


def _absolute_change(
    change: codex_items.FileUpdateChange, cwd: str
) -> codex_items.FileUpdateChange:
    move = change.kind.move_path
    return codex_items.FileUpdateChange(
        path=_absolute(change.path, cwd),
        kind=codex_items.PatchChangeKind(
            type=change.kind.type, move_path=_absolute(move, cwd) if move else None
        ),
        diff=change.diff,
    )


def paths_of(changes: Iterable[codex_items.FileUpdateChange]) -> list[str]:
    """Every path the changes touch (a move's both ends), each once, in order."""
    seen: dict[str, None] = {}
    for change in changes:
        seen[change.path] = None
        if change.kind.move_path:
            seen[change.kind.move_path] = None
    return list(seen)


# -- the session's folders ---------------------------------------------------------------------

#: What the answer says of a path outside the session's folders.
OUTSIDE = "outside the session's folders: left as it is"


def inside(path: str, roots: Iterable[str]) -> bool:
    """``path`` lies below one of ``roots`` (absolute folders), as written: both normalised,
    no file system asked. A root itself is not below it; a relative path is below none."""
    if not path.startswith("/"):
        return False
    path = posixpath.normpath(path)
    for root in roots:
        if not root.startswith("/"):
            continue
        root = posixpath.normpath(root).rstrip("/")
        if path.startswith(root + "/"):
            return True
    return False


def outside_of(
    paths: Iterable[str], roots: Sequence[str], real_path: Callable[[str], str] | None = None
) -> dict[str, str]:
    """The ``paths`` a rewind must not touch, each with why (:data:`OUTSIDE`, and where it
    really leads when that is what puts it outside): those not :func:`inside` ``roots`` as
    written, and, with ``real_path`` (the shell's resolution of symlinks, for files on its
    own machine), those whose real path is not inside the roots' real paths."""
    real_roots = [real_path(root) for root in roots] if real_path is not None else []
    found: dict[str, str] = {}
    for path in paths:
        if not inside(path, roots):
            found[path] = OUTSIDE
        elif real_path is not None:
            real = real_path(path)
            if not inside(real, real_roots):
                found[path] = f"outside the session's folders (it leads to {real}): left as it is"
    return found


# -- the undo -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A path Codex could not read (not a file, no permission): its words."""

    reason: str


#: A file as it is now: its text, ``None`` when nothing is there, or why it cannot be read.
FileNow: TypeAlias = str | None | Unreadable


@dataclass(frozen=True, slots=True)
class Undone:
    """A change undone: what became of which file."""

    change: codex_items.FileUpdateChange
    #: ``removed``, ``restored``, ``written back``, ``moved back``.
    how: str


@dataclass(frozen=True, slots=True)
class Conflict:
    """A change left alone, and why."""

    change: codex_items.FileUpdateChange
    why: str


@dataclass(slots=True)
class UndoPlan:
    #: Each file's final text (``None``: remove it), only where it differs from now.
    writes: dict[str, str | None] = field(default_factory=dict)
    #: Newest first, as they were undone.
    undone: list[Undone] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    #: Changes that touch a path outside the session's folders, newest first: left alone.
    outside: list[Conflict] = field(default_factory=list)


class _Left(Exception):
    """The change does not fit the file as it is: why."""


def plan_undo(
    changes: list[codex_items.FileUpdateChange],
    now: Mapping[str, FileNow],
    outside: Mapping[str, str] | None = None,
) -> UndoPlan:
    """Undo ``changes`` (oldest first) over the files as they are ``now`` (every path of
    :func:`paths_of` read but those ``outside``), newest first; see the module docstring.
    ``outside``: the paths not to touch (:func:`outside_of`), with why."""
    plan = UndoPlan()
    outside = outside or {}
    state: dict[str, FileNow] = {p: text for p, text in now.items() if p not in outside}
    left: set[str] = set()  # paths whose older changes no longer apply
    for change in reversed(changes):
        paths = [change.path] + ([change.kind.move_path] if change.kind.move_path else [])
        out = next((outside[p] for p in paths if p in outside), None)
        if out is not None:
            plan.outside.append(Conflict(change, out))
            left.update(paths)
            continue
        if any(p in left for p in paths):
            plan.conflicts.append(Conflict(change, "a later change to it is left alone"))
            left.update(paths)
            continue
        try:
            how = _undo(change, state)
        except _Left as why:
            plan.conflicts.append(Conflict(change, str(why)))
            left.update(paths)
            continue
        plan.undone.append(Undone(change, how))
    for path, text in state.items():
        if text != now.get(path) and not isinstance(text, Unreadable) and path not in outside:
            plan.writes[path] = text
    return plan


def _undo(change: codex_items.FileUpdateChange, state: dict[str, FileNow]) -> str:
    """Undo one change in ``state``; what became of the file, or :class:`_Left`."""
    kind, path = change.kind.type, change.path
    if kind == "add":
        current = _readable(state, path)
        if current is None:
            raise _Left("it is gone since")
        if current != change.diff:
            raise _Left("it changed since")
        state[path] = None
        return "removed"
    if kind == "delete":
        if _readable(state, path) is not None:
            raise _Left("a file is there again")
        state[path] = change.diff
        return "written back"
    if kind != "update":
        raise _Left(f"Codex's change kind {kind!r} is not one the bridge knows")
    moved_to = change.kind.move_path
    where = moved_to or path
    current = _readable(state, where)
    if current is None:
        raise _Left("it is gone since")
    if moved_to and moved_to != path and _readable(state, path) is not None:
        raise _Left(f"a file is at {path} again")
    try:
        hunks = parse_hunks(change.diff)
    except DiffError as exc:
        raise _Left(f"its diff cannot be read ({exc})") from None
    if hunks:
        rebuilt = rebuild(hunks, current)
        if rebuilt is None or rebuilt[1] != current or rebuilt[0] == current:
            raise _Left("it changed since")
        before = rebuilt[0]
    elif moved_to:
        before = current  # a move alone: the text is the same at both ends
    else:
        raise _Left("its diff holds no change to undo")
    if moved_to and moved_to != path:
        state[moved_to] = None
        state[path] = before
        return "moved back"
    state[path] = before
    return "restored"


def _readable(state: Mapping[str, FileNow], path: str) -> str | None:
    current = state.get(path)
    if isinstance(current, Unreadable):
        raise _Left(f"Codex could not read it: {current.reason}")
    return current


# -- the answer -----------------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    """What a rewind did, for its answer."""

    span: Span
    plan: UndoPlan
    cwd: str
    #: The files whose writes Codex refused: path → its words.
    failed: dict[str, str] = field(default_factory=dict)
    #: The machine whose files were read and written (``""``: Codex's own, here).
    machine: str = ""
    #: The sub-agents spawned, by thread id → nickname (``None``: unknown).
    nicknames: Mapping[str, str | None] = field(default_factory=dict)


def answer_text(outcome: Outcome) -> str:
    """The rewind's answer, in Markdown: the prompts taken back, the files returned, the
    conflicts left alone (with their diffs), what cannot be undone, and the reload advice."""
    span, plan, cwd = outcome.span, outcome.plan, outcome.cwd
    count = len(span.prompts)
    lines = [f"**Rewound {count} prompt{'s' if count != 1 else ''}.** Taken back:", ""]
    lines += [f"{i}. “{text}”" for i, text in enumerate(span.prompts, start=1)]
    undone = [u for u in plan.undone if not _touches(u.change, outcome.failed)]
    on = f" (on {outcome.machine})" if outcome.machine else ""
    if undone:
        lines += ["", f"Files returned to what they were{on}:"]
        lines += [f"- `{_shown(u.change, cwd)}`: {_how(u, cwd)}" for u in undone]
    if outcome.failed:
        lines += ["", f"Files Codex could not return{on} (left as they are now):"]
        lines += [f"- `{path_shown(p, cwd)}`: {why}" for p, why in outcome.failed.items()]
    if plan.conflicts:
        lines += ["", f"Left alone{on} (changed since, so not undone):"]
        lines += _left_alone(plan.conflicts, cwd)
    if plan.outside:
        lines += ["", f"Left alone{on} (outside the session's folders, so not touched):"]
        lines += _left_alone(plan.outside, cwd)
    not_undone = _not_undone(outcome)
    if not_undone:
        lines += ["", "Not undone:"]
        lines += not_undone
    if not (span.changes or span.elsewhere or span.commands or span.tool_calls or span.spawned):
        lines += ["", "They changed no files."]
    lines += [
        "",
        "Codex's conversation now ends before “"
        + span.prompts[0]
        + "”: the next prompt continues from there. This view still shows what was taken "
        "back: reload the session to see the conversation as it is now.",
    ]
    return "\n".join(lines)


def _left_alone(conflicts: list[Conflict], cwd: str) -> list[str]:
    lines = []
    for conflict in conflicts:
        lines.append(f"- `{_shown(conflict.change, cwd)}`: {conflict.why}. The change was:")
        lines += ["", _indented(fenced(_diff_shown(conflict.change), "diff")), ""]
    return lines


def _not_undone(outcome: Outcome) -> list[str]:
    span, cwd = outcome.span, outcome.cwd
    lines = []
    for change, machine in reversed(span.elsewhere):
        lines.append(
            f"- `{_shown(change, cwd)}` ({_verb(change)} on the machine {machine}, where this "
            "session no longer works)"
        )
    for command in span.commands:
        who = "your command" if command.user else "the command"
        lines.append(
            f"- {who} `{_one_line(command.command)}`, run in `{command.cwd}`: its effects stay"
        )
    for call in span.tool_calls:
        lines.append(f"- the MCP tool call `{call}`: its effects stay")
    for thread in span.spawned:
        name = outcome.nicknames.get(thread)
        who = f"{name} ({thread})" if name else thread
        lines.append(
            f"- the sub-agent {who}: what it did stays, and it no longer shows in this session's history"
        )
    return lines


def _touches(change: codex_items.FileUpdateChange, failed: Mapping[str, str]) -> bool:
    return change.path in failed or (change.kind.move_path or "") in failed


def _shown(change: codex_items.FileUpdateChange, cwd: str) -> str:
    shown = path_shown(change.path, cwd)
    if change.kind.move_path and change.kind.move_path != change.path:
        return f"{shown} → {path_shown(change.kind.move_path, cwd)}"
    return shown


_VERBS = {"add": "created", "delete": "deleted", "update": "edited"}


def _verb(change: codex_items.FileUpdateChange) -> str:
    if change.kind.move_path and change.kind.move_path != change.path:
        return "moved"
    return _VERBS.get(change.kind.type, change.kind.type)


def _how(undone: Undone, cwd: str) -> str:
    change = undone.change
    if undone.how == "removed":
        return "removed (the prompt created it)"
    if undone.how == "written back":
        return "written back (the prompt deleted it)"
    if undone.how == "moved back":
        return f"moved back to `{path_shown(change.path, cwd)}`"
    return "its edit undone"


def _diff_shown(change: codex_items.FileUpdateChange) -> str:
    if change.kind.type == "add":
        text = "".join("+" + line + "\n" for line in change.diff.splitlines())
    elif change.kind.type == "delete":
        text = "".join("-" + line + "\n" for line in change.diff.splitlines())
    else:
        text = change.diff
    lines = text.splitlines()
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"… {len(lines) - DIFF_LINES} more lines"]
    return "\n".join(lines)


def _indented(block: str) -> str:
    return "\n".join("  " + line if line else line for line in block.split("\n"))


def _one_line(command: str) -> str:
    text = " ".join(command.split())
    text = text.replace("`", "'")
    return text if len(text) <= 120 else text[:119] + "…"
