"""A small ACP client: the ``demo`` command's client, and the tests' client.

It launches an agent (normally ``codex-acp-bridge serve``) as a subprocess and
speaks ACP to it over its stdin/stdout, using the same JSON-RPC peer as the
bridge. Every message the agent sends is kept in :attr:`AcpClient.received`
(decoded), so tests can check the whole conversation, schema and all.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import msgspec
import trio

from .acp import said
from .jsonrpc import (
    ErrorCode,
    IncomingError,
    IncomingNotification,
    IncomingRequest,
    IncomingResponse,
    Peer,
    RpcError,
)
from .shell.codex_transport import close_and_wait
from .shell.streams import LineStream, MessageStream

log = logging.getLogger(__name__)

RequestHandler = Callable[[str, Any], Awaitable[Any]]


@dataclass(eq=False)
class _Call:
    method: str
    done: trio.Event = field(default_factory=trio.Event)
    result: Any = None
    error: RpcError | None = None


async def default_request_handler(method: str, params: Any) -> Any:
    """Decline what an unattended client cannot do: permissions are cancelled."""
    if method == "session/request_permission":
        return {"outcome": {"outcome": "cancelled"}}
    raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"client does not support {method}")


class AcpClient:
    """The client end of one ACP connection. Run :meth:`run` in a nursery."""

    def __init__(
        self,
        stream: MessageStream,
        *,
        on_request: RequestHandler = default_request_handler,
        on_notification: Callable[[str, Any], None] | None = None,
    ) -> None:
        self.stream = stream
        self.peer = Peer[_Call](jsonrpc_member=True)
        self.on_request = on_request
        self.on_notification = on_notification
        #: Every message received from the agent, decoded, in arrival order.
        self.received: list[dict[str, Any]] = []
        #: ``session/update`` params, in arrival order.
        self.updates: list[dict[str, Any]] = []
        #: The method and params of every request this client sent, by id.
        self.sent_requests: dict[Any, str] = {}
        self.sent_params: dict[Any, Any] = {}
        self._arrived = trio.lowlevel.ParkingLot()
        self.closed = False

    async def run(self) -> None:
        """Read until the agent closes its output; answers the agent's requests."""
        async with trio.open_nursery() as nursery:
            while True:
                try:
                    data = await self.stream.receive()
                except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                    break
                self.received.append(msgspec.json.decode(data))
                self._handle(data, nursery)
                self._arrived.unpark_all()
        self.closed = True
        for _rid, call in self.peer.abandon_pending():
            call.error = RpcError(ErrorCode.INTERNAL_ERROR, "agent closed the connection")
            call.done.set()
        self._arrived.unpark_all()

    def _handle(self, data: bytes, nursery: trio.Nursery) -> None:
        msg = self.peer.receive(data)
        if isinstance(msg, IncomingResponse):
            msg.context.result = msgspec.json.decode(msg.result)
            msg.context.done.set()
        elif isinstance(msg, IncomingError):
            err = msg.error
            msg.context.error = RpcError(err.code, err.message, err.data)
            msg.context.done.set()
        elif isinstance(msg, IncomingNotification):
            params = msgspec.json.decode(msg.params) if msg.params else None
            if msg.method == "session/update" and isinstance(params, dict):
                self.updates.append(params)
            if self.on_notification is not None:
                self.on_notification(msg.method, params)
        elif isinstance(msg, IncomingRequest):
            nursery.start_soon(self._answer, msg)
        else:
            log.warning("agent sent an invalid message: %s", msg.reason)

    async def _answer(self, msg: IncomingRequest) -> None:
        params = msgspec.json.decode(msg.params) if msg.params else None
        try:
            result = await self.on_request(msg.method, params)
        except RpcError as exc:
            await self.stream.send(self.peer.error(msg.id, exc.code, exc.message, exc.data))
        else:
            await self.stream.send(self.peer.response(msg.id, result))

    async def request(self, method: str, params: Any, *, sent: trio.Event | None = None) -> Any:
        """Send a request and wait for its result; an error response raises ``RpcError``.
        ``sent`` is set once the request is written: what is sent after that reaches the
        agent after it, whichever task sends it."""
        call = _Call(method)
        rid, data = self.peer.request(method, params, call)
        self.sent_requests[rid] = method
        self.sent_params[rid] = params
        await self.stream.send(data)
        if sent is not None:
            sent.set()
        await call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result

    async def request_and_cancel(self, method: str, params: Any) -> Any:
        """Send a request and, right behind it, ``$/cancel_request`` for it; wait for its
        answer (a result, or the error raised as :meth:`request` raises it)."""
        call = _Call(method)
        rid, data = self.peer.request(method, params, call)
        self.sent_requests[rid] = method
        self.sent_params[rid] = params
        await self.stream.send(data)
        await self.notify("$/cancel_request", {"requestId": rid})
        await call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result

    async def notify(self, method: str, params: Any) -> None:
        await self.stream.send(self.peer.notification(method, params))

    async def send_raw(self, data: bytes) -> None:
        """Send bytes as one message, valid or not (for testing bad input)."""
        await self.stream.send(data)

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Wait until a received message satisfies ``predicate``; return it."""
        return await self.wait_for_index(0, predicate)

    # -- conveniences for the common calls ---------------------------------------------

    async def initialize(self, capabilities: dict[str, Any] | None = None) -> Any:
        return await self.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": capabilities
                if capabilities is not None
                else {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
                "clientInfo": {"name": "codex-acp-bridge-client", "version": "1"},
            },
        )

    async def initialize_v2(self, capabilities: dict[str, Any] | None = None) -> Any:
        """``initialize`` asking for ACP v2 (the draft)."""
        return await self.request(
            "initialize",
            {
                "protocolVersion": 2,
                "info": {"name": "codex-acp-bridge-client", "version": "1"},
                "capabilities": capabilities or {},
            },
        )

    async def new_session(self, cwd: str) -> str:
        result = await self.request("session/new", {"cwd": cwd, "mcpServers": []})
        return str(result["sessionId"])

    async def prompt(self, session_id: str, text: str, *, sent: trio.Event | None = None) -> Any:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return await self.request("session/prompt", params, sent=sent)

    async def prompt_v2(self, session_id: str, text: str) -> tuple[str, dict[str, Any]]:
        """ACP v2: send a prompt, then wait for the session's work to end. Returns the
        inserted user message's id and the ``idle`` state update that ended the work."""
        # The session's earlier work has ended (or never was): any idle from here on is this one's.
        start = len(self.received)
        result = await self.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )
        message = await self.wait_for_index(
            start,
            lambda m: (
                m.get("method") == "session/update"
                and m["params"]["sessionId"] == session_id
                and m["params"]["update"]["sessionUpdate"] == "state_update"
                and m["params"]["update"]["state"] == "idle"
            ),
        )
        return str(result["messageId"]), message["params"]["update"]

    async def wait_for_index(
        self, start: int, predicate: Callable[[dict[str, Any]], bool]
    ) -> dict[str, Any]:
        """Like :meth:`wait_for`, among the messages received from index ``start`` on."""
        seen = max(0, start)
        while True:
            for message in self.received[seen:]:
                if predicate(message):
                    return message
            seen = max(seen, len(self.received))
            if self.closed:
                raise trio.EndOfChannel("agent closed the connection")
            await self._arrived.park()

    def text_of(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        """All the text one kind of update said in a session, concatenated
        (:func:`bridge.acp.said.text_of`)."""
        return said.text_of(
            (u["update"] for u in self.updates if u["sessionId"] == session_id), kind
        )


@asynccontextmanager
async def open_agent(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stderr: int | None = None,
    on_request: RequestHandler = default_request_handler,
    on_notification: Callable[[str, Any], None] | None = None,
) -> AsyncIterator[tuple[AcpClient, trio.Process]]:
    """Launch an ACP agent and connect a client to it.

    On exit the agent's stdin is closed (ACP's way of saying goodbye); the
    agent gets a few seconds to exit, then is killed.
    """
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=dict(os.environ if env is None else env),
    )
    assert process.stdin is not None and process.stdout is not None
    client = AcpClient(
        LineStream(process.stdout, process.stdin),
        on_request=on_request,
        on_notification=on_notification,
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.run)
        try:
            yield client, process
        finally:
            with trio.CancelScope(shield=True):
                await close_and_wait(process, close=1, wait=10)
                if process.poll() is None:
                    process.kill()
                    await process.wait()
            nursery.cancel_scope.cancel()
