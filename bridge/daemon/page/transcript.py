"""A thread's transcript tail, as the daemon's page shows it (pure).

What an item of Codex's (``item/started``, ``item/completed``, and the deltas between)
looks like in the tail: a user's message, an answer, a command with its output, a file
change's paths, a sub-agent call; the rest is left out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

#: Items of a thread's transcript tail kept, and the characters kept of each (its end).
TAIL_ENTRIES = 30
TAIL_CHARS = 2000
#: The last line a thread said, as shown in the tree.
LAST_LINE_CHARS = 160
#: A file change's diff shown in the inbox.
DIFF_CHARS = 20_000


@dataclass
class Entry:
    """One item of a transcript tail."""

    id: str
    kind: str
    text: str = ""
    status: str = ""

    def wire(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "text": self.text, "status": self.status}


def find(tail: deque[Entry], item_id: str) -> Entry | None:
    for entry in reversed(tail):
        if entry.id == item_id:
            return entry
    return None


def append(tail: deque[Entry], entry: Entry) -> Entry:
    tail.append(entry)
    return entry


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][-LAST_LINE_CHARS:] if lines else ""


def changes(value: Any) -> list[dict[str, Any]]:
    out = []
    for change in value if isinstance(value, list) else []:
        if isinstance(change, dict):
            kind = change.get("kind")
            out.append(
                {
                    "path": str(change.get("path") or ""),
                    "kind": kind.get("type") if isinstance(kind, dict) else str(kind or ""),
                    "diff": str(change.get("diff") or "")[:DIFF_CHARS],
                }
            )
    return out


def item_text(kind: str, item: dict[str, Any]) -> str | None:
    """An item's text in the tail; ``None`` for an item the tail does not show."""
    if kind == "agentMessage":
        return str(item.get("text") or "")
    if kind == "userMessage":
        parts = item.get("content") or []
        return " ".join(
            str(p.get("text") or "")
            for p in parts
            if isinstance(p, dict) and p.get("type") == "text"
        )
    if kind == "commandExecution":
        output = item.get("aggregatedOutput")
        return f"$ {item.get('command') or ''}\n" + (output if isinstance(output, str) else "")
    if kind == "fileChange":
        return "\n".join(f"{c['kind']} {c['path']}" for c in changes(item.get("changes")))
    if kind == "collabAgentToolCall":
        return f"{item.get('tool') or 'agent'}: {item.get('prompt') or ''}".strip()
    return None
