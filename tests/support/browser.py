"""Headless Chromium driven over the Chrome DevTools Protocol (a WebSocket), for the page test;
and a stand-in browser for ``status --open`` (:func:`stand_in_browser`).

Debian's ``chromium``; ``scripts/setup`` installs it in the background where it is missing
(``tools/.chromium.started``, then ``tools/.chromium.done`` holding apt's exit status).
:func:`chromium_or_skip` waits for that install, bounded, and skips the test with one line
when there is no Chromium to be had.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import trio
from websockets.trio.client import connect

from .processes import wait_or_kill

ROOT = Path(__file__).resolve().parents[2]
STARTED, DONE, LOG = (ROOT / "tools" / f".chromium.{n}" for n in ("started", "done", "log"))
#: How long the test waits for setup's background install of Chromium.
INSTALL_SECONDS = 240


async def chromium_or_skip() -> str:
    """The path of Chromium, once setup's background install (if any) has ended."""
    found = shutil.which("chromium")
    if found is None and STARTED.exists():
        with trio.move_on_after(INSTALL_SECONDS):
            while not DONE.exists():  # noqa: ASYNC110 (apt says nothing else when it ends)
                await trio.sleep(0.5)
        found = shutil.which("chromium")
    if found is None:
        why = (
            f"its install failed ({LOG})" if DONE.exists() else "scripts/setup installs it as root"
        )
        pytest.skip(f"headless Chromium is not installed: {why}")
    return found


#: What DevTools answers an evaluation that a navigation overtook: the document it was sent to
#: is gone, and the next one is not the answer's to judge.
_NAVIGATED = (
    "Inspected target navigated or closed",
    "Execution context was destroyed",
    "Cannot find context with specified id",
)


class Navigated(RuntimeError):
    """An evaluation answered with the end of its document (the tab navigated meanwhile)."""


class Page:
    """One tab, driven over a flattened DevTools session."""

    def __init__(self, socket: Any, session: str) -> None:
        self._socket = socket
        self._session = session
        self._ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}

    async def _receive_all(self) -> None:
        async for text in self._socket:
            message = json.loads(text)
            channel = self._waiting.pop(message.get("id", -1), None)
            if channel is not None:
                await channel.send(message)

    async def send(
        self, method: str, params: dict[str, Any] | None = None, *, top: bool = False
    ) -> Any:
        ident = next(self._ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[ident] = send
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if not top:
            message["sessionId"] = self._session
        await self._socket.send(json.dumps(message))
        answer = await receive.receive()
        if "error" in answer:
            message = str(answer["error"].get("message", ""))
            kind = Navigated if message.startswith(_NAVIGATED) else RuntimeError
            raise kind(f"{method}: {answer['error']}")
        return answer.get("result")

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, seconds: float = 15.0) -> Any:
        """The value of ``expression`` once it is truthy (checked every 20 ms)."""
        with trio.fail_after(seconds):
            while True:
                # An evaluation sent while the tab navigates may go unanswered, or be answered
                # with the end of its document: asked again, of the next one.
                with trio.move_on_after(1), suppress(Navigated):
                    value = await self.evaluate(expression)
                    # An element comes back as {}: found all the same.
                    if value not in (None, False, 0, ""):
                        return value
                await trio.sleep(0.02)

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", {"url": url})
        await self.wait_for("location.protocol !== 'about:' && document.readyState === 'complete'")

    async def screenshot(self, path: Path) -> None:
        shot = await self.send("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))


@asynccontextmanager
async def headless_chromium(
    binary: str, profile: Path, log: Path, *, width: int = 1100, height: int = 800
) -> AsyncIterator[Page]:
    """Chromium with a fresh profile and one tab (``about:blank``)."""
    argv = [
        binary,
        "--headless=new",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
    ]
    argv += ["--remote-debugging-port=0", f"--user-data-dir={profile}", "--hide-scrollbars"]
    argv += [f"--window-size={width},{height}", "--force-device-scale-factor=1"]
    if os.getuid() == 0:
        argv.append("--no-sandbox")  # Chromium refuses root otherwise
    argv.append("about:blank")
    with log.open("ab") as out:
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
    try:
        port_file = profile / "DevToolsActivePort"
        with trio.fail_after(30):
            while not port_file.exists() or len(port_file.read_text().split()) < 2:  # noqa: ASYNC110
                await trio.sleep(0.05)
        port, path = port_file.read_text().split()[:2]
        async with connect(f"ws://127.0.0.1:{port}{path}", max_size=None) as socket:
            top = Page(socket, "")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(top._receive_all)
                targets = await top.send("Target.getTargets", top=True)
                [tab] = [t for t in targets["targetInfos"] if t["type"] == "page"]
                attached = await top.send(
                    "Target.attachToTarget",
                    {"targetId": tab["targetId"], "flatten": True},
                    top=True,
                )
                page = Page(socket, attached["sessionId"])
                page._waiting = top._waiting  # one reader for the one socket
                page._ids = top._ids
                await page.send("Page.enable")
                await page.send("Runtime.enable")
                yield page
                nursery.cancel_scope.cancel()
    finally:
        if process.poll() is None:
            process.terminate()
            await wait_or_kill(process, 5)


#: A browser, as Python's ``webbrowser`` sees one (``$BROWSER``): it records what it was
#: given and returns, and lives on with that command line, as a browser does.
_STAND_IN = """#!{python}
import json, os, sys, time

pid = os.fork()
if pid:
    with open({record!r}, "a") as record:
        record.write(json.dumps({{"pid": pid, "argv": sys.argv}}) + "\\n")
    sys.exit(0)
os.setsid()
quiet = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(quiet, fd)
time.sleep(120)
"""


class StandIn:
    """What the stand-in browser was asked to open, each time (a line each in ``record``)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.record = folder / "opened.jsonl"
        self.command = str(folder / "browser")
        Path(self.command).write_text(
            _STAND_IN.format(python=sys.executable, record=str(self.record))
        )
        os.chmod(self.command, 0o700)

    def opened(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@asynccontextmanager
async def stand_in_browser(folder: Path) -> AsyncIterator[StandIn]:
    """A stand-in browser (``$BROWSER=stand_in.command``); every one it left running is
    ended when the ``async with`` does."""
    stand_in = StandIn(folder)
    try:
        yield stand_in
    finally:
        for opened in stand_in.opened():
            with suppress(ProcessLookupError):
                os.kill(opened["pid"], signal.SIGTERM)
