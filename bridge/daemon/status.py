"""``codex-acp-bridge status``: what every agent of the daemon's Codex is doing.

Reads the runtime directory (``daemon.json``, ``status.json``) and shows a tree of
threads, sub-agents under their parents, each with its state, title, cwd and
age::

    daemon 4242 · Codex codex-cli 0.169.0 on ws://127.0.0.1:41003 · running
    ● running           Fix the flaky test  ~/src/app  2m
      ◆ needs approval  Ada (explorer)      ~/src/app  1m
    ○ idle              untitled            ~/src/doc  3h

With machines (``daemon --machine``), a line under the header says each one's kind, place
and link (``machines: box (ssh me@devbox) connected``), and a thread working on one shows the
machine before its folder there (``box:/home/me/src``).

What waits on a person comes first, then what runs, then idle threads, most recent
first; a tree goes where its most urgent thread puts it, so a waiting sub-agent brings
its parent along. Given a terminal's size, the tree fits it: the header, every waiting
and running thread (with the parents that place them), then as many recent idle threads
as the height leaves room for, and one line counting the rest (``status --all`` shows
them). ``--json`` prints ``{"daemon": {...}, "threads": [...]}`` instead, every thread.

Pure: the threads, the size and the time come in, the text goes out.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from ..machines import kind_and_where

_MARKS = {"running": "●", "requires_action": "◆", "idle": "○", "unknown": "?"}

#: What waits on a person, then what runs, then the rest (idle, or unknown while Codex is lost).
_URGENCY = {"requires_action": 0, "running": 1}
_CALM = 2

#: A title longer than this is cut (the cwd and age stay in view).
TITLE_WIDTH = 48
#: The narrowest a title, and a folder, are squeezed to on a narrow terminal.
MIN_TITLE_WIDTH = 12
MIN_CWD_WIDTH = 16


class Size(NamedTuple):
    """A terminal's size, as :func:`shutil.get_terminal_size` gives it."""

    columns: int
    lines: int


def snapshot(info: Any, threads: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What ``status --json`` prints."""
    return {"daemon": msgspec.to_builtins(info), "threads": list(threads)}


def render(
    info: Any, threads: Sequence[dict[str, Any]], *, now: float, size: Size | None = None
) -> str:
    """The tree, readable at a glance: every thread, or with ``size`` what fits it.

    The text fits in ``size.lines - 1`` lines, so that the shell's prompt (or the
    cursor of ``--watch``) does not push the header off the top, except when the
    waiting and running threads alone need more: those are always shown.
    """
    head = _header(info)
    machines = getattr(info, "machines", None) or []
    if machines:
        head += "\n" + _machines(machines)
    if not threads:
        return f"{head}\n  no threads\n"
    paths = {m.name: m.path for m in machines}
    placed = _order(threads)
    shown = {id(thread) for thread, _depth in placed}
    if size is not None:
        shown = _fitting(placed, max(size.lines - 2 - head.count("\n"), 1))
    rows = [
        ("  " * depth + _state(thread), _title(thread), _where(thread, paths))
        for thread, depth in placed
        if id(thread) in shown
    ]
    ages = [_age(thread.get("updatedAt"), now) for thread, _ in placed if id(thread) in shown]
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(3)]
    if size is not None:
        # A line longer than the terminal wraps and takes two: squeeze the folders (their
        # ends tell them apart), then the titles.
        overflow = sum(widths) + 6 + max(map(len, ages), default=0) - size.columns
        for column, least in ((2, MIN_CWD_WIDTH), (1, MIN_TITLE_WIDTH)):
            squeezed = max(min(widths[column], least), widths[column] - max(overflow, 0))
            overflow -= widths[column] - squeezed
            widths[column] = squeezed
    lines = [head]
    for (state, title, cwd), age in zip(rows, ages, strict=True):
        cells = (
            state.ljust(widths[0]),
            _cut(title, widths[1]).ljust(widths[1]),
            _cut_left(cwd, widths[2]).ljust(widths[2]),
        )
        lines.append("  ".join(cells) + "  " + age)
    hidden = [thread for thread, _ in placed if id(thread) not in shown]
    if hidden:
        lines.append(_rest(hidden))
    if size is not None:
        lines = [_cut(line.rstrip(), max(size.columns, 1)) for line in lines]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _header(info: Any) -> str:
    codex = f"Codex {info.codexVersion}" if info.codexVersion else "Codex"
    where = f" on {info.url}" if info.url else ""
    head = f"daemon {info.pid} · {codex}{where} · {info.state}"
    return head + (f" ({info.reason})" if info.reason else "")


def _machines(machines: Sequence[Any]) -> str:
    """``machines: box (podman container devbox) connected · gpu (ssh me@gpu) down (no route
    to host)``: each one's name, kind and place, and its link."""
    parts = []
    for machine in machines:
        state = machine.state or "idle"
        reason = f" ({machine.reason})" if state == "down" and machine.reason else ""
        place = kind_and_where(machine.kind, machine.where)
        named = f"{machine.name} ({place})" if place else machine.name
        parts.append(f"{named} {state}{reason}")
    return "machines: " + " · ".join(parts)


def _where(thread: dict[str, Any], paths: dict[str, str]) -> str:
    """Its folder, on its machine: ``~/src/app`` here, ``box:/home/me/src`` there."""
    machine = thread.get("machine")
    if not machine or machine == "local":
        folders = thread.get("folders") or []
        more = f" (+{len(folders)} folder{'s' if len(folders) > 1 else ''})" if folders else ""
        return _short_path(_cwd(thread)) + more
    return f"{machine}:{paths.get(str(machine)) or _cwd(thread)}"


def _order(threads: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Every thread with its depth, parents before their children; siblings by the most
    urgent state of their subtree, then its most recent activity."""
    known = {t.get("threadId") for t in threads}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for thread in threads:
        parent = thread.get("parentThreadId")
        children.setdefault(parent if parent in known else None, []).append(thread)

    keys: dict[int, tuple[int, float]] = {}

    def key(thread: dict[str, Any], path: frozenset[str]) -> tuple[int, float]:
        """(urgency, -latest activity) of the subtree; ``path`` stops a cycle of parents."""
        found = keys.get(id(thread))
        if found is None:
            thread_id = str(thread.get("threadId"))
            urgency = _URGENCY.get(str(thread.get("state")), _CALM)
            latest = _time(thread.get("updatedAt"))
            if thread_id not in path:
                for child in children.get(thread_id, []):
                    child_urgency, child_latest = key(child, path | {thread_id})
                    urgency, latest = min(urgency, child_urgency), max(latest, -child_latest)
            found = keys[id(thread)] = (urgency, -latest)
        return found

    out: list[tuple[dict[str, Any], int]] = []
    seen: set[str] = set()

    def walk(parent: str | None, depth: int) -> None:
        for thread in sorted(children.get(parent, []), key=lambda t: key(t, frozenset())):
            thread_id = str(thread.get("threadId"))
            if thread_id in seen:
                continue
            seen.add(thread_id)
            out.append((thread, depth))
            walk(thread_id, depth + 1)

    walk(None, 0)
    # Parents naming each other in a loop reach no root: each such thread leads its own tree.
    for thread in threads:
        if str(thread.get("threadId")) not in seen:
            seen.add(str(thread.get("threadId")))
            out.append((thread, 0))
            walk(str(thread.get("threadId")), 1)
    return out


def _fitting(placed: list[tuple[dict[str, Any], int]], room: int) -> set[int]:
    """Which threads to show in ``room`` lines (the header apart): every waiting and running
    one, then the most recent others, each with the parents that place it in the tree; a
    line counting the rest when some are left out."""
    parents: dict[int, int | None] = {}
    chain: list[int] = []
    for thread, depth in placed:
        del chain[depth:]
        parents[id(thread)] = chain[-1] if chain else None
        chain.append(id(thread))
    if len(placed) <= room:
        return set(parents)

    shown: set[int] = set()

    def with_parents(key: int | None) -> list[int]:
        added: list[int] = []
        while key is not None and key not in shown:
            added.append(key)
            key = parents[key]
        return added

    for thread, _depth in placed:
        if str(thread.get("state")) in _URGENCY:
            shown.update(with_parents(id(thread)))
    calm = [thread for thread, _ in placed if id(thread) not in shown]
    calm.sort(key=lambda t: -_time(t.get("updatedAt")))  # stable: ties keep the tree's order
    for thread in calm:
        added = with_parents(id(thread))
        # One line stays for the count of the rest.
        if len(shown) + len(added) > room - 1:
            break
        shown.update(added)
    return shown


def _rest(hidden: Iterable[dict[str, Any]]) -> str:
    states = [str(thread.get("state")) for thread in hidden]
    what = "idle thread" if set(states) == {"idle"} else "more thread"
    plural = "s" if len(states) != 1 else ""
    return f"… and {len(states)} {what}{plural}; status --all lists them"


def _state(thread: dict[str, Any]) -> str:
    state = str(thread.get("state") or "unknown")
    mark = _MARKS.get(state, "?")
    if state == "requires_action":
        waits = thread.get("waitingOn") or []
        return f"{mark} needs {' and '.join(waits) or 'you'}"
    if state == "idle" and thread.get("error"):
        return f"{mark} idle · failed"
    return f"{mark} {state}"


def _title(thread: dict[str, Any]) -> str:
    """The thread's title, a sub-agent's nickname before it; ``untitled`` for a thread not
    yet prompted (its row's folder and age tell it from the others, not its raw id)."""
    title = str(thread.get("title") or "")
    nickname = thread.get("nickname")
    if nickname:
        title = f"{nickname}: {title}" if title else str(nickname)
    return _cut(title or "untitled", TITLE_WIDTH)


def _cwd(thread: dict[str, Any]) -> str:
    return str(thread.get("cwd") or "")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _cut_left(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[len(text) - max(width - 1, 0) :]


def _short_path(path: str) -> str:
    home = os.path.expanduser("~")
    if home and home != "/" and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home) :]
    return path


def _time(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _age(updated: Any, now: float) -> str:
    if not isinstance(updated, int | float):
        return ""
    seconds = max(0, int(now - updated))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def show(
    directory: Path,
    *,
    as_json: bool,
    watch: bool,
    show_all: bool,
    show_url: bool,
    open_page: bool,
    notify: bool,
) -> int:
    """What ``status`` shows, with its options (see its help), on the daemon of
    ``directory``; its exit status (1: no daemon, no page, no browser). A directory that is
    not a private one of this user's raises :class:`RuntimeDirError`."""
    import json
    import shutil
    import time

    from .runtime import (
        RuntimeDirError,
        page_address,
        read_status,
        running_daemon,
        write_page_opener,
    )

    open_page = open_page or (notify and not show_url)
    if show_url or open_page:
        info = running_daemon(directory)
        if info is None:
            _say(f"codex-acp-bridge status: no daemon runs on {directory}")
            return 1
        address = page_address(directory, info, notify=notify)
        if address is None:
            _say("codex-acp-bridge status: the daemon serves no page (--no-page)")
            return 1
        if show_url:
            print(address)
        if open_page:
            import webbrowser

            # Not the address itself: a browser's command line is readable by every local user.
            try:
                opener = write_page_opener(directory, address).absolute().as_uri()
            except (RuntimeDirError, OSError) as exc:
                _say(f"codex-acp-bridge status: cannot open the page: {exc}")
                return 1
            if not webbrowser.open(opener):
                _say(f"codex-acp-bridge status: no browser to open; open {opener} in yours")
                return 1
        return 0
    # Piped, plain `status` prints everything (a script reads it all); --watch redraws a
    # screen, so it fits one (the terminal's, else $COLUMNS/$LINES, else 80x24).
    fit = not show_all and (watch or sys.stdout.isatty())
    shown = ""
    try:
        while True:
            info = running_daemon(directory)
            if info is None:
                _say(f"codex-acp-bridge status: no daemon runs on {directory}")
                return 1
            threads = read_status(directory)
            if as_json:
                text = json.dumps(snapshot(info, threads), indent=2) + "\n"
            else:
                size = Size(*shutil.get_terminal_size()) if fit else None
                text = render(info, threads, now=time.time(), size=size)
            if not watch:
                sys.stdout.write(text)
                return 0
            if text != shown:
                clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else ""
                sys.stdout.write(clear + text)
                sys.stdout.flush()
                shown = text
            time.sleep(0.25)
    except KeyboardInterrupt:
        return 0


def _say(line: str) -> None:
    print(line, file=sys.stderr)
