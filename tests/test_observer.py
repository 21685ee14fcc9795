"""The daemon's watcher of its Codex (``bridge.daemon.observer``) when that Codex dies.

A stand-in Codex on a WebSocket answers the watcher's first listing, then tells it of a
thread it does not know (which the watcher reads) and dies at once. The watch must end
quietly, so the daemon restarts Codex: a read that cannot be sent any more is no error of
the daemon's (it once ended the daemon, and the editors attached to it waited for a
Codex that never came back).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import trio
from websockets.trio.server import ServerConnection, serve

from bridge.daemon.observer import observe
from bridge.daemon.picture import Picture


def _answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """What the stand-in answers: an empty store, nothing loaded."""
    method = message.get("method")
    if "id" not in message:
        return None
    if method == "initialize":
        return {"id": message["id"], "result": {"userAgent": "stand-in/0"}}
    if method in ("thread/list", "thread/loaded/list"):
        return {"id": message["id"], "result": {"data": [], "nextCursor": None}}
    return None


async def test_the_watch_ends_quietly_when_codex_dies_as_a_thread_is_to_be_read() -> None:
    asked: list[str] = []

    async def codex(connection: ServerConnection) -> None:
        while True:
            message = json.loads(await connection.recv())
            asked.append(message.get("method", ""))
            answer = _answer(message)
            if answer is not None:
                await connection.send(json.dumps(answer))
            if message.get("method") == "thread/loaded/list":
                # A sub-agent's thread the watcher has not seen: it reads it... and Codex dies.
                status = {"threadId": "child-1", "status": {"type": "active", "activeFlags": []}}
                await connection.send(
                    json.dumps({"method": "thread/status/changed", "params": status})
                )
                await connection.stream.aclose()  # no close frame: as a killed process
                return

    published: list[int] = []
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]
            await nursery.start(functools.partial(serve, codex, listeners=listeners))
            picture = Picture()
            # Returns (never raises) once the connection is gone.
            await observe(f"ws://127.0.0.1:{port}", "", picture, lambda: published.append(1))
            nursery.cancel_scope.cancel()
    assert asked[:2] == ["initialize", "initialized"]
    assert "thread/loaded/list" in asked


async def test_status_changes_while_codex_does_not_answer_a_read_make_one_read_at_a_time(
    monkeypatch: Any,
) -> None:
    """A thread's status changes again and again while Codex has not answered its read (a
    thread it is busy loading): one read is in flight, not one per change, each left
    waiting as long as Codex lives; and it is given up after a while, task and all."""
    import bridge.daemon.observer as observer_module
    from bridge.shell.census import task_names

    monkeypatch.setattr(observer_module, "READ_SECONDS", 1.0, raising=False)
    reads: list[str] = []
    all_sent = trio.Event()

    async def codex(connection: ServerConnection) -> None:
        while True:
            message = json.loads(await connection.recv())
            if message.get("method") == "thread/read":
                reads.append(message["params"]["threadId"])  # never answered
            answer = _answer(message)
            if answer is not None:
                await connection.send(json.dumps(answer))
            if message.get("method") == "thread/loaded/list":
                for number in range(40):
                    kind = "active" if number % 2 else "idle"
                    status = {"threadId": "child-1", "status": {"type": kind, "activeFlags": []}}
                    await connection.send(
                        json.dumps({"method": "thread/status/changed", "params": status})
                    )
                all_sent.set()

    def reading() -> int:
        return sum(n for name, n in task_names().items() if name.endswith("read_thread"))

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]
            await nursery.start(functools.partial(serve, codex, listeners=listeners))
            nursery.start_soon(observe, f"ws://127.0.0.1:{port}", "", Picture(), lambda: None)
            await all_sent.wait()
            await trio.sleep(0.3)
            assert reading() <= 1 and len(reads) == 1
            await trio.sleep(2.5)  # given up, read once more (it changed meanwhile), given up
            assert reading() == 0 and len(reads) == 2
            nursery.cancel_scope.cancel()
