"""Unified-diff hunks: read them, and rebuild a file's old and new text from them.

Codex describes an updated file by hunks only (``@@ -10,3 +10,3 @@`` and a line
of context), while an ACP ``diff`` wants a file's whole old and new text. The
hunks alone give each hunk's two sides (:func:`Hunk.old_text`,
:func:`Hunk.new_text`); with the file's text from somewhere else the whole file
can be rebuilt (:func:`rebuild`). That text may be the file before the patch or
after it (the patch may already be on disk when it is read), so :func:`rebuild`
checks which one it is: each hunk's old side must stand at its place in the text,
or each new side must (and, when the context shows that the last hunk runs to
the end of the file, the text must end there too); if neither (or both) fits,
the text is not trusted and ``None`` says so. A wrong guess would show the user a
change that never happened; no answer shows the hunks.

Lines keep their ``\\n``; only ``\\n`` separates lines (a ``\\r`` stays part of
its line, as it does in the diff), and ``\\ No newline at end of file`` drops the
``\\n`` of the line before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["DiffError", "Hunk", "parse_hunks", "rebuild", "split_lines"]

_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\"


class DiffError(ValueError):
    """The text is not the unified-diff hunks it should be."""


@dataclass
class Hunk:
    """One ``@@ -old_start,old_count +new_start,new_count @@`` hunk and its lines."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    old_lines: list[str] = field(default_factory=list)
    new_lines: list[str] = field(default_factory=list)
    #: Context lines before the first change and after the last one.
    leading: int = 0
    trailing: int = 0

    @property
    def old_text(self) -> str:
        return "".join(self.old_lines)

    @property
    def new_text(self) -> str:
        return "".join(self.new_lines)

    def _index(self, new_side: bool) -> int:
        # A side with lines starts at its 1-based line; an empty side's number is the
        # line it comes *after* (0: the start of the file).
        if new_side:
            return self.new_start - 1 if self.new_count else self.new_start
        return self.old_start - 1 if self.old_count else self.old_start


def split_lines(text: str) -> list[str]:
    """``text`` as lines that keep their ``\\n`` (the last may have none)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def parse_hunks(diff: str) -> list[Hunk]:
    """The hunks of ``diff``, in order; text before the first hunk or after the last
    (file headers, Codex's ``Moved to: ...`` note) is ignored.

    Raises :class:`DiffError` when a hunk's lines do not add up to its header.
    """
    hunks: list[Hunk] = []
    lines = diff.split("\n")
    i = 0
    while i < len(lines):
        header = _HEADER.match(lines[i])
        i += 1
        if header is None:
            if hunks:
                break  # the hunks are over: what follows is not part of them
            continue
        old_start, old_count, new_start, new_count = (
            int(header.group(1)),
            int(header.group(2) or "1"),
            int(header.group(3)),
            int(header.group(4) or "1"),
        )
        hunk = Hunk(old_start, old_count, new_start, new_count)
        sides: tuple[list[str], ...] = ()
        changed = False
        while len(hunk.old_lines) < old_count or len(hunk.new_lines) < new_count:
            if i >= len(lines) or _HEADER.match(lines[i]):
                raise DiffError(
                    f"hunk @@ -{old_start},{old_count} +{new_start},{new_count} @@ ends after "
                    f"{len(hunk.old_lines)} old and {len(hunk.new_lines)} new lines"
                )
            line = lines[i]
            i += 1
            marker, text = (line[:1] or " "), line[1:] + "\n"
            if marker == " ":
                sides = (hunk.old_lines, hunk.new_lines)
                if changed:
                    hunk.trailing += 1
                else:
                    hunk.leading += 1
            elif marker in "-+":
                sides = (hunk.old_lines,) if marker == "-" else (hunk.new_lines,)
                changed, hunk.trailing = True, 0
            elif marker == _NO_NEWLINE:
                _drop_newline(sides)
                continue
            else:
                raise DiffError(f"unexpected line in a hunk: {line!r}")
            for side in sides:
                side.append(text)
        if len(hunk.old_lines) != old_count or len(hunk.new_lines) != new_count:
            raise DiffError(
                f"hunk @@ -{old_start},{old_count} +{new_start},{new_count} @@ overruns"
            )
        if i < len(lines) and lines[i].startswith(_NO_NEWLINE):
            _drop_newline(sides)
            i += 1
        hunks.append(hunk)
    return hunks


def _drop_newline(sides: tuple[list[str], ...]) -> None:
    for side in sides:
        if side:
            side[-1] = side[-1].removesuffix("\n")


def _reaches_end(hunks: list[Hunk]) -> bool:
    """Whether the last hunk runs to the end of the file, on both sides.

    A diff shows up to R lines of context around each change (Codex: R = 1, git: 3), fewer
    only where the file starts or ends. Context that reaches the top or the end is no
    evidence of R; any other is R exactly (the leading context of a hunk that starts below
    line 1, the trailing context of a hunk that is not the last). So when the last hunk
    has fewer trailing context lines than some other run of context, the file ends there.
    """
    runs = [h.leading for h in hunks] + [h.trailing for h in hunks[:-1]]
    return hunks[-1].trailing < max(runs, default=0)


def _apply(
    lines: list[str], hunks: list[Hunk], *, backwards: bool, to_end: bool
) -> list[str] | None:
    """Replace each hunk's one side by the other at its place; ``None`` if a side is not
    there (or, with ``to_end``, if the text goes on after the last hunk)."""
    out: list[str] = []
    pos = 0
    for hunk in hunks:
        start = hunk._index(new_side=backwards)
        find, put = hunk.old_lines, hunk.new_lines
        if backwards:
            find, put = put, find
        if start < pos or lines[start : start + len(find)] != find:
            return None
        out += lines[pos:start]
        out += put
        pos = start + len(find)
    if to_end and pos != len(lines):
        return None
    out += lines[pos:]
    return out


def rebuild(hunks: list[Hunk], text: str) -> tuple[str, str] | None:
    """``(old, new)``: the whole file before and after ``hunks``, given its ``text`` as
    it was either before or after them; ``None`` when ``text`` is neither for sure."""
    if not hunks:
        return None
    lines = split_lines(text)
    to_end = _reaches_end(hunks)
    forward = _apply(lines, hunks, backwards=False, to_end=to_end)
    backward = _apply(lines, hunks, backwards=True, to_end=to_end)
    if forward is not None and backward is None:
        return text, "".join(forward)
    if backward is not None and forward is None:
        return "".join(backward), text
    return None
