"""No secret in a log file or a recording, and both are the user's alone.

A daemon and an editor's ``serve`` attached to it log at debug level to files while a
prompt is answered with an API key handed to Codex and the daemon's page visited with
its token; then every secret the run used is looked for in those files. A recording of
a session whose client sends MCP servers with secrets (an ``Authorization`` header, an
AWS key pair, a database password) holds none of them. A log file or a recording that
is a symlink is refused.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import msgspec
import pytest
import trio
from websockets.trio.client import connect

from bridge.acp_client import open_agent
from bridge.daemon.daemon import free_port
from bridge.daemon.runtime import PAGE_TOKEN, TOKEN, page_address
from bridge.recording import read_recording, replay
from bridge.recording.format import MessageRecord
from bridge.recording.redact import REDACTED
from bridge.scripted_model import ScriptedModel
from tests.support.codex_home import openai_key_in_the_environment
from tests.support.daemon import ATTACHED, daemon_info, running_daemon
from tests.support.e2e import SCENARIO_SECONDS, record_argv, running_bridge
from tests.support.reading import Ended

pytestmark = pytest.mark.e2e

API_KEY = "sk-proj-" + "Zq8Rt2Uv4Wx6Yz1Ab3Cd5Ef7Gh9" * 2
#: Secrets of the kinds people hand an MCP server or a provider, none in a form any value
#: pattern knows: only their names say what they are.
PROVIDER_KEY = "provider-key-6f1d0c8a2b4e4d7f9a3c5e1b"
MACHINE_TOKEN = "machine-token-3e9b7a1c5d2f4e6a8b0c2d4f"
DB_PASSWORD = "db-password-8c2e4a6b1d3f5a7c9e0b2d4f"
MCP_TOKEN = "mcp-header-token-5a7c9e1b3d5f7a9c1e3b5d7f"
MCP_SERVERS = [
    {
        "name": "db",
        "command": "/nonexistent/mcp-db",
        "args": [],
        "env": [{"name": "DATABASE_PASSWORD", "value": DB_PASSWORD}],
    },
    {
        "type": "http",
        "name": "tickets",
        "url": "http://127.0.0.1:9/mcp",
        "headers": [{"name": "Authorization", "value": f"Bearer {MCP_TOKEN}"}],
    },
]


async def _visit_the_page(address: str) -> None:
    """What a browser does with ``status --url``'s address: the page (with a stray
    ``?token=`` too, which the page ignores), then its WebSocket with the secret from the
    fragment as its first message."""
    url, _, fragment = address.partition("#")
    token = fragment.removeprefix("token=")
    host = url.split("//", 1)[1].rstrip("/")
    name, port = host.rsplit(":", 1)
    stream = await trio.open_tcp_stream(name, int(port))
    async with stream:
        await stream.send_all(
            f"GET /?token={token} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := await stream.receive_some():
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    origin = f"http://{host}"
    async with connect(f"ws://{host}/ws", origin=origin) as socket:
        await socket.send(json.dumps({"type": "token", "token": token}))
        assert json.loads(await socket.recv())["type"] == "hello"


async def test_debug_logs_of_the_daemon_and_serve_hold_no_secret_and_are_private(
    bridge_env: dict[str, str],
    runtime: Path,
    workspace: Path,
    scripted_model: ScriptedModel,
    codex_home: Path,
    stderr_file: Path,
    tmp_path: Path,
) -> None:
    openai_key_in_the_environment(codex_home, scripted_model.base_url, bridge_env, API_KEY)
    daemon_log, serve_log = tmp_path / "daemon-debug.log", tmp_path / "serve-debug.log"
    machine_token = tmp_path / "machine-token"
    machine_token.write_text(MACHINE_TOKEN + "\n")
    debug = ["--log-level", "debug"]
    serve = [sys.executable, "-m", "bridge", "serve", "--runtime-dir", str(runtime), *debug]
    # A machine whose exec-server needs a token (none runs there: registering it is enough)
    # and a secret override, both in the daemon's command line.
    port = free_port()
    daemon = [*debug, "--log-file", str(daemon_log), "--machine", f"box=ws://127.0.0.1:{port}"]
    daemon += ["--machine-token-file", f"box={machine_token}"]
    daemon += ["-c", f'model_providers.mock.http_headers.X-Api-Key="{PROVIDER_KEY}"']
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_daemon(bridge_env, runtime, tmp_path / "daemon.log", *daemon) as (
            _daemon,
            _info,
        ):
            info = await daemon_info(runtime)
            address = page_address(runtime, info)
            assert address is not None
            await _visit_the_page(address)
            argv = [*serve, "--log-file", str(serve_log)]
            with stderr_file.open("ab") as err:
                async with open_agent(argv, env=bridge_env, stderr=err.fileno()) as (client, _):
                    await client.initialize()
                    assert await client.request("authenticate", {"methodId": "api-key"}) == {}
                    opened = await client.request(
                        "session/new", {"cwd": str(workspace), "mcpServers": MCP_SERVERS}
                    )
                    sid = opened["sessionId"]
                    assert await client.prompt(sid, "@@ say hi") == Ended(
                        {"stopReason": "end_turn"}
                    )
            secrets = {
                "the daemon's Codex token": (runtime / TOKEN).read_text().strip(),
                "the page's token": (runtime / PAGE_TOKEN).read_text().strip(),
            }
    assert ATTACHED in stderr_file.read_text() + serve_log.read_text()
    # The key and the override reached Codex, and the model through it.
    assert any(
        r.get("authorization") == f"Bearer {API_KEY}" and r.get("x-api-key") == PROVIDER_KEY
        for r in scripted_model.request_headers
    )
    secrets["the API key"] = API_KEY
    secrets["the provider's key"] = PROVIDER_KEY
    secrets["the machine's token"] = MACHINE_TOKEN
    secrets["an MCP server's password"] = DB_PASSWORD
    secrets["an MCP server's header"] = MCP_TOKEN
    leaks = []
    for log in (daemon_log, serve_log):
        text = log.read_text()
        assert "DEBUG" in text, f"{log.name} logged at debug level"
        for what, secret in secrets.items():
            assert len(secret) >= 20
            # The whole secret, and any long piece of it (a line cut short, a prefix logged).
            pieces = {secret[i : i + 12] for i in range(0, len(secret) - 11, 4)}
            found = [p for p in pieces if p in text]
            if found:
                leaks.append(f"{what} in {log.name}: {_around(text, found[0])}")
    assert not leaks, "\n".join(leaks)
    for log in (daemon_log, serve_log):
        assert stat.S_IMODE(log.stat().st_mode) == 0o600, log.name


def _around(text: str, piece: str) -> str:
    at = text.index(piece)
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start : end if end >= 0 else None][:400]


#: What a client hands its MCP servers: secrets only their names tell (a database password,
#: an AWS key pair, headers), and one that is no secret (kept, as its replay shows).
AWS_KEY_ID = "AKIA" + "Q7R2T5W8Y1B4D6F9"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "9s8d7f6g5h"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789_" + "a1b2c3d4e5" * 6
RECORDED_SERVERS = [
    {
        "name": "warehouse",
        "command": "/nonexistent/mcp-warehouse",
        "args": ["--region", "eu-west-1"],
        "env": [
            {"name": "DATABASE_PASSWORD", "value": DB_PASSWORD},
            {"name": "AWS_ACCESS_KEY_ID", "value": AWS_KEY_ID},
            {"name": "AWS_SECRET_ACCESS_KEY", "value": AWS_SECRET},
            {"name": "WAREHOUSE_MODE", "value": "read-only"},
        ],
    },
    {
        "type": "http",
        "name": "tickets",
        "url": "http://127.0.0.1:9/mcp",
        "headers": [
            {"name": "Authorization", "value": f"Bearer {MCP_TOKEN}"},
            {"name": "X-Api-Key", "value": PROVIDER_KEY},
            {"name": "X-Forwarded-Token", "value": GITHUB_PAT},
        ],
    },
]


async def test_a_recording_keeps_no_secret_of_mcp_servers_and_is_private(
    bridge_env: dict[str, str], workspace: Path, stderr_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "session.codex.jsonl"
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(record_argv(out), bridge_env, stderr_file) as client:
            await client.initialize()
            opened = await client.request(
                "session/new", {"cwd": str(workspace), "mcpServers": RECORDED_SERVERS}
            )
            sid = opened["sessionId"]
            assert await client.prompt(sid, "@@ say hi") == Ended({"stopReason": "end_turn"})
    data = out.read_text()
    secrets = (DB_PASSWORD, AWS_KEY_ID, AWS_SECRET, MCP_TOKEN, PROVIDER_KEY, GITHUB_PAT)
    assert [s for s in secrets if s in data] == []
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "read-only" in data and "WAREHOUSE_MODE" in data and "AWS_SECRET_ACCESS_KEY" in data
    recording = read_recording(out)
    # Both ways the servers went are redacted alike: the client's pairs, Codex's config.
    [thread_start] = [
        message
        for entry in recording.entries
        if isinstance(entry.record, MessageRecord) and entry.record.dir == "to_codex"
        for message in [msgspec.json.decode(entry.record.message)]
        if message.get("method") == "thread/start"
    ]
    config = thread_start["params"]["config"]
    assert config["mcp_servers.warehouse"]["env"] == {
        "DATABASE_PASSWORD": REDACTED,
        "AWS_ACCESS_KEY_ID": REDACTED,
        "AWS_SECRET_ACCESS_KEY": REDACTED,
        "WAREHOUSE_MODE": "read-only",
    }
    assert set(config["mcp_servers.tickets"]["http_headers"].values()) == {REDACTED}
    # And the replay still sends Codex what was recorded, and the client what it received.
    replayed = [msgspec.json.decode(line) for line in replay(recording).lines]
    assert replayed == client.received


async def _refused(args: list[str], env: dict[str, str]) -> str:
    """``codex-acp-bridge ARGS``, expected to stop at once with status 2: its stderr."""
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-m", "bridge", *args],
            env=env,
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    return err


@pytest.mark.parametrize(
    "command",
    [
        ["serve"],
        ["daemon", "--no-page"],
        ["record", "--out", "{other}"],
        ["demo"],
        ["record", "--out", "{link}"],
    ],
    ids=["serve", "daemon", "record", "demo", "record --out"],
)
async def test_a_symlinked_log_file_or_recording_is_refused(
    command: list[str], bridge_env: dict[str, str], tmp_path: Path
) -> None:
    """Another user's link where the file is to be: nothing written where it leads, one
    line that names the file, status 2, before anything starts."""
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    link = tmp_path / "bridge.log"
    link.symlink_to(target)
    other = tmp_path / "other.codex.jsonl"
    args = [a.format(link=link, other=other) for a in command]
    if "{link}" not in command:
        args += ["--log-file", str(link)]
    err = await _refused(args, bridge_env)
    assert err.count("\n") == 1 and str(link) in err and "symbolic link" in err, err
    assert "Traceback" not in err
    assert target.read_text() == "precious\n"
    assert not other.exists()


@pytest.mark.parametrize("option", ["--log-file", "--out"])
async def test_a_hard_linked_log_file_or_recording_is_refused(
    option: str, bridge_env: dict[str, str], tmp_path: Path
) -> None:
    """The name is a second one for a file of this user's: refused as a symbolic link is,
    the file neither emptied, appended to, nor made 0600."""
    target = tmp_path / "zshrc"
    target.write_text("precious\n")
    target.chmod(0o644)
    name = tmp_path / "bridge.out"
    os.link(target, name)
    args = ["record", "--out", str(name) if option == "--out" else str(tmp_path / "r.jsonl")]
    if option == "--log-file":
        args += ["--log-file", str(name)]
    err = await _refused(args, bridge_env)
    assert err.count("\n") == 1 and f"{option}: {name} has 2 hard links" in err, err
    assert target.read_text() == "precious\n" and stat.S_IMODE(target.stat().st_mode) == 0o644
