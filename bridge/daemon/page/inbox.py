"""What waits on a person, and the answers a page may give it (pure).

Codex asks the daemon's watcher connection what it asks every client subscribed to a
thread: approve a command, approve a file change, answer a question. Each waits here, with
what it asks, until Codex says it was answered (``serverRequest/resolved``: by the page,
or by an editor first). An answer from a page is checked against what was asked: a
decision Codex takes for an approval, an answer (a list of strings) for each question; a
request is answered once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .actions import AnswerAction, Refused

#: What a page may answer to an approval, in Codex's words (``cancel`` too: it stops the turn).
DECISIONS = ("accept", "acceptForSession", "decline", "cancel")
#: The requests a page answers, and what each asks.
KINDS = {
    "item/commandExecution/requestApproval": "command",
    "item/fileChange/requestApproval": "patch",
    "item/tool/requestUserInput": "question",
}


class Answer(msgspec.Struct, frozen=True):
    """Answer Codex's request ``request_id`` with ``result``."""

    request_id: int | str
    result: dict[str, Any]


@dataclass
class Asked:
    """A request waiting on a person."""

    request_id: int | str
    kind: str
    thread_id: str
    asked_at: float
    params: dict[str, Any]
    #: A file change's paths and diffs (Codex's approval request names only its item).
    changes: list[dict[str, Any]] = field(default_factory=list)
    answered: bool = False

    def wire(self) -> dict[str, Any]:
        p = self.params
        out: dict[str, Any] = {
            "requestId": self.request_id,
            "kind": self.kind,
            "threadId": self.thread_id,
            "askedAt": self.asked_at,
            "answered": self.answered,
            "reason": p.get("reason") or "",
        }
        if self.kind == "command":
            out["command"] = p.get("command") or ""
            out["cwd"] = p.get("cwd") or ""
        elif self.kind == "patch":
            out["changes"] = self.changes
            out["grantRoot"] = p.get("grantRoot") or ""
        elif self.kind == "question":
            out["questions"] = p.get("questions") or []
        return out


class Inbox:
    """Every request waiting on a person; ``changed`` is called whenever that changes."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self._asked: dict[int | str, Asked] = {}
        self._changed = changed

    def __len__(self) -> int:
        return len(self._asked)

    def __bool__(self) -> bool:
        return bool(self._asked)

    def asked_at(self, request_id: int | str) -> float | None:
        known = self._asked.get(request_id)
        return known.asked_at if known is not None else None

    def ask(self, asked: Asked) -> None:
        self._asked[asked.request_id] = asked
        self._changed()

    def resolved(self, request_id: Any) -> None:
        """Answered (by anyone), or no longer answerable here."""
        if self._asked.pop(request_id, None) is not None:
            self._changed()

    def drop_thread(self, thread_id: str) -> None:
        for request_id in [r for r, a in self._asked.items() if a.thread_id == thread_id]:
            self.resolved(request_id)

    def clear(self) -> None:
        if self._asked:
            self._asked.clear()
            self._changed()

    def wire(self) -> list[dict[str, Any]]:
        """Oldest first."""
        return [a.wire() for a in sorted(self._asked.values(), key=lambda a: a.asked_at)]

    def answer(self, action: AnswerAction) -> Answer | Refused:
        """A page's answer, checked against what was asked; once per request."""
        asked = self._asked.get(action.requestId)
        if asked is None:
            return Refused("no such request waits (answered already?)")
        if asked.answered:
            return Refused("that request was answered already")
        if asked.kind == "question":
            questions = asked.params.get("questions")
            if not isinstance(questions, list):
                questions = [None]
            ids = [q.get("id") if isinstance(q, dict) else None for q in questions]
            if not all(isinstance(i, str) for i in ids):
                return Refused("a question without an id of text: answer it in the editor")
            if action.answers is None or set(action.answers) != set(ids):
                return Refused("an answer for each question, as a list of strings")
            answers = {k: {"answers": v} for k, v in action.answers.items()}
            result: dict[str, Any] = {"answers": answers}
        else:
            if action.decision not in DECISIONS:
                return Refused(f"decision must be one of {', '.join(DECISIONS)}")
            result = {"decision": action.decision}
        asked.answered = True
        self._changed()
        return Answer(asked.request_id, result)
