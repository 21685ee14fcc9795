"""Reading a Responses-API request: which message is the user's, whether the request is
Codex's own, what reply format it wants, and a plausible token count."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()


#: Messages that Codex adds as role ``user`` and that are not wrapped in one XML-like element.
_INJECTED_PREFIXES = (
    "# AGENTS.md instructions",
    # The summary that stands for the history after a compaction.
    "Another language model started to solve this problem",
)
# `<environment_context>...</environment_context>`, `<subagent_notification>`, `<turn_aborted>`, ...
_XML_WRAPPED = re.compile(r"\A\s*<([A-Za-z_][\w-]*)[\s>].*</\1>\s*\Z", re.DOTALL)


def _message_text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    # One line break between text parts, so a directive line never runs into the next part.
    return "\n".join(
        str(part.get("text", ""))
        for part in content
        if isinstance(part, dict) and part.get("type") == "input_text"
    )


def _is_injected(text: str) -> bool:
    return text.startswith(_INJECTED_PREFIXES) or _XML_WRAPPED.match(text) is not None


@dataclass(frozen=True, slots=True)
class UserTurn:
    """The latest real user message of a request, and the tool results that came back since."""

    text: str
    tool_outputs: int


def find_user_turn(body: Mapping[str, Any]) -> UserTurn | None:
    """The latest user message in ``body["input"]`` that a person (or a spawning agent) wrote.

    Messages that Codex injects as role ``user`` are skipped. ``tool_outputs`` counts the
    ``*_call_output`` items after it: one per answered tool call.
    """
    items = body.get("input")
    if not isinstance(items, list):
        return None
    outputs = 0
    for item in reversed(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if isinstance(kind, str) and kind.endswith("_call_output"):
            outputs += 1
        elif kind == "message" and item.get("role") == "user":
            text = _message_text(item)
            if not _is_injected(text):
                return UserTurn(text, outputs)
    return None


def tool_output_objects(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The tool results of the request that are JSON objects, newest first."""
    found: list[Mapping[str, Any]] = []
    items = body.get("input")
    for item in reversed(items if isinstance(items, list) else []):
        if isinstance(item, dict) and str(item.get("type", "")).endswith("_call_output"):
            output = item.get("output")
            try:
                decoded = json.loads(output) if isinstance(output, str) else output
            except json.JSONDecodeError:
                continue
            if isinstance(decoded, dict):
                found.append(decoded)
    return found


# What the turn metadata says of a request that runs a person's (or a spawned agent's) turn. Codex's
# own requests say otherwise: a thread title (thread_source "thread_title", sent by the TUI), the
# automatic approval reviewer (sub-agent "guardian"), a compaction (request_kind "compaction").
_SCRIPTED_REQUEST_KINDS = frozenset({"turn"})
_SCRIPTED_THREAD_SOURCES = frozenset({"user", "subagent"})
_SCRIPTED_SUBAGENT_KINDS = frozenset({"thread_spawn", "collab_spawn"})


def turn_metadata(
    body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The ``x-codex-turn-metadata`` JSON, sent as a header and inside ``client_metadata``."""
    raw = (headers or {}).get("x-codex-turn-metadata")
    if raw is None:
        client_metadata = body.get("client_metadata")
        if isinstance(client_metadata, dict):
            raw = client_metadata.get("x-codex-turn-metadata")
    try:
        decoded = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        decoded = None
    return decoded if isinstance(decoded, dict) else {}


def codex_internal_purpose(
    body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> str | None:
    """Why Codex sent this request for itself (e.g. ``"thread_title"``); ``None`` for a user turn.

    Codex's own requests quote the user's prompt, so they must never run its script. The turn
    metadata tells them apart, by allow-list: a request is scripted only if its ``request_kind``
    is ``turn``, its ``thread_source`` is absent (app-server ``thread/start``), ``user`` or
    ``subagent``, and its sub-agent kind (also header ``x-openai-subagent``) is absent or a spawned
    agent's. An unknown purpose thus gets the plain reply, never a tool call.
    """
    meta = turn_metadata(body, headers)
    kind = meta.get("request_kind", "turn")
    if kind not in _SCRIPTED_REQUEST_KINDS:
        return str(kind)
    source = meta.get("thread_source")
    if source is not None and source not in _SCRIPTED_THREAD_SOURCES:
        return str(source)
    subagent = meta.get("subagent_kind") or (headers or {}).get("x-openai-subagent")
    if subagent is not None and subagent not in _SCRIPTED_SUBAGENT_KINDS:
        return str(subagent)
    return None


def _schema_instance(schema: object, text: str) -> object:
    """A value valid for a simple JSON schema: the first enum value, ``text`` for a string, ..."""
    if not isinstance(schema, dict):
        return text
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return {}
        return {name: _schema_instance(sub, text) for name, sub in properties.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    max_length = schema.get("maxLength")
    return text[:max_length] if isinstance(max_length, int) else text


def plain_reply(body: Mapping[str, Any], text: str) -> str:
    """``text``; or, when the request wants JSON (``text.format`` json_schema), JSON built from it.

    The thread-title request wants ``{"title"}``; the approval reviewer wants ``{"outcome", ...}``,
    whose first enum value is ``allow``: the scripted reviewer approves every action.
    """
    options = body.get("text")
    fmt = options.get("format") if isinstance(options, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return _encoder.encode(_schema_instance(fmt.get("schema"), text)).decode()
    return text


def token_estimate(body: Mapping[str, Any]) -> tuple[int, int]:
    """Plausible (input, cached) tokens: ~4 bytes a token; all but the newest input item cached."""
    prefix = len(_encoder.encode(body.get("instructions")))
    prefix += len(_encoder.encode(body.get("tools", [])))
    items = body.get("input")
    sizes = [len(_encoder.encode(item)) for item in items] if isinstance(items, list) else []
    total = prefix + sum(sizes)
    return max(1, total // 4), (total - (sizes[-1] if sizes else 0)) // 4
