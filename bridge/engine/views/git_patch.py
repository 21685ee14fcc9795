"""One Git patch for one changed file, as AIR's ``diffPatch`` extension carries it (pure).

Codex gives an update as unified-diff hunks, an added file's whole text and a deleted
file's whole text. The patch puts Git's own headers before them: ``diff --git``, the
paths absolute without their leading ``/`` behind ``a/`` and ``b/``, ``new file mode`` /
``deleted file mode`` with ``/dev/null`` on the missing side, ``rename from`` / ``rename
to`` for a moved file; a ``---`` / ``+++`` line ends with a tab when its path holds a
space. The bytes Codex gave are kept (a ``\\r`` too); a file without a final newline ends
with ``\\ No newline at end of file``.

``None`` when no patch can say it, so the plain ACP diff is sent instead: an empty
added or deleted file (no hunk can express it), binary text (a NUL in its first 8000
characters), a rename without a hunk, hunks that do not add up, a path Git would
quote (a double quote, a backslash, a control character), or a patch over 1 MiB.
"""

from __future__ import annotations

import re

from ...codex import items as codex_items
from . import diffs

MAX_BYTES = 1 << 20

_QUOTED = re.compile(r'["\\\x00-\x1f\x7f]')
_HUNK_LINE = re.compile(r"[ +\-\\]|@@ ")
_NO_NEWLINE = "\\ No newline at end of file\n"


def _header_path(path: str) -> str | None:
    if _QUOTED.search(path):
        return None
    return path.lstrip("/")


def _file_line(marker: str, side: str, path: str | None) -> str:
    if path is None:
        return f"{marker} /dev/null\n"
    return f"{marker} {side}/{path}{chr(9) if ' ' in path else ''}\n"


def _whole(text: str, sign: str) -> str | None:
    """An added (``+``) or deleted (``-``) file's text as one hunk."""
    if not text or "\x00" in text[:8000]:
        return None
    lines = text.split("\n")
    ends_with_newline = lines[-1] == ""
    if ends_with_newline:
        lines.pop()
    count = len(lines)
    header = f"@@ -0,0 +1,{count} @@\n" if sign == "+" else f"@@ -1,{count} +0,0 @@\n"
    body = "".join(f"{sign}{line}\n" for line in lines)
    return header + body + ("" if ends_with_newline else _NO_NEWLINE)


def _hunks(diff: str) -> str | None:
    """The hunk lines of Codex's update diff (its own file headers and notes left out)."""
    if "\x00" in diff[:8000]:
        return None
    try:
        if not diffs.parse_hunks(diff):
            return None
    except diffs.DiffError:
        return None
    lines = diff.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("@@ "))
    kept: list[str] = []
    for line in lines[start:]:
        if not _HUNK_LINE.match(line):
            break
        kept.append(line + "\n")
    return "".join(kept)


def git_patch(change: codex_items.FileUpdateChange) -> str | None:
    """The patch of one file Codex changed, or ``None`` (see the module docstring)."""
    kind = change.kind.type
    old = _header_path(change.path)
    if old is None:
        return None
    if kind == "add":
        body = _whole(change.diff, "+")
        head = f"diff --git a/{old} b/{old}\nnew file mode 100644\n"
        files = _file_line("---", "a", None) + _file_line("+++", "b", old)
    elif kind == "delete":
        body = _whole(change.diff, "-")
        head = f"diff --git a/{old} b/{old}\ndeleted file mode 100644\n"
        files = _file_line("---", "a", old) + _file_line("+++", "b", None)
    elif kind == "update":
        new = _header_path(change.kind.move_path) if change.kind.move_path else old
        if new is None:
            return None
        body = _hunks(change.diff)
        head = f"diff --git a/{old} b/{new}\n"
        if new != old:
            head += f"rename from {old}\nrename to {new}\n"
        files = _file_line("---", "a", old) + _file_line("+++", "b", new)
    else:
        return None
    if body is None:
        return None
    patch = head + files + body
    return patch if len(patch.encode()) <= MAX_BYTES else None
