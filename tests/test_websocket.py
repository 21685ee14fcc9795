"""The bridge's WebSocket client (``bridge/shell/websocket.py``) against servers made of
websockets' Sans-I/O ``ServerProtocol``: messages each way, a close and its reason, keepalive
pings, TLS. (Codex itself over it: ``tests/test_e2e_transports.py``, the daemon's tests.)"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from bridge.shell import websocket
from bridge.shell.codex_transport import CodexUnavailable, connect_codex

Handler = Callable[[trio.abc.Stream, object], Awaitable[None]]


async def _send_pending(stream: trio.abc.Stream, protocol: object) -> None:
    for data in protocol.data_to_send():  # type: ignore[attr-defined]
        if data:
            await stream.send_all(data)


async def _closed_after_handshake(stream: trio.abc.Stream, protocol: object) -> None:
    """Read until the client's close frame, answer it, and close the socket, as a server
    does once the closing handshake is done."""
    while not protocol.close_expected():  # type: ignore[attr-defined]
        data = await stream.receive_some()
        if not data:
            break
        protocol.receive_data(data)  # type: ignore[attr-defined]
        await _send_pending(stream, protocol)
    await stream.aclose()


async def _serve(
    handler: Handler,
    *,
    task_status: trio.TaskStatus[int],
    tls: ssl.SSLContext | None = None,
) -> None:
    """A WebSocket server on 127.0.0.1: the handshake accepted, then ``handler``."""
    from websockets.http11 import Request
    from websockets.server import ServerProtocol

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")

    async def handle(stream: trio.abc.Stream) -> None:
        if tls is not None:
            stream = trio.SSLStream(stream, tls, server_side=True)
        protocol = ServerProtocol()
        requests: list[Request] = []
        # A client that refused the certificate, or left: the next one is served.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while not requests:
                protocol.receive_data(await stream.receive_some())
                requests = [e for e in protocol.events_received() if isinstance(e, Request)]
            protocol.send_response(protocol.accept(requests[0]))
            await _send_pending(stream, protocol)
            await handler(stream, protocol)

    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


async def _echo_then_close(stream: trio.abc.Stream, protocol: object) -> None:
    """Echo one message, then close: going away."""
    from websockets.frames import Frame

    while True:
        protocol.receive_data(await stream.receive_some())  # type: ignore[attr-defined]
        frames = [e for e in protocol.events_received() if isinstance(e, Frame)]  # type: ignore[attr-defined]
        if frames:
            break
    protocol.send_text(frames[0].data)  # type: ignore[attr-defined]
    protocol.send_close(1001, "going away")  # type: ignore[attr-defined]
    await _send_pending(stream, protocol)
    await _closed_after_handshake(stream, protocol)


async def test_a_message_each_way_then_the_servers_close_and_its_reason(
    nursery: trio.Nursery,
) -> None:
    port = await nursery.start(_serve, _echo_then_close)
    with trio.fail_after(10):
        async with connect_codex(f"ws://127.0.0.1:{port}") as connection:
            await connection.stream.send(b'{"id":1}')
            assert await connection.stream.receive() == b'{"id":1}'
            with pytest.raises(trio.EndOfChannel, match="going away"):
                await connection.stream.receive()
            assert "going away" in await connection.exit_reason()
            with pytest.raises(trio.BrokenResourceError):
                await connection.stream.send(b'{"id":2}')


async def _silent(stream: trio.abc.Stream, protocol: object) -> None:
    """Reads nothing, answers nothing: a peer that went away without closing its socket."""
    await trio.sleep_forever()


async def test_a_server_that_answers_no_ping_is_given_up_on(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(websocket, "PING_INTERVAL", 0.01)
    monkeypatch.setattr(websocket, "PING_TIMEOUT", 0.01)
    port = await nursery.start(_serve, _silent)
    with trio.fail_after(10):
        async with connect_codex(f"ws://127.0.0.1:{port}") as connection:
            with pytest.raises(trio.EndOfChannel, match="keepalive ping timeout"):
                await connection.stream.receive()


async def test_a_server_that_answers_pings_keeps_its_connection(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    from websockets.frames import Frame, Opcode

    monkeypatch.setattr(websocket, "PING_INTERVAL", 0.01)
    pinged = 0
    three = trio.Event()

    async def answering(stream: trio.abc.Stream, protocol: object) -> None:
        nonlocal pinged
        while data := await stream.receive_some():
            protocol.receive_data(data)  # type: ignore[attr-defined]
            for event in protocol.events_received():  # type: ignore[attr-defined]
                if isinstance(event, Frame) and event.opcode is Opcode.PING:
                    pinged += 1
                elif isinstance(event, Frame) and event.opcode is Opcode.TEXT:
                    protocol.send_text(event.data)  # type: ignore[attr-defined]
            await _send_pending(stream, protocol)  # its pongs among them
            if pinged >= 3:
                three.set()
            if protocol.close_expected():  # type: ignore[attr-defined]
                await stream.aclose()
                return

    port = await nursery.start(_serve, answering)
    with trio.fail_after(10):
        async with connect_codex(f"ws://127.0.0.1:{port}") as connection:
            await three.wait()
            await connection.stream.send(b"{}")
            assert await connection.stream.receive() == b"{}"


async def test_wss_checks_the_servers_certificate(
    tmp_path: Path, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    argv += ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    await trio.run_process(
        [*argv, "-keyout", str(key), "-out", str(cert)], capture_stdout=True, capture_stderr=True
    )
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(str(cert), str(key))

    async def echo(stream: trio.abc.Stream, protocol: object) -> None:
        await _echo_then_close(stream, protocol)

    port = await nursery.start(lambda task_status: _serve(echo, task_status=task_status, tls=tls))
    url = f"wss://127.0.0.1:{port}"
    with trio.fail_after(10):
        with pytest.raises(CodexUnavailable, match="certificate verify failed"):
            async with connect_codex(url):
                pass
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the system's trust, for this test
        async with connect_codex(url) as connection:
            await connection.stream.send(b'{"id":1}')
            assert await connection.stream.receive() == b'{"id":1}'
