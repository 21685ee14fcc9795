"""What a failed turn tells the client: pure functions of Codex's error.

Codex says a turn failed with ``turn/completed {turn: {status: "failed",
error}}``; the error's ``codexErrorInfo`` says why when Codex knows. Two causes
are worth more than Codex's message: missing credentials (the client should offer
a sign-in: ACP's ``auth_required``, :func:`lacks_credentials`) and a stop by the
model's usage policies (the user should hear what that means and what to do,
:func:`policy_message`). The prompts feature answers a failed prompt with them.
"""

from __future__ import annotations

from typing import Any

from ....codex import types as codex_types

#: ``codexErrorInfo`` of a turn the model's usage policies stopped → what the user is told
#: (Codex's own message follows, in parentheses).
POLICY_STOPS = {
    "bioPolicy": (
        "Codex stopped: this request was flagged for possible biological risk, which "
        "OpenAI's usage policies do not allow. Rephrase it, or ask about something else."
    ),
    "cyberPolicy": (
        "Codex stopped: this request was flagged for possible cybersecurity risk, which "
        "OpenAI's usage policies do not allow. Rephrase it, or ask about something else."
    ),
}


def policy_message(info: Any, message: str | None) -> str | None:
    """A failed turn's error message: Codex's, led by what a policy stop means."""
    stop = POLICY_STOPS.get(info) if isinstance(info, str) else None
    if stop is None:
        return message
    return f"{stop} (Codex: {message})" if message else stop


_MISSING_ENV_KEY = "Missing environment variable:"


def lacks_credentials(error: codex_types.TurnError | None) -> bool:
    """Whether a failed turn failed because Codex could not authenticate to the model.

    Codex 0.169 says so in three ways: ``codexErrorInfo: "unauthorized"``; an
    HTTP 401 from the provider (``{"httpConnectionFailed": {"httpStatusCode":
    401}}`` and the other stream variants); and, for a provider whose
    ``env_key`` names an unset variable, ``codexErrorInfo: "other"`` with the
    message ``Missing environment variable: `NAME`.`` (its only sign).
    """
    if error is None:
        return False
    info = error.codexErrorInfo
    if info == "unauthorized":
        return True
    if isinstance(info, dict) and any(
        isinstance(detail, dict) and detail.get("httpStatusCode") == 401 for detail in info.values()
    ):
        return True
    return error.message.startswith(_MISSING_ENV_KEY)
