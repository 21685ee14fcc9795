"""Keep secrets out of recordings.

The rules (:mod:`bridge.redaction`), applied to every string in a recorded message:

- a string under a key that names a secret (``accessToken``, ``apiKey``,
  ``authorization``, ``password``, ``cookie``, ``secret``, ``credential``,
  ``AWS_SECRET_ACCESS_KEY``...) is replaced whole; numbers under such keys are left
  alone, so token *counts* (``totalTokens``) survive;
- an MCP server's environment variable or header that names a secret
  (``DATABASE_PASSWORD``, ``Authorization``, ``X-Api-Key``...) has its value replaced:
  as ACP sends it, a ``{name, value}`` pair (``session/new``'s ``mcpServers``, and
  ``session/load``, ``resume`` and ``fork``), and as Codex takes it, a member of an
  ``env``, ``http_headers``, ``headers`` or ``query_params`` map (``thread/start``'s
  ``mcp_servers.NAME`` config, a provider's headers);
- anything that looks like a credential wherever it appears (API keys of the usual
  services, ``Bearer ...`` values, JSON Web Tokens, AWS access key ids, private-key
  blocks, a password in a URL, Azure's ``AccountKey=``) is replaced in place.

What was redacted is counted, and the recording's header says which rules ran. A
replay redacts what its engine sends Codex by the same rules before comparing it with
the recording.
"""

from __future__ import annotations

from typing import Any

from ..redaction import NAMED_MAPS, REDACTED, redact_values, secret_member, secret_name

__all__ = ["DESCRIPTION", "REDACTED", "Redactor"]

DESCRIPTION = (
    "strings under secret-named keys (token, secret, password, apiKey, authorization, cookie, "
    "credential, privateKey, accessKey, AWS_SECRET_ACCESS_KEY) replaced whole; the values of "
    "secret-named environment variables and headers (PASSWORD, SECRET, TOKEN, KEY, AUTH, "
    "Authorization, Cookie, X-Api-Key...) in {name, value} pairs and in env, http_headers, "
    "headers and query_params maps replaced whole; sk- API keys, Bearer values, JWTs, GitHub "
    "(ghp_, github_pat_), Slack, AWS access key ids, Google API keys, Stripe, npm, GitLab and "
    "Hugging Face tokens, private-key blocks, URL passwords and Azure AccountKey= values "
    f"replaced wherever they appear; all by {REDACTED!r}"
)

#: The members of an ACP ``EnvVariable`` or ``HttpHeader``.
_PAIR = frozenset({"name", "value"})


class Redactor:
    """Redacts decoded JSON values; :attr:`count` says how many strings it changed."""

    def __init__(self) -> None:
        self.count = 0

    def value(self, value: Any, key: str = "", *, named: bool = False) -> Any:
        """``value`` redacted; ``key``: the member it is under, ``named``: of a map whose
        keys are names people chose (an environment, headers)."""
        if isinstance(value, str):
            if value and key and (secret_name(key) if named else secret_member(key)):
                self.count += 1
                return REDACTED
            redacted, n = redact_values(value)
            self.count += n
            return redacted
        if isinstance(value, dict):
            if _is_secret_pair(value):
                return {k: v if k != "value" else self._whole(v) for k, v in value.items()}
            names = bool(key) and key.rpartition(".")[2] in NAMED_MAPS
            return {k: self.value(v, k, named=names) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, key, named=named) for v in value]
        return value

    def _whole(self, value: str) -> str:
        if not value:
            return value
        self.count += 1
        return REDACTED

    def might_need(self, data: bytes) -> bool:
        """Cheap pre-check on raw bytes: most messages (deltas) need no walk at all."""
        lowered = data.lower()
        return any(marker in lowered for marker in _MARKERS)


def _is_secret_pair(value: dict[str, Any]) -> bool:
    """An ACP ``{name, value}`` pair (an MCP server's environment variable or header)
    whose name says it holds a secret."""
    name = value.get("name")
    return (
        isinstance(name, str)
        and isinstance(value.get("value"), str)
        and _PAIR <= value.keys() <= _PAIR | {"_meta"}
        and secret_name(name)
    )


# Substrings one of which must occur (case-insensitively) for any rule to fire.
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
    # The rules since: a pair's or a map's name, the services' prefixes, a URL's password.
    b"pass",
    b"pwd",
    b"auth",
    b"dsn",
    b"akia",
    b"asia",
    b"aiza",
    b"_live_",
    b"_test_",
    b"npm_",
    b"glpat",
    b"hf_",
    b"://",
)
