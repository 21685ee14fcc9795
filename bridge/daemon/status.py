"""``codex-acp-bridge status``: what every agent of the daemon's Codex is doing.

Reads the runtime directory (``daemon.json``, ``status.json``) and shows a tree of
threads, sub-agents under their parents, each with its state, title, cwd and
age::

    daemon 4242 · Codex codex-cli 0.169.0 on ws://127.0.0.1:41003 · running
    ● running          Fix the flaky test          ~/src/app   2m
      ◆ needs approval  Ada (explorer)              ~/src/app   1m
    ○ idle · end_turn  Write the README            ~/src/doc   3h

``--json`` prints ``{"daemon": {...}, "threads": [...]}`` instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import msgspec

_MARKS = {"running": "●", "requires_action": "◆", "idle": "○", "unknown": "?"}


def snapshot(info: Any, threads: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What ``status --json`` prints."""
    return {"daemon": msgspec.to_builtins(info), "threads": list(threads)}


def render(info: Any, threads: Sequence[dict[str, Any]], *, now: float | None = None) -> str:
    """The tree, readable at a glance."""
    now = time.time() if now is None else now
    codex = f"Codex {info.codexVersion}" if info.codexVersion else "Codex"
    where = f" on {info.url}" if info.url else ""
    head = f"daemon {info.pid} · {codex}{where} · {info.state}"
    if info.reason:
        head += f" ({info.reason})"
    lines = [head]
    if not threads:
        lines.append("  no threads")
        return "\n".join(lines) + "\n"
    by_parent: dict[str | None, list[dict[str, Any]]] = {}
    known = {t.get("threadId") for t in threads}
    for thread in threads:
        parent = thread.get("parentThreadId")
        by_parent.setdefault(parent if parent in known else None, []).append(thread)
    for siblings in by_parent.values():
        siblings.sort(key=lambda t: -(t.get("updatedAt") or 0))
    rows: list[tuple[str, str, str, str]] = []

    def walk(parent: str | None, depth: int, seen: set[str]) -> None:
        for thread in by_parent.get(parent, []):
            thread_id = str(thread.get("threadId"))
            if thread_id in seen:
                continue
            seen.add(thread_id)
            rows.append(
                (
                    "  " * depth + _state(thread),
                    _title(thread),
                    _short_path(str(thread.get("cwd") or "")),
                    _age(thread.get("updatedAt"), now),
                )
            )
            walk(thread_id, depth + 1, seen)

    walk(None, 0, set())
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        lines.append(
            "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
            + "  "
            + row[3]
        )
    return "\n".join(line.rstrip() for line in lines) + "\n"


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
    title = str(thread.get("title") or "")
    nickname = thread.get("nickname")
    if nickname:
        title = f"{nickname}: {title}" if title else str(nickname)
    title = title or str(thread.get("threadId"))
    return title if len(title) <= 48 else title[:47] + "…"


def _short_path(path: str) -> str:
    home = os.path.expanduser("~")
    if home and home != "/" and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home) :]
    return path


def _age(updated: Any, now: float) -> str:
    if not isinstance(updated, int | float):
        return ""
    seconds = max(0, int(now - updated))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
