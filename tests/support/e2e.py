"""Running the real bridge (and through it the real Codex) from a test."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import trio

from bridge.acp_client import AcpClient, RequestHandler, default_request_handler, open_agent
from bridge.daemon.runtime import ENV_RUNTIME_DIR
from bridge.recording import TranscriptChecker

from .acp_schema import ConversationValidator
from .app_server import app_server
from .daemon import ATTACHED, running_daemon
from .reading import Ended, text_of

#: Bound for one end-to-end scenario: a hang fails with this, not a CI timeout.
SCENARIO_SECONDS = 90

#: The ways a client's ``serve`` reaches Codex: a Codex of its own over stdio; a running
#: ``codex app-server`` over WebSocket (``--codex-url``); the Codex of a running daemon.
TRANSPORTS = ("stdio", "websocket", "daemon")


@asynccontextmanager
async def running_bridge(
    argv: Sequence[str], env: dict[str, str], log_path: Path, **options: Any
) -> AsyncIterator[AcpClient]:
    """``codex-acp-bridge serve`` as a subprocess, with a client connected to it."""
    with log_path.open("ab") as log:
        async with open_agent(argv, env=env, stderr=log.fileno(), **options) as (client, _process):
            yield client


def assert_valid_acp(client: AcpClient, *, unstable: bool = False, version: int = 1) -> int:
    """Every message the bridge sent validates against the ACP schema of ``version`` and
    keeps the RFD's transcript rules (:mod:`bridge.recording.checker`); returns the count."""
    validator = ConversationValidator(version=version, unstable=unstable)
    checker = TranscriptChecker(subagents=unstable)
    for rid, method in client.sent_requests.items():
        validator.client_sent({"id": rid, "method": method})
        checker.client(
            {"jsonrpc": "2.0", "id": rid, "method": method, "params": client.sent_params[rid]}, 0
        )
    for line, message in enumerate(client.received, start=1):
        validator.agent_sent(message)
        checker.agent(message, line)
    return len(client.received)


def words(n: int) -> str:
    """The text the scripted model streams for ``@@ words n``."""
    from bridge.scripted_model.directives import words_text

    return words_text(n)


async def run_sdk_driver(
    node: str, driver: Path, env: dict[str, str], *args: str, serve: Sequence[str] = ()
) -> tuple[subprocess.CompletedProcess[bytes], list[dict[str, Any]]]:
    """One of the official SDK's drivers (``tools/node/*.mjs``) with ``args``, its agent
    ``codex-acp-bridge serve`` (and ``serve``'s own options): how it ended, and the events
    it printed (one a line)."""
    argv = [node, str(driver), *args, "--timeout-ms", str(SCENARIO_SECONDS * 1000 - 5000)]
    argv += ["--", sys.executable, "-m", "bridge", "serve", *serve]
    with trio.fail_after(SCENARIO_SECONDS):
        result = await trio.run_process(
            argv, env=env, capture_stdout=True, capture_stderr=True, check=False
        )
    return result, decode_lines(result.stdout)


def decode_lines(data: bytes) -> list[dict[str, Any]]:
    return [msgspec.json.decode(line) for line in data.splitlines() if line.strip()]


def record_argv(out: Path) -> list[str]:
    """``codex-acp-bridge record``: ``serve`` that also records its traffic with Codex to ``out``."""
    return [sys.executable, "-m", "bridge", "record", "--out", str(out), "--log-level", "info"]


@dataclass(frozen=True)
class Transport:
    """How the bridge under test is started: its command line and environment."""

    name: str
    argv: list[str]
    env: dict[str, str]


@asynccontextmanager
async def bridge_transport(
    name: str,
    argv: list[str],
    env: dict[str, str],
    *,
    codex_bin: str,
    codex_home: Path,
    tmp_path: Path,
    stderr_file: Path,
) -> AsyncIterator[Transport]:
    """What ``name`` (one of :data:`TRANSPORTS`) needs running around the bridge: nothing for
    stdio; a ``codex app-server`` on a WebSocket, which ``serve --codex-url`` attaches to; a
    daemon on the runtime directory of ``env``, which ``serve`` attaches to by itself (checked
    from its log, ``stderr_file``, at the end)."""
    if name == "stdio":
        yield Transport(name, argv, env)
    elif name == "websocket":
        async with app_server(codex_bin, codex_home, tmp_path) as (url, token_file, _process):
            attach = ["--codex-url", url, "--codex-token-file", str(token_file)]
            yield Transport(name, [*argv[:4], *attach, *argv[4:]], env)
    elif name == "daemon":
        runtime = Path(env[ENV_RUNTIME_DIR])
        async with running_daemon(env, runtime, tmp_path / "daemon.log"):
            yield Transport(name, argv, env)
        assert ATTACHED in stderr_file.read_text(), "serve ran through the daemon"
    else:
        raise ValueError(f"no transport {name!r}: one of {TRANSPORTS}")


@dataclass(eq=False)
class Conversation:
    """A bridge with a client that has said ``initialize`` and opened one session."""

    client: AcpClient
    #: The session ``session/new`` answered with ("" when none was asked for).
    sid: str
    #: ``initialize``'s result.
    init: dict[str, Any]
    #: ``session/new``'s result (empty when none was asked for).
    opened: dict[str, Any]
    version: int
    transport: str
    #: The bridge's process.
    process: trio.Process
    #: What validated on the way out: the number of messages the bridge sent.
    validated: list[int] = field(default_factory=list)

    async def prompt(self, text: str) -> Any:
        return await self.client.prompt(self.sid, text)

    def text(self, kind: str = "agent_message_chunk") -> str:
        return text_of(
            (u["update"] for u in self.client.updates if u["sessionId"] == self.sid), kind
        )

    async def said(self, text: str) -> str:
        """Prompt ``text``, the work ending ``end_turn`` (in v2, once the session is idle
        again); what the agent said in answer."""
        before = len(self.text())
        if self.version == 1:
            assert await self.prompt(text) == Ended({"stopReason": "end_turn"}), text
        else:
            _, ended = await self.client.prompt_v2(self.sid, text)
            assert ended["stopReason"] == "end_turn", (text, ended)
        return self.text()[before:]


#: The ``open_conversation`` fixture: ``open_conversation(**options)`` is a bridge,
#: initialized, with a session, for the span of an ``async with``; every message it sent is
#: validated on the way out (the options: :func:`bridge_conversation`'s).
OpenConversation = Callable[..., AbstractAsyncContextManager[Conversation]]


@asynccontextmanager
async def bridge_conversation(
    transport: Transport,
    version: int,
    log_path: Path,
    cwd: Path,
    *,
    argv: Sequence[str] | None = None,
    env: dict[str, str] | None = None,
    capabilities: dict[str, Any] | None = None,
    on_request: RequestHandler = default_request_handler,
    on_notification: Callable[[str, Any], None] | None = None,
    session: bool = True,
    unstable: bool | None = None,
) -> AsyncIterator[Conversation]:
    """The bridge of ``transport`` (or ``argv``/``env`` in its place), ``initialize``d in ACP
    ``version`` with ``capabilities``, a session opened in ``cwd`` unless ``session`` is false.
    Once the bridge has gone, every message of the conversation is checked with
    :func:`assert_valid_acp` (``unstable``: as for a client of the draft extensions, the
    default for v2)."""
    options: dict[str, Any] = {"on_request": on_request, "on_notification": on_notification}
    argv = transport.argv if argv is None else argv
    env = transport.env if env is None else env
    with log_path.open("ab") as log:
        async with open_agent(argv, env=env, stderr=log.fileno(), **options) as (client, process):
            if version == 1:
                init = await client.initialize(capabilities)
            else:
                init = await client.initialize_v2(capabilities)
            opened: dict[str, Any] = {}
            if session:
                opened = await client.request("session/new", {"cwd": str(cwd), "mcpServers": []})
            sid = opened.get("sessionId", "")
            talk = Conversation(client, sid, init, opened, version, transport.name, process)
            yield talk
    talk.validated.append(
        assert_valid_acp(
            client, unstable=version == 2 if unstable is None else unstable, version=version
        )
    )


async def earlier_session(
    open_conversation: OpenConversation, *prompts: str, **options: Any
) -> Conversation:
    """A conversation over before the test's own begins: a session opened and given each of
    ``prompts`` (each ending ``end_turn``), its bridge (and Codex) gone since; what a client
    restarted later finds is the test's."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(**options) as talk:
            for text in prompts:
                await talk.said(text)
    return talk


@asynccontextmanager
async def returning_client(
    open_conversation: OpenConversation, *prompts: str
) -> AsyncIterator[tuple[str, Conversation]]:
    """The session of :func:`earlier_session` (given ``prompts``), and a client come back
    later: a new conversation with no session of its own, bounded by ``SCENARIO_SECONDS``."""
    sid = (await earlier_session(open_conversation, *prompts)).sid
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(session=False) as talk:
            yield sid, talk


async def watchdog(seconds: float) -> None:
    """Run beside a test (in a fixture's nursery): a test still running after ``seconds``
    fails, the test cancelled (pytest-trio cancels a test whose fixture crashed)."""
    with trio.fail_after(seconds):
        await trio.sleep_forever()
