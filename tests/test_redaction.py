"""What counts as a secret (bridge/redaction.py), and the two places it is kept out of:
recordings (the Redactor of bridge/recording/redact.py) and logs (bridge/logs.py's filter,
and the bridge's own log lines); log files and recordings are private files
(bridge/shell/private_file.py)."""

from __future__ import annotations

import logging
import os
import stat
import string
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.frames import Frame, Opcode

from bridge.engine import ToCodex
from bridge.logs import PrivateFileHandler, RedactingFilter, setup_logging
from bridge.recording.redact import DESCRIPTION, REDACTED, Redactor
from bridge.redaction import (
    command_line,
    redact_text,
    redact_values,
    secret_key,
    secret_name,
)
from bridge.shell import effects
from bridge.shell.private_file import RefusedFile, open_private

# -- names ---------------------------------------------------------------------------------

SECRET_NAMES = [
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "DATABASE_PASSWORD",
    "PGPASSWORD",
    "MYSQL_PWD",
    "SMTP_PASS",
    "GITHUB_TOKEN",
    "NPM_AUTH",
    "OPENAI_API_KEY",
    "OPENAI_KEY",
    "STRIPE_APIKEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SESSION_COOKIE",
    "SENTRY_DSN",
    "Authorization",
    "Proxy-Authorization",
    "Cookie",
    "X-Api-Key",
    "X-Auth-Token",
    "x-goog-api-key",
    "clientSecret",
    "apiKey",
]
PLAIN_NAMES = [
    "PATH",
    "HOME",
    "LANG",
    "NODE_ENV",
    "TOKENIZERS_PARALLELISM",
    "GIT_AUTHOR_NAME",
    "KEYBOARD_LAYOUT",
    "MONKEY_MODE",
    "Content-Type",
    "Accept",
    "User-Agent",
    "X-Request-Id",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_a_name_that_holds_a_secret_is_known(name: str) -> None:
    assert secret_name(name)


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_a_plain_name_is_no_secret(name: str) -> None:
    assert not secret_name(name)


@pytest.mark.parametrize(
    "key",
    ["AWS_SECRET_ACCESS_KEY", "secretAccessKey", "DATABASE_PASSWORD", "accessKey", "clientSecret"],
)
def test_members_that_hold_a_secret_though_their_names_do_not_end_in_one(key: str) -> None:
    """Before, a member's name had to end in token/secret/password...: these slipped."""
    assert secret_key(key)


@pytest.mark.parametrize(
    "key",
    # Members of the protocols whose strings a replay needs as they were.
    [
        *("sessionId", "authMode", "keyPath", "tokenUsage", "requiresOpenaiAuth", "name", "value"),
        *("credentialFile", "cliAuthCredentialsStore", "idempotencyKey", "sortKey", "envKey"),
    ],
)
def test_protocol_members_are_no_secret(key: str) -> None:
    assert not secret_key(key)


# -- values --------------------------------------------------------------------------------

#: One of each kind of credential the value rules know, in a form each service issues.
CREDENTIALS = {
    "OpenAI project key": "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2,
    "Anthropic key": "sk-ant-api03-" + "Q1w2E3r4T5y6U7i8O9p0" * 4,
    "AWS access key id": "AKIA" + "IOSFODNN7EXAMPLE",
    "AWS temporary key id": "ASIA" + "Y34FZKBOKMUTVV7A",
    "Google API key": "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "GitHub token": "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a",
    "GitHub fine-grained token": "github_pat_" + "11ABCDEFG0123456789_" + "abcdefghij" * 6,
    "Slack bot token": "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl",
    "Slack refresh token": "xoxe-1-" + "My0xLTEyMzQ1Njc4OTAtMTIz",
    "Slack config token": "xoxe.xoxp-1-" + "Mi0yLTEyMzQ1Njc4OTAtMTIz",
    "Stripe live key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "Stripe restricted key": "rk_live_" + "51H8b2cLkdJ3nQ2xYz0aBcDe",
    "npm token": "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "GitLab token": "glpat-" + "xYz12AbC34dEf56GhI78",
    "Hugging Face token": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEf",
    "JSON Web Token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "bearer value": "Bearer " + "q8Zr2Kd9xLm4Pw7N",
}
#: Credentials inside something larger: what is replaced, what stays.
EMBEDDED = {
    "Azure connection string": (
        "DefaultEndpointsProtocol=https;AccountName=box;AccountKey="
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
        "EndpointSuffix=core.windows.net",
        "AccountKey=[REDACTED];EndpointSuffix",
    ),
    "password in a URL": ("postgres://app:hunter2-xyz@db.internal:5432/app", "app:[REDACTED]@db"),
    "private key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
        REDACTED,
    ),
}


@pytest.mark.parametrize("kind", list(CREDENTIALS))
def test_a_credential_is_replaced_wherever_it_appears(kind: str) -> None:
    secret = CREDENTIALS[kind]
    for text in (secret, f"use {secret} here", f'{{"note": "key={secret}"}}'):
        redacted, count = redact_values(text)
        assert secret not in redacted and count >= 1, (kind, redacted)
        assert secret not in redact_text(text)


@pytest.mark.parametrize("kind", list(EMBEDDED))
def test_a_credential_inside_a_string_leaves_the_rest(kind: str) -> None:
    text, kept = EMBEDDED[kind]
    redacted, count = redact_values(text)
    assert count == 1 and kept in redacted, redacted


#: Words, numbers and identifiers a conversation is made of: never a secret.
_ordinary = st.lists(
    st.one_of(
        st.text(string.ascii_letters, min_size=1, max_size=15),
        st.integers(0, 10**12).map(str),
        st.sampled_from(
            [
                "tokens",
                "token",
                "key",
                "sk-",
                "asia",
                "AKIA",
                "password:",
                "totalTokens",
                "https://example.com/path",
                "ws://127.0.0.1:8080",
                "git@github.com:a/b",
                "user:name",
                "a=b",
                "x-y",
            ]
        ),
    ),
    max_size=30,
).map(" ".join)


@given(_ordinary)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_values(text) == (text, 0)
    assert redact_text(text) == text


@given(
    st.dictionaries(
        st.sampled_from(["totalTokens", "inputTokens", "token", "apiKey", "password", "secret"]),
        st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.none()),
    )
)
def test_numbers_under_secret_names_stay(counts: dict[str, Any]) -> None:
    redactor = Redactor()
    assert redactor.value({"usage": counts}) == {"usage": counts}
    assert redactor.count == 0


@given(st.sampled_from(list(CREDENTIALS.values())), _ordinary, _ordinary)
def test_a_credential_amid_ordinary_text_is_found(secret: str, before: str, after: str) -> None:
    text = f"{before} {secret} {after}"
    assert secret not in redact_values(text)[0]
    assert secret not in redact_text(text)


# -- recordings ----------------------------------------------------------------------------


def test_acp_name_value_pairs_that_name_a_secret_lose_their_value() -> None:
    servers = [
        {
            "name": "db",
            "command": "mcp-db",
            "args": ["--password-file", "/run/db"],
            "env": [
                {"name": "DATABASE_PASSWORD", "value": "hunter2"},
                {"name": "AWS_SECRET_ACCESS_KEY", "value": "wJalrXUtnFEMI/K7MDENG"},
                {"name": "DB_HOST", "value": "db.internal"},
                {"name": "EMPTY_TOKEN", "value": ""},
            ],
        },
        {
            "type": "http",
            "name": "api",
            "url": "https://mcp.example/mcp",
            "headers": [
                {"name": "Authorization", "value": "Basic dXNlcjpwYXNz"},
                {"name": "X-Api-Key", "value": "k-123"},
                {"name": "Accept", "value": "application/json"},
            ],
        },
    ]
    redactor = Redactor()
    message = {"method": "session/new", "params": {"cwd": "/w", "mcpServers": servers}}
    redacted = redactor.value(message)["params"]["mcpServers"]
    assert [e["value"] for e in redacted[0]["env"]] == [REDACTED, REDACTED, "db.internal", ""]
    assert [h["value"] for h in redacted[1]["headers"]] == [REDACTED, REDACTED, "application/json"]
    assert redacted[0]["args"] == ["--password-file", "/run/db"]
    assert redactor.count == 4


def test_maps_of_names_as_codex_takes_them_lose_the_secret_values() -> None:
    """``thread/start``'s config (the client's servers), a ``-c`` override's dotted keys, and
    ``config/read``'s answer: env, http_headers, query_params."""
    redactor = Redactor()
    config = {
        "mcp_servers.db": {"command": "mcp-db", "env": {"PGPASSWORD": "p", "PGHOST": "db"}},
        "mcp_servers.api": {"url": "u", "http_headers": {"Authorization": "a", "Accept": "b"}},
        "mcp_servers.db.env.DB_PASS": "p2",
        "mcp_servers.db.env.DB_USER": "me",
        "model_providers.p.query_params": {"api-version": "2025", "key": "k"},
    }
    assert redactor.value({"params": {"config": config}})["params"]["config"] == {
        "mcp_servers.db": {"command": "mcp-db", "env": {"PGPASSWORD": REDACTED, "PGHOST": "db"}},
        "mcp_servers.api": {
            "url": "u",
            "http_headers": {"Authorization": REDACTED, "Accept": "b"},
        },
        "mcp_servers.db.env.DB_PASS": REDACTED,
        "mcp_servers.db.env.DB_USER": "me",
        "model_providers.p.query_params": {"api-version": "2025", "key": REDACTED},
    }


def test_a_pair_and_the_map_it_becomes_are_redacted_alike() -> None:
    """A replay feeds the engine the redacted pair and compares what it sends Codex,
    redacted, with the recording: both must agree, name by name."""
    for name in [*SECRET_NAMES, *PLAIN_NAMES]:
        pair = Redactor().value({"env": [{"name": name, "value": "v"}]})["env"][0]["value"]
        mapped = Redactor().value({"env": {name: "v"}})["env"][name]
        assert pair == mapped, name


def test_the_description_names_the_new_rules() -> None:
    for word in ("name, value", "http_headers", "AWS", "Google", "Stripe", "npm", "AccountKey"):
        assert word in DESCRIPTION


# -- logs ----------------------------------------------------------------------------------


def _filtered(msg: str, *args: Any, exc: BaseException | None = None) -> str:
    record = logging.LogRecord("websockets.client", logging.DEBUG, __file__, 1, msg, args, None)
    if exc is not None:
        record.exc_info = (type(exc), exc, exc.__traceback__)
    assert RedactingFilter().filter(record)
    formatter = logging.Formatter("%(message)s")
    return formatter.format(record)


CAPABILITY = "HBo7lM3mfYOyosL6AHL8Q3_xo-uUxraVD43h2-R3BLw"


@pytest.mark.parametrize(
    ("msg", "args", "shown"),
    [
        (
            "> %s: %s",
            ("Authorization", f"Bearer {CAPABILITY}"),
            "> Authorization: Bearer [REDACTED]",
        ),
        ("> %s: %s", ("Proxy-Authorization", "Basic dXNlcjpwYXNz"), "Basic [REDACTED]"),
        ("< %s: %s", ("Cookie", f"codex_acp_bridge_4242={CAPABILITY}; theme=dark"), None),
        ("> %s: %s", ("Set-Cookie", f"c={CAPABILITY}; HttpOnly; Path=/"), "; HttpOnly; Path=/"),
        ("> GET %s HTTP/1.1", (f"/?token={CAPABILITY}",), "> GET /?token=[REDACTED] HTTP/1.1"),
        ("open %s", (f"http://127.0.0.1:80/?a=1&access_token={CAPABILITY}#x",), "a=1&access"),
        ("env %s", (f"GITHUB_TOKEN={CAPABILITY} HOME=/root",), "HOME=/root"),
        ("answer %r", ({"apiKey": CAPABILITY, "type": "apiKey"},), "'type': 'apiKey'"),
    ],
)
def test_the_filter_takes_secrets_out_of_any_logger_line(
    msg: str, args: tuple[Any, ...], shown: str | None
) -> None:
    line = _filtered(msg, *args)
    assert CAPABILITY not in line and "dXNlcjpwYXNz" not in line
    assert REDACTED in line
    if shown is not None:
        assert shown in line, line


def test_the_filter_leaves_ordinary_lines_as_they_were() -> None:
    for msg, args in [
        ("ignoring Codex notification %s", ("thread/tokenUsage/updated",)),
        ("turn used %d tokens", (1234,)),
        ("auth_mode=%s, requires auth: %s", ("ApiKey", True)),
        ("> %s: %s", ("Host", "127.0.0.1:4242")),
        ("100% done, no arguments", ()),
    ]:
        plain = logging.LogRecord("x", logging.DEBUG, __file__, 1, msg, args, None)
        assert _filtered(msg, *args) == plain.getMessage()


def test_a_websocket_frame_loses_its_secrets_before_it_is_shortened() -> None:
    """websockets logs a frame by its head and its tail: an API key at the end of
    ``account/login/start`` was in the tail, too short for any value rule to know."""
    key = "sk-proj-" + "Zq8Rt2Uv4Wx6Yz1Ab3Cd5Ef7Gh9" * 2
    for message in [
        {"id": 2, "method": "account/login/start", "params": {"type": "apiKey", "apiKey": key}},
        {"id": 1, "method": "environment/add", "params": {"authBearerToken": key[8:]}},
        {"method": "thread/start", "params": {"config": {"x": {"env": {"DB_PASS": key[8:]}}}}},
    ]:
        frame = Frame(Opcode.TEXT, msgspec.json.encode(message))
        line = _filtered("> %s", frame)
        assert key[-12:] not in line and key[8:20] not in line, line
        assert line.startswith("> TEXT '{"), line
    # A frame that needs nothing is shown as websockets shows it.
    plain = Frame(Opcode.TEXT, b'{"id":1,"method":"thread/list","params":{}}')
    assert _filtered("< %s", plain) == f"< {plain}"


def test_an_exception_logged_with_a_secret_loses_it() -> None:
    try:
        raise ValueError(f"refused Authorization: Bearer {CAPABILITY}")
    except ValueError as exc:
        line = _filtered("connection failed", exc=exc)
    assert "Traceback" in line and "ValueError" in line and CAPABILITY not in line


def test_setup_logging_filters_the_handler_every_logger_reaches(tmp_path: Path) -> None:
    log_file = tmp_path / "bridge.log"
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging("debug", str(log_file))
        logging.getLogger("websockets.client").debug("> Authorization: Bearer %s", CAPABILITY)
        logging.getLogger("bridge.x").info("plain")
        [handler] = root.handlers
        assert isinstance(handler, PrivateFileHandler)
        handler.flush()
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:], level = saved
        root.setLevel(level)
    text = log_file.read_text()
    assert "Bearer [REDACTED]" in text and CAPABILITY not in text and "plain" in text
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600


def test_a_command_line_logged_shows_no_secret_override() -> None:
    argv = ["codex", "app-server", "-c", 'model="o3"', "-c"]
    argv += ['mcp_servers.db.env.DB_PASS="hunter2"', "--config"]
    argv += ['mcp_servers.api.http_headers.X-Api-Key="k-1"', "-c"]
    argv += ['mcp_servers.db.env={DB_PASS="hunter3", MODE="ro"}', "-c", "x=sk-" + "a" * 20]
    shown = command_line(argv)
    for secret in ("hunter2", "hunter3", "k-1", "sk-aaaa"):
        assert secret not in shown
    assert shown.startswith('codex app-server -c model="o3" -c mcp_servers.db.env.DB_PASS=')
    assert 'MODE="ro"' in shown


def test_a_message_dropped_for_want_of_codex_is_logged_by_its_method(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = "sk-proj-" + "Zq8Rt2Uv4Wx6Yz1Ab3Cd5Ef7Gh9"
    message = {
        "id": 2,
        "method": "account/login/start",
        "params": {"type": "apiKey", "apiKey": key},
    }
    with caplog.at_level(logging.DEBUG, logger="bridge.shell.effects"):
        engine: Any = None  # asked nothing: the one effect goes nowhere
        effects.carry_out([ToCodex(msgspec.json.encode(message))], engine, None, print, None)
    assert "dropping account/login/start (id 2)" in caplog.text
    assert "sk-pr" not in caplog.text and "apiKey" not in caplog.text


# -- private files -------------------------------------------------------------------------


def test_a_private_file_is_created_0600_and_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "bridge.log"
    umask = os.umask(0)  # a umask that lets everyone read changes nothing
    try:
        for text in (b"one\n", b"two\n"):
            with os.fdopen(open_private(str(path), append=True), "ab") as f:
                f.write(text)
    finally:
        os.umask(umask)
    assert path.read_bytes() == b"one\ntwo\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_existing_file_of_ones_own_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "session.codex.jsonl"
    path.write_text("old recording\n")
    path.chmod(0o644)
    with os.fdopen(open_private(str(path), append=False), "wb") as f:
        f.write(b"new\n")
    assert path.read_bytes() == b"new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("append", [True, False])
def test_a_symlink_is_never_followed(tmp_path: Path, append: bool) -> None:
    target = tmp_path / "theirs"
    target.write_text("kept\n")
    target.chmod(0o644)
    for name, points_to in (("live", target), ("dangling", tmp_path / "nothing")):
        link = tmp_path / name
        link.symlink_to(points_to)
        with pytest.raises(RefusedFile, match="symbolic link") as refused:
            open_private(str(link), append=append)
        assert str(link) in str(refused.value)
    assert target.read_text() == "kept\n" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert not (tmp_path / "nothing").exists()


def test_what_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(RefusedFile, match="not a regular file"):
        open_private(str(fifo), append=True)  # at once: nobody reads it


def test_another_users_file_is_refused_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bridge.log"
    path.write_text("theirs\n")
    path.chmod(0o666)
    # The file stays this process's; this process takes itself for another user.
    monkeypatch.setattr(os, "geteuid", lambda: path.stat().st_uid + 1)
    with pytest.raises(RefusedFile, match="belongs to another user"):
        open_private(str(path), append=False)
    assert path.read_text() == "theirs\n" and stat.S_IMODE(path.stat().st_mode) == 0o666


@pytest.mark.parametrize("append", [True, False])
def test_a_hard_link_is_refused_untouched(tmp_path: Path, append: bool) -> None:
    """Where the system lets another user link a file of this user's (macOS; Linux with
    ``fs.protected_hardlinks=0``), the name in a shared folder may be a second name for,
    say, ``~/.zshrc``: neither emptied nor appended to nor made 0600."""
    target = tmp_path / "zshrc"
    target.write_text("precious\n")
    target.chmod(0o644)
    path = tmp_path / "bridge.log"
    os.link(target, path)
    with pytest.raises(RefusedFile) as refused:
        open_private(str(path), append=append)
    assert str(refused.value) == (
        f"{path} has 2 hard links (the same file under another name, which writing it would "
        "change): remove it, or name another file"
    )
    assert target.read_text() == "precious\n" and stat.S_IMODE(target.stat().st_mode) == 0o644
