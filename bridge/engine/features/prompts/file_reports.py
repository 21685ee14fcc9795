"""Feature: AIR's agent file-change report (``agentFileChangeReport`` declared).

A ``session/prompt`` may ask, in ``_meta.jetbrains.air.agentFileChangeReportRequest
{version: 1, requestId}``, for the list of files its turn changed. Just before the
prompt's answer the session gets one ``session_info_update`` whose
``_meta.jetbrains.air.agentFileChangeReport`` is ``{version: 1, requestId, status:
"reported", paths, declaredComplete: false, truncated, uncertainty}``, or ``status:
"unavailable"`` with a ``reason``: ``cancelled``, ``providerError`` (the turn failed),
``notReported`` (no turn ran). ACP v2 answers a prompt when it is inserted: the same
update goes just before the ``state_update`` that ends the prompt's work.

The paths come from Codex's aggregated ``turn/diff/updated`` of the turn: Codex writes
them relative to the repository it found above the session's ``cwd`` (the nearest folder
holding ``.git``, asked of the shell's ``is_directory``; without one, the highest ancestor
of ``cwd`` that puts every path inside it). Each becomes an absolute path; only those in
the ``cwd`` are reported, at most 1024. Codex's diff follows ``apply_patch`` only, so the
report never says it is complete.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from msgspec import Raw

from ....acp import air
from ....acp import tools as acp_tools
from ....acp import types as acp_types
from ....codex import types as codex_types
from ....jsonrpc import RequestId, RpcError
from ...core import facts
from ...core.answers import decode_params
from ...core.hub import Hub, RequestHandler

MAX_PATHS = 1024
MAX_DIFF_BYTES = 8 << 20

UNCERTAINTY = (
    "Codex's turn diff follows the changes its apply_patch tool made: changes made by "
    "shell commands, version control, generators or child processes can be missing."
)

# Compiled at first use (the re module caches it), not at import.
_DIFF_HEADER = r"(?m)^diff --git a/(.+) b/(.+)$"


def _ancestors(path: str) -> list[str]:
    out = [path]
    while path != "/":
        path = posixpath.dirname(path)
        out.append(path)
    return out


def changed_paths(diff: str, cwd: str, is_directory: Callable[[str], bool]) -> list[str]:
    """The absolute paths in ``cwd`` that Codex's turn diff changed, in its order."""
    relative = [new for _old, new in re.findall(_DIFF_HEADER, diff) if not new.startswith('"')]
    cwd = posixpath.normpath(cwd)
    root = next((a for a in _ancestors(cwd) if is_directory(posixpath.join(a, ".git"))), None)
    if root is None:
        fits = [
            a
            for a in _ancestors(cwd)
            if all(_inside(posixpath.normpath(posixpath.join(a, r)), cwd) for r in relative)
        ]
        root = fits[-1] if fits else cwd
    paths = [posixpath.normpath(posixpath.join(root, r)) for r in relative]
    return list(dict.fromkeys(p for p in paths if _inside(p, cwd)))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class FileReports:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: Prompts that asked for a report: request id → the report's ``requestId``.
        self._asked: dict[RequestId, str] = {}
        #: Each thread's latest turn diff, since its turn started.
        self._diffs: dict[str, str] = {}

    @property
    def on(self) -> bool:
        return self.hub.declares(air.FILE_CHANGE_REPORT)

    def asking(self, session_prompt: RequestHandler) -> RequestHandler:
        """``session/prompt`` (v1's or v2's handler), noting a report request first (for a
        client that declared the capability: anyone else's prompt goes straight through)."""

        def prompt(rid: RequestId, raw: Raw) -> None:
            if self.on:
                params = decode_params(raw, air.PromptMeta, "session/prompt")
                asked = air.report_request(params.meta)
                if asked is not None:
                    self._asked[rid] = asked
            try:
                session_prompt(rid, raw)
            except RpcError:
                self._asked.pop(rid, None)
                raise

        return prompt

    def turn_started(self, note: codex_types.TurnNotification) -> None:
        if self._asked:
            self._diffs[note.threadId] = ""

    def diff_updated(self, note: codex_types.TurnDiffUpdated) -> None:
        if note.threadId in self._diffs:
            self._diffs[note.threadId] = note.diff

    def report_files(self, fact: facts.PromptEnded) -> None:
        """Send the report of a prompt that asked for one (before its answer)."""
        asked = self._asked.pop(fact.request_id, None)
        if asked is None:
            return
        record = fact.record
        diff = self._diffs.pop(record.id, None)
        report: dict[str, object] = {"version": air.VERSION, "requestId": asked}
        outcome = fact.outcome
        failed = isinstance(outcome, RpcError) or air.SESSION_FAILURE in air.fields_of(outcome.meta)
        if isinstance(outcome, acp_types.PromptResult) and outcome.stopReason == "cancelled":
            report.update(status="unavailable", reason="cancelled")
        elif failed:
            report.update(status="unavailable", reason="providerError")
        elif diff is None:
            report.update(status="unavailable", reason="notReported")
        elif len(diff.encode()) > MAX_DIFF_BYTES:
            report.update(status="unavailable", reason="invalidOutput")
        else:
            paths = changed_paths(diff, record.cwd, self.hub.setup.is_directory)
            report.update(
                status="reported",
                paths=paths[:MAX_PATHS],
                declaredComplete=False,
                truncated=len(paths) > MAX_PATHS,
                uncertainty=UNCERTAINTY,
            )
        update = acp_tools.SessionInfoUpdate(meta=air.meta({air.FILE_CHANGE_REPORT: report}))
        self.hub.client.update(record.id, update)
