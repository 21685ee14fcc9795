"""JetBrains AIR's ACP extensions: payloads under ``_meta.jetbrains.air``.

AIR (JetBrains' ACP client) declares what it reads in ``initialize``:
``clientCapabilities._meta.jetbrains.air = {version: 1, capabilities: [NAME, ...]}``.
A declaration counts only when ``version`` is an integer of at least 1 and
``capabilities`` an array; an extension is on only for a name the array holds.
The agent answers with its own list in the ``initialize`` result's
``_meta.jetbrains.air``; a client that declares nothing gets no AIR key anywhere.

Implemented here (the rest of AIR's list is what Codex or this bridge cannot back,
see docs/mapping.md):

- ``sessionFailure``: a turn Codex failed answers the prompt ``end_turn`` with a typed
  failure record in ``_meta.jetbrains.air.sessionFailure`` (:func:`failure_record`)
  instead of a JSON-RPC error; a missing sign-in stays ACP's ``auth_required``.
- ``diffPatch``: a changed file is one ``diff`` block carrying its Git patch in
  ``_meta.jetbrains.air.diffPatch {version: 1, format: "git_patch", text}``
  (bridge.engine.views.git_patch; the plain diff where no patch fits).
- ``nativeSubagentSessions``: the same as declaring ``clientCapabilities.subagents``
  (which released ACP SDKs can strip): Codex's sub-agents as sessions of their own.
- ``recommendedValue``: the model and effort Codex recommends, on their selectors
  (bridge.engine.features.settings._air_settings, which also gives every AIR client each mode's
  ``kind``).
- ``asyncTasks``: a command that outlives its turn is a task the user sees and stops
  (bridge.engine.features.extensions._async_tasks).
- ``agentFileChangeReport``: the files a prompt's turn changed, when the prompt asks
  (bridge.engine.features.prompts.file_reports).
- ``sessionIndex``: ``session/list`` rows carry ``_meta.jetbrains.air`` with
  ``archived`` always, and ``lastPromptAt``, ``lastTurnEndedAt``, ``state``
  (``running`` / ``requires_action`` / ``idle``), ``model``, ``forkedFrom`` when
  known; ``_session/list_changed {cwd}`` is pushed when a row of a listed ``cwd``
  changes. Listed in the agent's answer only when the client declared it.

Presentation keys, for every AIR client (nothing to declare): an answer's ``phase`` on
its chunks (bridge.engine.features.prompts.streaming), ``/goal``'s ``commandAction`` and each
skill's ``skillPath`` on the commands (bridge.engine.views.commands), each mode's
``kind``, and a permission request's ``permission`` record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..jsonrpc import RpcError
from ..wire import WireStruct as _Base

VERSION = 1

#: A ``_meta`` value.
Meta = dict[str, Any]

SESSION_INDEX = "sessionIndex"
SESSION_FAILURE = "sessionFailure"
DIFF_PATCH = "diffPatch"
NATIVE_SUBAGENTS = "nativeSubagentSessions"
RECOMMENDED_VALUE = "recommendedValue"
ASYNC_TASKS = "asyncTasks"
FILE_CHANGE_REPORT = "agentFileChangeReport"
ASYNC_TASK_STOP = "_session/async_task/stop"
#: Presentation keys, for every AIR client (nothing to declare).
PHASE = "phase"
COMMAND_ACTION = "commandAction"
SKILL_PATH = "skillPath"

#: The capabilities this bridge implements, listed to AIR in ``initialize``.
#: ``sessionIndex`` is listed only to a client that declared it (AIR builds without
#: it use ``session/list`` the old way and must not be told otherwise).
IMPLEMENTED: tuple[str, ...] = (
    FILE_CHANGE_REPORT,
    ASYNC_TASKS,
    SESSION_FAILURE,
    DIFF_PATCH,
    NATIVE_SUBAGENTS,
    RECOMMENDED_VALUE,
    SESSION_INDEX,
)
_ONLY_WHEN_DECLARED = frozenset({SESSION_INDEX})

LIST_CHANGED = "_session/list_changed"


class ListChangedParams(_Base):
    """``_session/list_changed``: page 1 of the list of ``cwd`` changed; read it again."""

    cwd: str


def declared(client_meta: Any) -> frozenset[str] | None:
    """The AIR capabilities a client's ``clientCapabilities._meta`` declares.

    ``None``: the client is not AIR (no declaration, or a malformed one: it enables
    nothing). An empty set: AIR declaring no capability.
    """
    if not isinstance(client_meta, dict):
        return None
    jetbrains = client_meta.get("jetbrains")
    air = jetbrains.get("air") if isinstance(jetbrains, dict) else None
    if not isinstance(air, dict):
        return None
    version = air.get("version")
    names = air.get("capabilities")
    # bool is an int to Python, not to JSON.
    if type(version) is not int or version < VERSION or not isinstance(names, list):
        return None
    return frozenset(name for name in names if isinstance(name, str))


def meta(payload: dict[str, Any]) -> dict[str, Any]:
    """``{"jetbrains": {"air": {"version": 1, ...payload}}}``: a ``_meta`` value."""
    return {"jetbrains": {"air": {"version": VERSION, **payload}}}


def fields_of(value_meta: Any) -> dict[str, Any]:
    """The ``_meta.jetbrains.air`` object of a ``_meta`` value (empty when there is none)."""
    jetbrains = value_meta.get("jetbrains") if isinstance(value_meta, dict) else None
    fields = jetbrains.get("air") if isinstance(jetbrains, dict) else None
    return fields if isinstance(fields, dict) else {}


def advertised(result_meta: Any, client: frozenset[str]) -> dict[str, Any]:
    """An ``initialize`` result's ``_meta`` with the agent's AIR declaration added."""
    offered = [name for name in IMPLEMENTED if name not in _ONLY_WHEN_DECLARED or name in client]
    existing = result_meta if isinstance(result_meta, dict) else {}
    return {**existing, **meta({"capabilities": offered})}


#: Codex's ``codexErrorInfo`` → (category, actions), as AIR's document tables them;
#: anything else is ``service`` with ``retry``.
_FAILURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "httpConnectionFailed": ("connection", ("retry", "new_session")),
    "responseStreamConnectionFailed": ("connection", ("retry", "new_session")),
    "responseStreamDisconnected": ("connection", ("retry", "new_session")),
    "responseTooManyFailedAttempts": ("connection", ("retry", "new_session")),
    "rateLimitExceeded": ("limit", ("retry",)),
    "usageLimitExceeded": ("limit", ()),
    "contextWindowExceeded": ("limit", ("new_session",)),
    "sessionBudgetExceeded": ("limit", ("new_session",)),
    "cyberPolicy": ("request", ()),
    "bioPolicy": ("request", ()),
    "misalignmentPolicyViolation": ("request", ()),
    "badRequest": ("request", ()),
    "serverOverloaded": ("service", ("retry",)),
    "internalServerError": ("service", ("retry", "new_session")),
}


def error_kind(info: Any) -> str | None:
    """The name of Codex's ``codexErrorInfo`` (a string, or a one-member object)."""
    if isinstance(info, str):
        return info
    if isinstance(info, dict) and len(info) == 1:
        (name,) = info
        return str(name)
    return None


def failure_record(
    incident: str, info: Any, title: str, details: str | None = None
) -> dict[str, Any]:
    """AIR's ``sessionFailure`` record of a failed turn (``incident``: ``<turnId>:error``)."""
    category, actions = _FAILURES.get(error_kind(info) or "", ("service", ("retry",)))
    record: dict[str, Any] = {
        "id": incident,
        "revision": 1,
        "category": category,
        "severity": "error",
        "title": title,
        "actions": list(actions),
    }
    if details:
        record["details"] = details
    return record


# -- fork at a message ---------------------------------------------------------------

# Compiled at first use (the re module caches it), not at import.
_FINGERPRINT = r"sha256:[0-9a-f]{64}"


@dataclass(frozen=True, slots=True)
class ForkPoint:
    """Where AIR forks a session: the message ``message_id`` (or, when no item has that
    id, the ``occurrence``-th agent message whose text has ``fingerprint``)."""

    message_id: str
    fingerprint: str | None = None
    occurrence: int = 1


def fork_point(request_meta: Any) -> ForkPoint | None:
    """``session/fork``'s ``_meta.jetbrains.air.fork``, read when its ``version`` is 1.

    Raises ``RpcError`` (invalid params) for a field that does not fit."""
    if not isinstance(request_meta, dict):
        return None
    jetbrains = request_meta.get("jetbrains")
    air = jetbrains.get("air") if isinstance(jetbrains, dict) else None
    fork = air.get("fork") if isinstance(air, dict) else None
    if not isinstance(fork, dict) or fork.get("version") != VERSION:
        return None
    message_id = fork.get("messageId")
    fingerprint = fork.get("messageFingerprint")
    occurrence = fork.get("messageOccurrence", 1)
    if not isinstance(message_id, str) or not message_id:
        raise RpcError.invalid_params("session/fork: fork.messageId must be a non-empty string")
    if fingerprint is not None and (
        not isinstance(fingerprint, str) or not re.fullmatch(_FINGERPRINT, fingerprint)
    ):
        raise RpcError.invalid_params(
            'session/fork: fork.messageFingerprint must be "sha256:" and 64 hex digits'
        )
    if type(occurrence) is not int or occurrence < 1:
        raise RpcError.invalid_params(
            "session/fork: fork.messageOccurrence must be a positive integer"
        )
    return ForkPoint(message_id, fingerprint, occurrence)


# -- async tasks ---------------------------------------------------------------------


class AsyncTaskSpawned(_Base, tag="async_task_spawned", tag_field="sessionUpdate"):
    """A command that keeps running after its turn, as a task the user sees and stops.
    Every field is sent (none is left out for being a default)."""

    asyncTaskId: str
    name: str
    taskType: str
    showInTranscript: bool
    canStop: bool
    toolCallId: str


class AsyncTaskStateUpdate(_Base, tag="async_task_state_update", tag_field="sessionUpdate"):
    asyncTaskId: str
    #: ``completed`` | ``failed`` | ``stopped``.
    state: str
    summary: str | UnsetType = UNSET


class AsyncTaskStopParams(_Base):
    sessionId: str
    asyncTaskId: str


class AsyncTaskStopResult(_Base, omit_defaults=False):
    stopped: bool


# -- agent file-change report --------------------------------------------------------
_REQUEST_ID = r"[A-Za-z0-9._:-]{1,128}"  # compiled at first use, as _FINGERPRINT


class PromptMeta(_Base):
    """What a ``session/prompt`` says besides its content: read for the report request."""

    sessionId: str = ""
    meta: dict[str, Any] | None | UnsetType = msgspec.field(default=UNSET, name="_meta")


def report_request(request_meta: Any) -> str | None:
    """The ``requestId`` of ``session/prompt``'s ``_meta.jetbrains.air.agentFileChangeReportRequest``,
    or ``None`` (none, or a malformed one: ignored, as AIR's contract says)."""
    if not isinstance(request_meta, dict):
        return None
    jetbrains = request_meta.get("jetbrains")
    air = jetbrains.get("air") if isinstance(jetbrains, dict) else None
    asked = air.get("agentFileChangeReportRequest") if isinstance(air, dict) else None
    if not isinstance(asked, dict) or set(asked) != {"version", "requestId"}:
        return None
    request_id = asked["requestId"]
    if asked["version"] != VERSION or type(asked["version"]) is not int:
        return None
    if not isinstance(request_id, str) or not re.fullmatch(_REQUEST_ID, request_id):
        return None
    return request_id


# -- permission presentation ---------------------------------------------------------


def permission(title: str, reason: str | None) -> dict[str, Any]:
    """A permission request's presentation record: its heading, and Codex's reason."""
    record: dict[str, Any] = {"version": VERSION, "title": title}
    if reason and reason.strip():
        record["description"] = reason
    return record
