"""Keep secrets out of recordings.

Two rules, applied to every string in a recorded message:

- a string under a key that names a secret (``accessToken``, ``apiKey``,
  ``authorization``, ``password``, ``cookie``, ``secret``, ``credential``...)
  is replaced whole; numbers under such keys are left alone, so token *counts*
  (``totalTokens``) survive;
- anything that looks like a credential wherever it appears (``sk-...`` API
  keys, ``Bearer ...`` values, JSON Web Tokens, GitHub and Slack tokens,
  private-key blocks) is replaced in place.

What was redacted is counted, and the recording's header says which rules ran.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[REDACTED]"

_SECRET_KEY = re.compile(
    r"(token|secret|passw(or)?d|api_?key|authorization|cookie|credential|private_?key|session_?key)$",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}"  # OpenAI-style API keys
    r"|Bearer\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWTs
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----)"
)

DESCRIPTION = (
    "strings under secret-named keys (token, secret, password, apiKey, authorization, cookie, "
    "credential, privateKey) replaced whole; sk- API keys, Bearer values, JWTs, GitHub and Slack "
    f"tokens and private-key blocks replaced wherever they appear; all by {REDACTED!r}"
)


class Redactor:
    """Redacts decoded JSON values; :attr:`count` says how many strings it changed."""

    def __init__(self) -> None:
        self.count = 0

    def value(self, value: Any, key: str = "") -> Any:
        if isinstance(value, str):
            if key and _SECRET_KEY.search(_bare(key)) and value:
                self.count += 1
                return REDACTED
            redacted, n = _SECRET_VALUE.subn(REDACTED, value)
            self.count += n
            return redacted
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, key) for v in value]
        return value

    def might_need(self, data: bytes) -> bool:
        """Cheap pre-check on raw bytes: most messages (deltas) need no walk at all."""
        lowered = data.lower()
        return any(marker in lowered for marker in _MARKERS)


def _bare(key: str) -> str:
    return key.replace("-", "_")


# Substrings one of which must occur (case-insensitively) for either rule to fire.
_MARKERS = (
    b"token",
    b"secret",
    b"passw",
    b"key",
    b"authorization",
    b"cookie",
    b"credential",
    b"sk-",
    b"bearer",
    b"eyj",
    b"gh",
    b"xox",
    b"private",
)
