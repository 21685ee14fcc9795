"""A prompt's script: its ``@@`` lines parsed into steps of directives, and their arguments."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_PREFIX = "@@"
#: The most words a directive streams: a bigger count is surely a typo, and would eat memory.
MAX_COUNT = 1_000_000


@dataclass(frozen=True, slots=True)
class Directive:
    """One ``@@ NAME ARGS`` line: ``name`` lower-cased, ``args`` the rest of the line, stripped."""

    name: str
    args: str

    def __str__(self) -> str:
        return f"{_PREFIX} {self.name} {self.args}".rstrip()


@dataclass(frozen=True, slots=True)
class Script:
    """The steps of a script; step ``k`` answers the ``k``-th model request of a user turn."""

    steps: tuple[tuple[Directive, ...], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.steps)


def _is_directive_line(line: str) -> bool:
    rest = line[len(_PREFIX) :]
    return line.startswith(_PREFIX) and (not rest or rest[0].isspace())


def parse_directives(text: str) -> Script:
    """Parse the directive block at the start of ``text``; never raises.

    The block is the run of lines starting with ``@@`` and a space at the very start of the text
    (blank lines inside it are skipped); it ends at the first other line, and what follows is prose
    the model ignores. A text that does not start with ``@@`` has no script. Unknown names are kept:
    running one replies with an error message, so a typo shows in the output of its test.
    """
    if not _is_directive_line(text):
        return Script()
    steps: list[tuple[Directive, ...]] = []
    current: list[Directive] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if not _is_directive_line(line):
            break
        name, _, args = line[len(_PREFIX) :].strip().partition(" ")
        if name.lower() == "then":
            steps.append(tuple(current))
            current = []
        else:
            current.append(Directive(name.lower(), args.strip()))
    steps.append(tuple(current))
    return Script(tuple(steps))


class DirectiveError(ValueError):
    """A directive cannot run; the reply becomes this message, so the test output shows it."""


@dataclass(frozen=True, slots=True)
class Args:
    """A directive's arguments: ``rest`` is the raw text, split into plain words and ``key=value``s.

    ``outputs``: the request's tool results that are JSON objects, newest first (``{{field}}``).
    """

    rest: str
    positional: tuple[str, ...]
    options: Mapping[str, str]
    outputs: Sequence[Mapping[str, Any]] = ()

    @classmethod
    def parse(cls, rest: str, outputs: Sequence[Mapping[str, Any]] = ()) -> Args:
        positional: list[str] = []
        options: dict[str, str] = {}
        for word in rest.split():
            key, eq, value = word.partition("=")
            if eq and key.isidentifier():
                options[key] = value
            else:
                positional.append(word)
        return cls(rest, tuple(positional), options, outputs)

    def expect(self, *, positional: int, options: Iterable[str] = ()) -> None:
        """Fail unless there are ``positional`` plain words and no option outside ``options``."""
        unknown = sorted(set(self.options) - set(options))
        if unknown:
            raise DirectiveError(f"unknown option {unknown[0]}=")
        if len(self.positional) != positional:
            raise DirectiveError(f"expected {positional} argument(s), got {len(self.positional)}")

    def count(self, index: int) -> int:
        count = non_negative_int(self.positional[index], "count")
        if count > MAX_COUNT:
            raise DirectiveError(f"count {count} is over {MAX_COUNT}")
        return count

    def delay(self) -> float:
        """The ``delay_ms=D`` option in seconds (0 when absent)."""
        text = self.options.get("delay_ms")
        return 0.0 if text is None else non_negative_int(text, "delay_ms") / 1000


def non_negative_int(text: str, what: str) -> int:
    if not text.isdigit():
        raise DirectiveError(f"{what} must be a non-negative integer, got {text!r}")
    return int(text)
