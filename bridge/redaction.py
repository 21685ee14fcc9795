"""What looks like a secret: names that hold one, values that are one.

Pure rules, shared by recordings (:mod:`bridge.recording.redact`, which walks JSON) and the
logs (:mod:`bridge.logs`, which sees text):

- :func:`secret_key`: a JSON member whose name says it holds a secret (``accessToken``,
  ``apiKey``, ``clientSecret``, ``secretAccessKey``, ``AWS_SECRET_ACCESS_KEY``); its string
  is replaced whole. Narrow on purpose: protocol fields (``sessionId``, ``authMode``,
  ``keyPath``, ``credentialFile``) are left alone, and a number under such a name
  (``totalTokens``) is never touched;
- :func:`secret_name`: the name of an environment variable, an HTTP header or a query
  parameter that holds a secret (``DATABASE_PASSWORD``, ``Authorization``, ``X-Api-Key``,
  ``GITHUB_TOKEN``); wider, because such names are chosen by people, not by a protocol.
  It applies to ACP's ``{name, value}`` pairs and to the maps they become in Codex's config
  (``env``, ``http_headers``, ``headers``, ``query_params``), where the name is all there is
  to go by;
- :func:`redact_values`: credentials by their look, wherever they appear: API keys of the
  usual services, ``Bearer`` values, JSON Web Tokens, private-key blocks, a password in a
  URL, an Azure ``AccountKey=``. Each needs a long run of key material after a fixed prefix,
  so ordinary words and numbers never match.
"""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

# Patterns are compiled at first use (the re module caches them), not at import: every
# start of the bridge imports this module, few of them log anything.
_KEY = (
    r"(?i)(token|secret|passw(or)?d|api_?key|authorization|cookie|credentials?|private_?key"
    r"|session_?key|(access|account|client|signing|encryption|master)_?key)$"
    r"|secret|passw(or)?d"
)

#: A word of a name that says it holds a secret (names split at ``_ - .`` and camelCase).
_SECRET_WORD = (
    r"(?i)pass|pwd|secrets?|keys?|apikey|auth|authn|authz|dsn|.*(password|passwd|passphrase"
    r"|secret|credential|cookie|authorization|apikey|accesskey|privatekey|token).*"
)
#: Words that contain a secret word and are none (``TOKENIZERS_PARALLELISM``).
_PLAIN_WORD = r"(?i)tokeniz.*|.*cookiejar"
_WORDS = r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+"

#: Maps whose keys are names chosen by people (:func:`secret_name`), values beside them.
NAMED_MAPS = frozenset({"env", "http_headers", "headers", "query_params"})


def secret_key(key: str) -> bool:
    """Whether a JSON member named ``key`` holds a secret (its string value, never a number)."""
    return bool(re.search(_KEY, key.replace("-", "_")))


def secret_member(key: str) -> bool:
    """:func:`secret_key`, and a dotted key into a map of names (``-c`` overrides such as
    ``mcp_servers.db.env.DB_PASS``) by :func:`secret_name`."""
    if secret_key(key):
        return True
    head, _, last = key.rpartition(".")
    return bool(head) and head.rpartition(".")[2] in NAMED_MAPS and secret_name(last)


def secret_name(name: str) -> bool:
    """Whether the environment variable, HTTP header or parameter ``name`` holds a secret."""
    if secret_key(name):
        return True
    return any(
        re.fullmatch(_SECRET_WORD, word) and not re.fullmatch(_PLAIN_WORD, word)
        for part in re.split(r"[^A-Za-z0-9]+", name)
        for word in (part, *re.findall(_WORDS, part))
    )


_VALUE = (
    r"sk-[A-Za-z0-9_-]{16,}"  # OpenAI (sk-proj-...) and Anthropic (sk-ant-...) API keys
    r"|Bearer\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWTs
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"
    # Only in recordings made since: the rules above stay as they were, so that the
    # recordings made before replay unchanged.
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|xox[es](?:\.xox[a-z])?-[A-Za-z0-9-]{10,}"  # Slack's refresh and config tokens
    r"|(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"  # AWS access key ids
    r"|AIza[A-Za-z0-9_-]{35}"  # Google API keys
    r"|(?<![A-Za-z0-9])[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}"
    r"|(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|(?<![A-Za-z0-9])hf_[A-Za-z]{30,}"  # Hugging Face
    # Azure's connection strings: the key after its name, the name kept.
    r"|(?<=AccountKey=)[A-Za-z0-9+/]{20,}=*"
    r"|(?<=SharedAccessKey=)[A-Za-z0-9+/]{20,}=*"
    # A password in a URL (postgres://user:PASSWORD@host): the password alone.
    r"|(?<=://)(?P<userinfo>[A-Za-z0-9._~%!$&'()*+,;=-]+:)[^\s/?#@\"'<>]+(?=@)"
)


def _replace(match: re.Match[str]) -> str:
    return (match.group("userinfo") or "") + REDACTED


def redact_values(text: str) -> tuple[str, int]:
    """``text`` with every credential-looking value replaced, and how many were."""
    return re.subn(_VALUE, _replace, text)


# -- text: what a log line holds ---------------------------------------------------------

#: ``Authorization: Bearer …`` (and ``Proxy-Authorization``), as an HTTP header is logged.
_AUTH_HEADER = (
    r"(?i)(?P<head>\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?"
    r"(?:bearer|basic|digest|token|negotiate|aws4-hmac-sha256)\s+)[^\s\"',;]+"
)
#: ``Cookie: a=1; b=2`` and ``Set-Cookie: a=1; Path=/``: every value of a Cookie, the
#: cookie's own of a Set-Cookie (its attributes kept).
_COOKIE_HEADER = r"(?i)(?P<head>\b(?P<set>set-)?cookie\s*:\s*)(?P<value>[^\r\n]*)"
_COOKIE_PAIR = r"(?P<name>[^=;,\s]+)=(?P<value>[^;,\s]*)"
#: ``?token=…``: a query parameter, or an environment variable's ``NAME=value``, whose name
#: holds a secret (:func:`secret_name`); any other ``name=value`` by the narrower
#: :func:`secret_key` (``api_key=…``, not ``auth_mode=…``).
_ASSIGNMENT = (
    r"(?P<head>(?:(?P<query>[?&])|(?<![A-Za-z0-9_.-]))(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)=)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^&#\s\"'<>;,]+)"
)
#: ``"apiKey": "…"`` and ``'token': '…'``: a member of JSON or of a Python mapping's repr.
_MEMBER = (
    r"(?P<head>(?P<q>[\"'])(?P<name>[A-Za-z0-9_.-]+)(?P=q)\s*:\s*(?P<vq>[\"']))"
    r"(?P<value>(?:\\.|(?!(?P=vq)).)*)(?P=vq)"
)


def _auth_header(match: re.Match[str]) -> str:
    return match.group("head") + REDACTED


def _cookie_header(match: re.Match[str]) -> str:
    value = match.group("value")
    count = 1 if match.group("set") else 0
    value = re.sub(_COOKIE_PAIR, lambda m: f"{m.group('name')}={REDACTED}", value, count=count)
    return match.group("head") + value


def _member(match: re.Match[str]) -> str:
    if not match.group("value") or not secret_key(match.group("name")):
        return match.group(0)
    return f"{match.group('head')}{REDACTED}{match.group('vq')}"


def _assignment(match: re.Match[str]) -> str:
    name = match.group("name")
    wide = match.group("query") or name.upper() == name
    if not match.group("value").strip("\"'") or not (secret_name if wide else secret_key)(name):
        return match.group(0)
    return match.group("head") + REDACTED


def redact_text(text: str) -> str:
    """A log line with its secrets replaced: auth headers and cookies, secret-named query
    parameters, assignments and members, then the values :func:`redact_values` knows."""
    text = re.sub(_AUTH_HEADER, _auth_header, text)
    text = re.sub(_COOKIE_HEADER, _cookie_header, text)
    text = re.sub(_MEMBER, _member, text)
    text = re.sub(_ASSIGNMENT, _assignment, text)
    return redact_values(text)[0]


# -- a command line ----------------------------------------------------------------------

#: ``NAME = "value"`` inside a TOML inline table (``-c 'mcp_servers.db.env={DB_PASS="…"}'``).
_TOML_MEMBER = (
    r"(?P<head>(?P<name>[A-Za-z0-9_-]+|\"[^\"]*\")\s*=\s*)(?P<value>\"(?:\\.|[^\"\\])*\"|'[^']*')"
)


def command_line(argv: list[str]) -> str:
    """``argv`` as a log shows it: the value of a ``-c KEY=VALUE`` override that holds a
    secret (an MCP server's token, a provider's header) replaced."""
    shown = []
    override = False
    for arg in argv:
        if override:
            arg = _override(arg)
        override = arg in ("-c", "--config")
        shown.append(arg)
    return " ".join(shown)


def _override(item: str) -> str:
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep:
        return item
    if secret_member(key):
        return f"{key}={REDACTED}"
    if key.rpartition(".")[2] in NAMED_MAPS:

        def member(match: re.Match[str]) -> str:
            name = match.group("name").strip('"')
            return match.group("head") + REDACTED if secret_name(name) else match.group(0)

        value = re.sub(_TOML_MEMBER, member, value)
    return f"{key}={redact_values(value)[0]}"
