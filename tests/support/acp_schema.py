"""Validate what an agent sends against the official ACP JSON Schema (v1, or the draft v2).

Each message is checked against the precise definition for its method (a
``session/new`` result against ``NewSessionResponse``, a ``session/update``
against ``SessionNotification`` in v1, ``UpdateSessionNotification`` in v2...),
not merely against "some ACP message". Definitions are found by their
``x-method``/``x-side`` annotations, which both versions carry. Responses need
the method of the request they answer, so :class:`ConversationValidator`
follows the client's requests.

v2 leaves most of its unions open: next to the known variants each has one
titled ``other`` that takes any discriminator value (``sessionUpdate``,
``state``, ``stopReason``, ``kind``...), reserved for extensions (``_``-prefixed)
and for future ACP variants. Read verbatim, the v2 schema would thus accept a v1
``tool_call`` update. An agent speaking v2 today may send only the variants v2
defines, or ``_`` extensions, so for v2 these ``other`` members are closed: their
discriminator must start with ``_`` (``future_variants=True`` keeps the schema
as published). The v1 schema is always used verbatim.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas" / "acp"
SCHEMA_DIR = SCHEMAS / "v1"
VERSIONS = (1, 2)


def _close_open_unions(node: Any) -> None:
    """Restrict, in place, every ``other`` member of a union to ``_``-prefixed discriminators."""
    if isinstance(node, list):
        for item in node:
            _close_open_unions(item)
        return
    if not isinstance(node, dict):
        return
    for key in ("anyOf", "oneOf"):
        members = node.get(key)
        if not isinstance(members, list):
            continue
        for member in members:
            if not (isinstance(member, dict) and member.get("title") == "other"):
                continue
            if member.get("type") == "string":
                member["pattern"] = "^_"
                continue
            # The discriminators: the properties its sibling variants pin with ``const``.
            discriminators = {
                name
                for sibling in members
                if sibling is not member and isinstance(sibling, dict)
                for name, prop in sibling.get("properties", {}).items()
                if isinstance(prop, dict) and "const" in prop
            }
            assert discriminators, f"an open union without discriminator: {member}"
            properties = member.setdefault("properties", {})
            for name in discriminators:
                properties[name] = {**properties.get(name, {}), "pattern": "^_"}
    for value in node.values():
        _close_open_unions(value)


@functools.cache
def _schema(unstable: bool, version: int = 1, closed: bool = False) -> dict[str, Any]:
    if version not in VERSIONS:
        raise ValueError(f"no ACP schema for protocol version {version!r}")
    name = "schema.unstable.json" if unstable else "schema.json"
    schema: dict[str, Any] = json.loads((SCHEMAS / f"v{version}" / name).read_text())
    if closed:  # a fresh parse, so the cached verbatim copy stays untouched
        _close_open_unions(schema["$defs"])
        _allow_draft_variants(schema["$defs"])
    return schema


#: Variants the v2 draft documents that SDK 2.4.0's schema does not define yet: still
#: accepted once the unions are closed. ``env_var`` sign-in ("Authentication method
#: types", https://agentclientprotocol.com/protocol/v2/draft/authentication).
DRAFT_VARIANTS = {"AuthMethod": ("type", ("env_var",))}


def _allow_draft_variants(defs: dict[str, Any]) -> None:
    for definition, (field, values) in DRAFT_VARIANTS.items():
        for member in defs[definition].get("anyOf", []):
            if member.get("title") == "other":
                allowed = "|".join(values)
                member["properties"][field]["pattern"] = f"^(_.*|(?:{allowed})$)"


def _closed(version: int, future_variants: bool) -> bool:
    return version >= 2 and not future_variants


#: A variant's discriminators: each property it pins to a string with ``const``.
_Pins = tuple[tuple[str, str], ...]
_pins_of: dict[int, tuple[Sequence[Any], tuple[_Pins, ...]]] = {}


def _pins(variants: Sequence[Any]) -> tuple[_Pins, ...]:
    known = _pins_of.get(id(variants))
    if known is None or known[0] is not variants:
        pins = tuple(
            tuple(
                (name, prop["const"])
                for name, prop in variant.get("properties", {}).items()
                if isinstance(prop, dict) and isinstance(prop.get("const"), str)
            )
            if isinstance(variant, dict)
            else ()
            for variant in variants
        )
        # The list is kept with its pins, so that its id is not another's while they are.
        known = _pins_of[id(variants)] = (variants, pins)
    return known[1]


def _discriminated(keyword: str) -> Callable[..., Iterator[ValidationError]]:
    """``oneOf`` or ``anyOf`` that first tries the variant(s) an object's discriminator
    picks, and otherwise (or when that fails) is the standard keyword, errors and all.

    ACP's unions are tagged (``sessionUpdate``, ``type``, ``outcome``...: each variant pins
    it with ``const``), and the standard keyword walks every variant, ``oneOf`` even after
    the one that matched. A variant that pins a property the object has to another string
    cannot be valid (its ``const`` fails). So: ``anyOf`` is valid if a variant whose pins
    the object has is; ``oneOf`` is valid if every variant but one is ruled out that way
    and that one is valid. Anything else is decided by the standard keyword."""
    standard = Draft202012Validator.VALIDATORS[keyword]

    def check(
        validator: Any, variants: Sequence[Any], instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if isinstance(instance, dict):
            pins = _pins(variants)
            open_ = [
                index
                for index, pinned in enumerate(pins)
                if not any(name in instance and instance[name] != c for name, c in pinned)
            ]
            if keyword == "oneOf":
                tried = open_ if len(open_) == 1 else []
            else:
                tried = [i for i in open_ if pins[i] and all(n in instance for n, _ in pins[i])]
            for index in tried:
                if (
                    next(validator.descend(instance, variants[index], schema_path=index), None)
                    is None
                ):
                    return
        yield from standard(validator, variants, instance, schema)

    return check


#: Draft 2020-12, its tagged unions checked by their tag first (same verdicts, same errors).
_Validator = validators.extend(
    Draft202012Validator,
    {"oneOf": _discriminated("oneOf"), "anyOf": _discriminated("anyOf")},
)


@functools.cache
def _validator(
    unstable: bool, definition: str, version: int = 1, closed: bool = False
) -> Draft202012Validator:
    defs = _schema(unstable, version, closed)["$defs"]
    validator: Draft202012Validator = _Validator({"$defs": defs, "$ref": f"#/$defs/{definition}"})
    return validator


@functools.cache
def _definition(unstable: bool, method: str, side: str, suffix: str, version: int = 1) -> str:
    for name, body in _schema(unstable, version)["$defs"].items():
        if body.get("x-method") == method and body.get("x-side") == side and name.endswith(suffix):
            return name
    raise KeyError(f"no {suffix} definition for {method!r} on the {side} side (ACP v{version})")


def definition(
    method: str, side: str, suffix: str, *, version: int = 1, unstable: bool = False
) -> str:
    """The name of the definition of ``method`` (``suffix``: Request, Response, Notification)."""
    return _definition(unstable, method, side, suffix, version)


class _Valid:
    """The values already found valid, each under the definition it was checked against.

    Validation is a pure function of the schema and the value, and the suite checks the same
    messages again and again (a property test replays its conversation once an example, a
    transcript is validated both in order and whole): a value seen valid before is valid
    again without a walk of the schema, ~1 ms of CPU a ``session/update``. The key is the
    ``repr`` of a value made of JSON's types alone (others are always checked), which tells
    apart all the schema does (``1`` from ``1.0`` and ``True``); only valid values are kept,
    so an invalid one is always checked (and raises) as before. Up to ``BUDGET`` characters of
    keys, then it starts afresh.
    """

    BUDGET = 32 * 1024 * 1024

    def __init__(self) -> None:
        self.seen: set[tuple[bool, str, int, bool, str]] = set()
        self.size = 0

    def add(self, key: tuple[bool, str, int, bool, str]) -> None:
        if self.size + len(key[-1]) > self.BUDGET:
            self.seen.clear()
            self.size = 0
        self.seen.add(key)
        self.size += len(key[-1])


_valid = _Valid()


def validate(
    definition: str,
    value: Any,
    *,
    unstable: bool = False,
    version: int = 1,
    future_variants: bool = False,
) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``value`` is a valid ``definition``.

    For v2, ``future_variants=False`` closes the schema's open unions (see the module doc).
    """
    closed = _closed(version, future_variants)
    if not _plain(value):
        _validator(unstable, definition, version, closed).validate(value)
        return
    key = (unstable, definition, version, closed, repr(value))
    if key in _valid.seen:
        return
    _validator(unstable, definition, version, closed).validate(value)
    _valid.add(key)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> bool:
    """``value`` is made of ``dict``, ``list`` and JSON's scalars alone (what decoded JSON
    is), so that its ``repr`` says all the schema sees of it."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is list:
        return all(_plain(item) for item in value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False


def _steering_result(result: Any) -> None:
    """``_session/steering`` is an extension (no ACP schema): its result's shape, checked here."""
    assert isinstance(result, dict) and set(result) <= {"outcome", "reason", "_meta"}, result
    assert result["outcome"] in ("injected", "promptRequired", "startedNewTurn", "failed"), result
    assert isinstance(result.get("reason", ""), str), result


def _async_task_stop_result(result: Any) -> None:
    """AIR's ``_session/async_task/stop``: ``{stopped}``."""
    assert isinstance(result, dict) and set(result) == {"stopped"}, result
    assert isinstance(result["stopped"], bool), result


#: Extension requests (``_``-prefixed, outside the schema) and the check of their results.
EXTENSIONS: dict[str, Any] = {
    "_session/steering": _steering_result,
    "_session/async_task/stop": _async_task_stop_result,
}


def _list_changed(params: Any) -> None:
    """AIR's ``_session/list_changed`` (no ACP schema): ``{cwd}``, an absolute path."""
    assert isinstance(params, dict) and set(params) == {"cwd"}, params
    assert isinstance(params["cwd"], str) and params["cwd"].startswith("/"), params


def _rate_limits_update(params: Any) -> None:
    """``_account/rate_limits_update {rateLimits}`` (no ACP schema): Codex's snapshot, whole."""
    assert isinstance(params, dict) and set(params) == {"rateLimits"}, params
    limits = params["rateLimits"]
    assert set(limits) == {
        "limitId",
        "limitName",
        "normalModelSlug",
        "primary",
        "secondary",
        "rateLimitReachedType",
        "planType",
    }, limits
    assert isinstance(limits["limitId"], str) and limits["limitId"], limits
    for name in ("primary", "secondary"):
        window = limits[name]
        if window is not None:
            assert set(window) == {"usedPercent", "windowDurationMins", "resetsAt"}, window
            assert 0 <= window["usedPercent"] <= 100, window


def _async_task_update(update: dict[str, Any]) -> None:
    """AIR's task updates (no ACP schema; the envelope is checked by the caller)."""
    if update["sessionUpdate"].lstrip("_") == "async_task_spawned":
        assert set(update) == {
            "sessionUpdate",
            "asyncTaskId",
            "name",
            "taskType",
            "showInTranscript",
            "canStop",
            "toolCallId",
        }, update
    else:
        assert set(update) <= {"sessionUpdate", "asyncTaskId", "state", "summary"}, update
        assert update["state"] in ("running", "completed", "failed", "stopped"), update


#: AIR's session updates, by ``sessionUpdate`` (v2 takes them with a ``_`` name).
AIR_UPDATES = {
    name: _async_task_update
    for name in (
        "async_task_spawned",
        "async_task_state_update",
        "_async_task_spawned",
        "_async_task_state_update",
    )
}


#: Shapes of ACP proposals the published schema does not have yet (provenance:
#: tests/schemas/SOURCE.md).
PROPOSALS = Path(__file__).resolve().parents[1] / "schemas" / "acp-proposals"


@functools.cache
def _proposal_validator(definition: str) -> Draft202012Validator:
    defs = json.loads((PROPOSALS / "proposals.schema.json").read_text())["$defs"]
    return Draft202012Validator({"$defs": defs, "$ref": f"#/$defs/{definition}"})


def validate_proposal(definition: str, value: Any) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``value`` is a valid ``definition`` of
    the proposals' fragment (``QuotaUpdate``, ``QuotaSnapshot``, ``SessionListRowFields``...)."""
    _proposal_validator(definition).validate(value)


#: ``quotaExceeded``'s code, the quotas proposal's placeholder.
QUOTA_EXCEEDED = -32003

#: Proposal notifications (``method`` → definition of their params).
PROPOSAL_NOTIFICATIONS = {"session/list_changed": "SessionListChangedNotification"}

#: Proposal requests (``method`` → definition of their result).
PROPOSAL_RESULTS = {"quota/read": "QuotaSnapshot"}

#: Proposal session updates (``sessionUpdate`` → definition).
PROPOSAL_UPDATES = {"quota_update": "QuotaUpdate"}


#: Extension notifications the agent sends, and the check of their params.
EXTENSION_NOTIFICATIONS: dict[str, Any] = {
    "_session/list_changed": _list_changed,
    "_account/rate_limits_update": _rate_limits_update,
}


class ConversationValidator:
    """Validates every message an agent sends, given the requests it answers.

    ``version`` is the ACP protocol version the conversation speaks (1, or 2 for the draft).
    """

    def __init__(
        self, *, unstable: bool = False, version: int = 1, future_variants: bool = False
    ) -> None:
        if version not in VERSIONS:
            raise ValueError(f"no ACP schema for protocol version {version!r}")
        self.unstable = unstable
        self.version = version
        self.future_variants = future_variants
        self.request_methods: dict[Any, str] = {}

    def _definition(self, method: str, side: str, suffix: str) -> str:
        return _definition(self.unstable, method, side, suffix, self.version)

    def _validate(self, definition: str, value: Any) -> None:
        validate(
            definition,
            value,
            unstable=self.unstable,
            version=self.version,
            future_variants=self.future_variants,
        )

    def client_sent(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self.request_methods[message["id"]] = message["method"]

    def agent_sent(self, message: dict[str, Any]) -> None:
        assert message.get("jsonrpc") == "2.0", f"missing jsonrpc member: {message}"
        if "method" in message:
            if "id" not in message and message["method"] in EXTENSION_NOTIFICATIONS:
                EXTENSION_NOTIFICATIONS[message["method"]](message.get("params"))
                return
            if "id" not in message and message["method"] in PROPOSAL_NOTIFICATIONS:
                validate_proposal(PROPOSAL_NOTIFICATIONS[message["method"]], message["params"])
                return
            update = (message.get("params") or {}).get("update")
            if message["method"] == "session/update" and isinstance(update, dict):
                proposed = PROPOSAL_UPDATES.get(update.get("sessionUpdate", ""))
                if proposed is not None:
                    assert isinstance(message["params"].get("sessionId"), str), message
                    validate_proposal(proposed, update)
                    return
                check = AIR_UPDATES.get(update.get("sessionUpdate", ""))
                if check is not None:
                    assert isinstance(message["params"].get("sessionId"), str), message
                    check(update)
                    return
            side_kind = "Request" if "id" in message else "Notification"
            # ``$/…`` methods (``$/cancel_request``) belong to the protocol, not one side.
            side = "protocol" if message["method"].startswith("$/") else "client"
            name = self._definition(message["method"], side, side_kind)
            self._validate(name, message.get("params"))
        elif "error" in message:
            self._validate("Error", message["error"])
            if message["error"]["code"] == QUOTA_EXCEEDED:
                validate_proposal("QuotaExceededErrorData", message["error"].get("data"))
        else:
            method = self.request_methods.get(message.get("id"))
            assert method is not None, f"response to an unknown request: {message}"
            if method in EXTENSIONS:
                EXTENSIONS[method](message["result"])
                return
            if method in PROPOSAL_RESULTS:
                validate_proposal(PROPOSAL_RESULTS[method], message["result"])
                return
            name = self._definition(method, "agent", "Response")
            self._validate(name, message["result"])
            if method == "session/list":
                for row in message["result"]["sessions"]:
                    validate_proposal("SessionListRowFields", row)
