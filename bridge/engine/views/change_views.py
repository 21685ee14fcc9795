"""What a changed file looks like in a tool call: its diffs (whole texts when the client
read the file, else Codex's hunks, or AIR's Git patch), where it is, and its title."""

from __future__ import annotations

import logging

from msgspec import UNSET

from ...acp import air
from ...acp import tools as acp_tools
from ...codex import items as codex_items
from .content import fenced, text_content

log = logging.getLogger(__name__)


def change_content(
    change: codex_items.FileUpdateChange, text: str | None
) -> list[acp_tools.ToolCallContent]:
    """The ``diff`` items for one changed file; ``text`` is the file as the client read it."""
    # Here and below, not at the top: the engine's start shows no changed file, so need not
    # import the diff parser and the patch writer (1 ms with the Hunk dataclass and regexes).
    from . import diffs

    kind = change.kind.type
    if kind == "add":
        return [acp_tools.Diff(path=change.path, oldText=None, newText=change.diff)]
    if kind == "delete":
        return [acp_tools.DeletedFile(path=change.path, oldText=change.diff, newText="")]
    target = change.kind.move_path or change.path
    try:
        hunks = diffs.parse_hunks(change.diff)
    except diffs.DiffError as exc:
        log.warning("Codex's diff for %s is not understood (%s); shown as text", change.path, exc)
        return [text_content(fenced(change.diff, "diff"))]
    if text is not None:
        whole = diffs.rebuild(hunks, text)
        if whole is not None:
            return [acp_tools.Diff(path=target, oldText=whole[0], newText=whole[1])]
        log.info("the text read for %s fits neither side of Codex's diff; showing hunks", target)
    return [
        acp_tools.Diff(
            path=target,
            oldText=hunk.old_text,
            newText=hunk.new_text,
            meta={
                "hunk": {
                    "oldStart": hunk.old_start,
                    "oldLines": hunk.old_count,
                    "newStart": hunk.new_start,
                    "newLines": hunk.new_count,
                }
            },
        )
        for hunk in hunks
    ]


def patch_content(change: codex_items.FileUpdateChange) -> list[acp_tools.ToolCallContent] | None:
    """AIR's ``diffPatch``: one ``diff`` per file carrying its Git patch (``oldText: null``
    and ``newText: ""`` hold the places of the text), or ``None`` when no patch fits."""
    from . import git_patch

    text = git_patch.git_patch(change)
    if text is None:
        return None
    payload = {"diffPatch": {"version": 1, "format": "git_patch", "text": text}}
    return [
        acp_tools.Diff(
            path=change.kind.move_path or change.path,
            oldText=None,
            newText="",
            meta={"kind": change.kind.type, **air.meta(payload)},
        )
    ]


def with_kind(
    content: list[acp_tools.ToolCallContent], kind: str
) -> list[acp_tools.ToolCallContent]:
    """The plain diffs of a file no patch fits, for a ``diffPatch`` client: each says the
    change's ``_meta.kind`` as its patches do."""
    for block in content:
        if isinstance(block, acp_tools.Diff):
            block.meta = {"kind": kind, **(block.meta or {})}
    return content


def change_locations(change: codex_items.FileUpdateChange) -> list[acp_tools.ToolCallLocation]:
    from . import diffs

    if change.kind.type == "update":
        try:
            hunks = diffs.parse_hunks(change.diff)
        except diffs.DiffError:
            hunks = []
        line = max(hunks[0].new_start, 1) if hunks else UNSET
        return [acp_tools.ToolCallLocation(path=change.kind.move_path or change.path, line=line)]
    if change.kind.type == "add":
        return [acp_tools.ToolCallLocation(path=change.path, line=1)]
    return [acp_tools.ToolCallLocation(path=change.path)]


_VERBS = {"add": "Create", "delete": "Delete", "update": "Edit"}


def change_title(changes: list[codex_items.FileUpdateChange], cwd: str) -> str:
    if len(changes) == 1:
        change = changes[0]
        if change.kind.type == "update" and change.kind.move_path:
            return f"Move {path_shown(change.path, cwd)} → {path_shown(change.kind.move_path, cwd)}"
        return f"{_VERBS.get(change.kind.type, 'Edit')} {path_shown(change.path, cwd)}"
    names = [path_shown(c.kind.move_path or c.path, cwd) for c in changes]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"Edit {len(changes)} files: {shown}" if changes else "Edit files"


def path_shown(path: str, cwd: str) -> str:
    """``path`` relative to the session's folder when inside it."""
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path
