"""The round trip with a Codex started as ``serve`` starts it: ``initialize``, ``account/read``,
and what Codex makes of its config (``config/read``, else a trial ``thread/start``)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio
from msgspec import Raw

from .. import __version__
from ..codex import palette as codex_palette
from ..codex import types as codex_types
from ..engine.core import AGENT_NAME
from ..jsonrpc import peer as rpc
from ..shell.codex_transport import (
    CodexUnavailable,
    spawn_codex,
)
from ..shell.streams import MessageStream, MessageTooLarge
from .findings import (
    CodexWarning,
    ConfigTrial,
    Handshake,
)

#: How long Codex may take to answer ``initialize`` (its start included), then ``account/read``.
HANDSHAKE_SECONDS = 10.0


class _InitializeAnswer(msgspec.Struct):
    userAgent: str = ""


class _Warning(msgspec.Struct):
    summary: str
    details: str | None = None
    path: str | None = None


#: What Codex sends while it starts that the user should read.
_WARNINGS = ("configWarning", "deprecationNotice")


class _Conversation:
    """Requests to Codex, one at a time, each read up to its answer; what Codex says
    meanwhile is kept (its warnings) or declined (its requests)."""

    def __init__(self, stream: MessageStream) -> None:
        self.stream = stream
        self.peer = rpc.Peer[str](jsonrpc_member=False)
        self.warnings: list[CodexWarning] = []
        #: The first line of Codex's stdout that was not JSON-RPC (a binary that is not
        #: Codex's app-server prints something else).
        self.stray: str | None = None

    async def call(self, method: str, params: Any) -> Raw | rpc.ErrorObject:
        rid, data = self.peer.request(method, params, method)
        await self.stream.send(data)
        while True:
            data = await self.stream.receive()
            message = self.peer.receive(data)
            if isinstance(message, rpc.IncomingResponse) and message.id == rid:
                return message.result
            if isinstance(message, rpc.IncomingError) and message.id == rid:
                return message.error
            if isinstance(message, rpc.IncomingNotification) and message.method in _WARNINGS:
                self._warned(message.params)
            elif isinstance(message, rpc.IncomingRequest):
                await self.stream.send(
                    self.peer.error(message.id, -32601, "codex-acp-bridge doctor answers nothing")
                )
            elif isinstance(message, rpc.Invalid) and self.stray is None:
                self.stray = data.decode(errors="replace")[:200]

    async def notify(self, method: str) -> None:
        await self.stream.send(self.peer.notification(method))

    async def drain(self) -> None:
        """Read what Codex wrote before it ended: a process that exits at once closes its
        stdin before our request is written, and what it printed is the clue."""
        with trio.move_on_after(1):
            while True:
                try:
                    data = await self.stream.receive()
                except _ENDED:
                    return
                if isinstance(self.peer.receive(data), rpc.Invalid) and self.stray is None:
                    self.stray = data.decode(errors="replace")[:200]

    def _warned(self, params: Raw) -> None:
        try:
            said = msgspec.json.decode(params, type=_Warning)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        self.warnings.append(CodexWarning(said.summary, said.details, said.path))


_ENDED = (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError, MessageTooLarge)


async def shake_hands(binary: str, *, seconds: float = HANDSHAKE_SECONDS) -> Handshake:
    """Start ``codex app-server`` as ``serve`` does, ``initialize`` it, ask ``account/read``,
    and stop it (with everything it started: :func:`spawn_codex` sees to it)."""
    started = time.monotonic()
    try:
        async with spawn_codex(binary) as connection:
            talk = _Conversation(connection.stream)
            params = codex_types.InitializeParams(
                clientInfo=codex_types.ClientInfo(name=AGENT_NAME, version=__version__),
                capabilities=codex_types.InitializeCapabilities(experimentalApi=True),
            )
            try:
                with trio.fail_after(seconds):
                    answer = await talk.call("initialize", params)
            except trio.TooSlowError:
                why = f"no answer to initialize within {seconds:g} s"
                return Handshake(time.monotonic() - started, failure=why)
            except _ENDED:
                await talk.drain()
                why = await connection.exit_reason()
                if talk.stray is not None:
                    why += f" (it printed {talk.stray!r}, not JSON-RPC)"
                return Handshake(time.monotonic() - started, failure=why)
            took = time.monotonic() - started
            if isinstance(answer, rpc.ErrorObject):
                return Handshake(took, failure=f"Codex refused initialize: {answer.message}")
            try:
                agent = msgspec.json.decode(answer, type=_InitializeAnswer).userAgent
            except (msgspec.DecodeError, msgspec.ValidationError):
                agent = ""
            account, account_failure = await _read_account(talk, seconds, connection.exit_reason)
            config = await _try_config(talk, seconds)
            return Handshake(
                took,
                user_agent=agent,
                account=account,
                account_failure=account_failure,
                warnings=tuple(talk.warnings),
                config=config,
            )
    except CodexUnavailable as exc:
        return Handshake(time.monotonic() - started, failure=str(exc))


class _ConfigReadParams(msgspec.Struct, omit_defaults=True):
    includeLayers: bool = False


class _TrialStartParams(msgspec.Struct):
    """``thread/start`` as ``serve`` sends it, but ephemeral: Codex keeps nothing of it."""

    cwd: str
    ephemeral: bool = True


async def _try_config(talk: _Conversation, seconds: float) -> ConfigTrial | None:
    """What Codex makes of its config: ``config/read`` (it starts nothing), and when that
    fails, what ``serve``'s first ``session/new`` would meet: ``thread/start``, in an empty
    temporary folder. ``None``: Codex could not be asked (gone, silent, or too old for
    ``config/read``)."""
    try:
        with trio.fail_after(seconds):
            read = await talk.call("config/read", _ConfigReadParams())
            if not isinstance(read, rpc.ErrorObject):
                return ConfigTrial()
            if read.code == -32601:  # a Codex without config/read: not asked
                return None
            with tempfile.TemporaryDirectory(prefix="codex-acp-bridge-doctor-") as cwd:
                started = await talk.call("thread/start", _TrialStartParams(cwd=cwd))
    except (trio.TooSlowError, *_ENDED):
        return None
    failure = _one_line(started.message) if isinstance(started, rpc.ErrorObject) else None
    return ConfigTrial(read_error=_one_line(read.message), session_error=failure)


def _one_line(text: str) -> str:
    return " ".join(text.split())


async def _read_account(
    talk: _Conversation, seconds: float, exit_reason: Callable[[], Awaitable[str]]
) -> tuple[codex_palette.AccountReadResult | None, str | None]:
    try:
        with trio.fail_after(seconds):
            await talk.notify("initialized")
            answer = await talk.call("account/read", codex_palette.NoParams())
    except trio.TooSlowError:
        return None, f"no answer to account/read within {seconds:g} s"
    except _ENDED:
        return None, await exit_reason()
    if isinstance(answer, rpc.ErrorObject):
        return None, f"account/read failed: {answer.message}"
    try:
        return msgspec.json.decode(answer, type=codex_palette.AccountReadResult), None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return None, f"account/read answered something else: {exc}"
