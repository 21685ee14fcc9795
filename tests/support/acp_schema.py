"""Validate what an agent sends against the official ACP v1 JSON Schema.

Each message is checked against the precise definition for its method (a
``session/new`` result against ``NewSessionResponse``, a ``session/update``
against ``SessionNotification``...), not merely against "some ACP message".
Responses need the method of the request they answer, so
:class:`ConversationValidator` follows the client's requests.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas" / "acp" / "v1"


@functools.cache
def _schema(unstable: bool) -> dict[str, Any]:
    name = "schema.unstable.json" if unstable else "schema.json"
    return json.loads((SCHEMA_DIR / name).read_text())  # type: ignore[no-any-return]


@functools.cache
def _validator(unstable: bool, definition: str) -> Draft202012Validator:
    defs = _schema(unstable)["$defs"]
    return Draft202012Validator({"$defs": defs, "$ref": f"#/$defs/{definition}"})


@functools.cache
def _definition(unstable: bool, method: str, side: str, suffix: str) -> str:
    for name, body in _schema(unstable)["$defs"].items():
        if body.get("x-method") == method and body.get("x-side") == side and name.endswith(suffix):
            return name
    raise KeyError(f"no {suffix} definition for {method!r} on the {side} side")


def validate(definition: str, value: Any, *, unstable: bool = False) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``value`` is a valid ``definition``."""
    _validator(unstable, definition).validate(value)


def _steering_result(result: Any) -> None:
    """``_session/steering`` is an extension (no ACP schema): its result's shape, checked here."""
    assert isinstance(result, dict) and set(result) <= {"outcome", "reason", "_meta"}, result
    assert result["outcome"] in ("injected", "promptRequired", "startedNewTurn", "failed"), result
    assert isinstance(result.get("reason", ""), str), result


#: Extension requests (``_``-prefixed, outside the schema) and the check of their results.
EXTENSIONS: dict[str, Any] = {"_session/steering": _steering_result}


class ConversationValidator:
    """Validates every message an agent sends, given the requests it answers."""

    def __init__(self, *, unstable: bool = False) -> None:
        self.unstable = unstable
        self.request_methods: dict[Any, str] = {}

    def client_sent(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self.request_methods[message["id"]] = message["method"]

    def agent_sent(self, message: dict[str, Any]) -> None:
        assert message.get("jsonrpc") == "2.0", f"missing jsonrpc member: {message}"
        if "method" in message:
            side_kind = "Request" if "id" in message else "Notification"
            # ``$/…`` methods (``$/cancel_request``) belong to the protocol, not one side.
            side = "protocol" if message["method"].startswith("$/") else "client"
            name = _definition(self.unstable, message["method"], side, side_kind)
            validate(name, message.get("params"), unstable=self.unstable)
        elif "error" in message:
            validate("Error", message["error"], unstable=self.unstable)
        else:
            method = self.request_methods.get(message.get("id"))
            assert method is not None, f"response to an unknown request: {message}"
            if method in EXTENSIONS:
                EXTENSIONS[method](message["result"])
                return
            name = _definition(self.unstable, method, "agent", "Response")
            validate(name, message["result"], unstable=self.unstable)
