"""The daemon's live page in a real browser (headless Chromium), against the real daemon and Codex.

One daemon, one browser tab, an editor attached to the daemon; in turn: a running thread
appears; a sub-agent appears under its parent; an approval the editor leaves unanswered is
in the page's inbox within a second of Codex asking (counted in the tab's title, a desktop
notification raised), and a click on "Allow once" completes the
turn (the file is written) while the editor's own request is withdrawn; a question is answered
from the page (the thread "needs input"; the editor's form is withdrawn, Codex gets the answer);
the page's cancel stops a turn. Screenshots of those states are kept in ``docs/images/`` when
``CODEX_ACP_BRIDGE_SCREENSHOTS`` names a folder (docs/operations.md shows them).
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
import os
import re
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
from websockets.trio.client import connect

from bridge.acp_client import AcpClient, open_agent
from bridge.daemon.runtime import read_info
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.browser import chromium_or_skip, headless_chromium, stand_in_browser
from tests.support.daemon import StartDaemon, running_daemon, serve_argv
from tests.support.e2e import SCENARIO_SECONDS
from tests.support.loopback import http_request
from tests.support.reading import Ended
from tests.support.scenarios.approvals import ESCALATED, QUESTION, QUESTIONS_TOML, Answers
from tests.support.scenarios.subagents import SUBAGENTS, script, spawn, wait

pytestmark = pytest.mark.e2e

SHOTS = os.environ.get("CODEX_ACP_BRIDGE_SCREENSHOTS")


NOTIFICATIONS_TO_THE_TEST = """
window.notified = [];
window.Notification = class { constructor(title) { window.notified.push(title); } };
window.Notification.permission = "granted";
document.getElementById("notify").checked = true;
true
"""


def row(thread_id: str) -> str:
    return f"document.querySelector('[data-thread-id=\"{thread_id}\"]')"


async def shot(page: Any, name: str) -> None:
    if SHOTS:
        await page.screenshot(Path(SHOTS) / name)


async def name_for_shots(page: Any, runtime: Path, thread_id: str, name: str) -> None:
    """Only for screenshots: a title a person would give (Codex's is the scripted prompt),
    set as another Codex client would (``thread/name/set`` on the daemon's Codex)."""
    info = read_info(runtime)
    if not SHOTS or info is None:
        return
    token = (runtime / "token").read_text().strip()
    headers = [("Authorization", f"Bearer {token}")]
    async with connect(info.url, additional_headers=headers) as codex:
        await codex.send(
            json.dumps(
                {
                    "id": 1,
                    "method": "initialize",
                    "params": {"clientInfo": {"name": "shots", "version": "1"}},
                }
            )
        )
        await codex.recv()
        await codex.send(json.dumps({"method": "initialized"}))
        await codex.send(
            json.dumps(
                {
                    "id": 2,
                    "method": "thread/name/set",
                    "params": {"threadId": thread_id, "name": name},
                }
            )
        )
        while (answer := json.loads(await codex.recv())).get("id") != 2:
            pass
        assert "result" in answer, answer
    await page.wait_for(f"document.body.innerText.includes({json.dumps(name)})")


async def test_the_page_shows_threads_and_answers_and_cancels_them(
    bridge_env: dict[str, str], workspace: Path, tmp_path: Path, scripted_model: ScriptedModel
) -> None:
    chromium = await chromium_or_skip()
    runtime = tmp_path / "runtime"
    # Codex offers its question tool outside Plan mode only with this.
    write_codex_home(
        Path(bridge_env["CODEX_HOME"]), scripted_model.base_url, extra_toml=QUESTIONS_TOML
    )
    held = Answers(permission="allow_once", hold=True)  # the editor's user never answers
    with trio.fail_after(SCENARIO_SECONDS * 2):
        async with (
            running_daemon(bridge_env, runtime, tmp_path / "daemon.log"),
            headless_chromium(chromium, tmp_path / "profile", tmp_path / "chromium.log") as page,
        ):
            url = await trio.run_process(
                [sys.executable, "-m", "bridge", "status", "--url", "--runtime-dir", str(runtime)],
                env=bridge_env,
                capture_stdout=True,
            )
            address = url.stdout.decode().strip()
            info = read_info(runtime)
            assert info is not None and address.startswith(f"{info.pageUrl}#token=")
            assert info.pageUrl.startswith("http://127.0.0.1:")  # loopback by default
            assert stat.S_IMODE((runtime / "page-token").stat().st_mode) == 0o600
            # `status --notify` hands the browser the file that leads to the page.
            async with stand_in_browser(tmp_path / "browser") as browser:
                notify = [sys.executable, "-m", "bridge", "status", "--notify"]
                env = {**bridge_env, "BROWSER": browser.command}
                await trio.run_process([*notify, "--runtime-dir", str(runtime)], env=env)
                [opened] = browser.opened()
            await page.goto(opened["argv"][1])
            await page.wait_for("document.querySelector('#link.on')")
            # The token left the address bar for the tab's sessionStorage, and no cookie holds
            # it; the notifications asked for are on.
            assert await page.evaluate("location.href") == f"{info.pageUrl}#notify"
            token = (runtime / "page-token").read_text().strip()
            kept = "sessionStorage.getItem('codex-acp-bridge-token')"
            assert await page.evaluate(kept) == token
            cookies = await page.send("Network.getAllCookies")
            assert cookies["cookies"] == []
            assert await page.evaluate("document.getElementById('notify').checked")
            await _a_notification_waits_for_its_threads_title(page)

            with (tmp_path / "editor.log").open("ab") as log:
                async with open_agent(
                    serve_argv(runtime), env=bridge_env, stderr=log.fileno(), on_request=held
                ) as (editor, _process):
                    # An editor that shows forms: it is asked the question too, and never answers.
                    await editor.initialize({**SUBAGENTS, "elicitation": {"form": {}}})
                    await _running_then_child(page, editor, str(workspace), runtime)
                    # A second editor on the same daemon: the page shows both trees at once.
                    async with open_agent(
                        serve_argv(runtime), env=bridge_env, stderr=log.fileno()
                    ) as (second, _second_process):
                        await second.initialize(SUBAGENTS)
                        await _two_editors_two_trees(page, (editor, second), str(workspace))
                    await _approval_answered_on_the_page(
                        page, editor, str(workspace), held, runtime
                    )
                    await _question_answered_on_the_page(
                        page, editor, str(workspace), held, runtime
                    )
                    assert {"answers": {"color": {"answers": ["Blue"]}}} in tool_outputs(
                        scripted_model
                    )
                    await _cancelled_on_the_page(page, editor, str(workspace), runtime)


async def test_status_open_puts_the_pages_secret_in_no_command_line(
    start_daemon: StartDaemon, bridge_env: dict[str, str], runtime: Path, tmp_path: Path
) -> None:
    """Every local user reads every process's command line (``/proc/PID/cmdline``): the
    browser ``status --open`` starts is given a private file that leads to the page."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with (
            start_daemon(),
            stand_in_browser(tmp_path / "browser") as browser,
        ):
            token = (runtime / "page-token").read_text().strip()
            env = {**bridge_env, "BROWSER": browser.command}
            await trio.run_process([sys.executable, "-m", "bridge", "status", "--open"], env=env)
            [opened] = browser.opened()
            # The browser lives on with its command line, as a browser does.
            assert Path(f"/proc/{opened['pid']}/cmdline").exists()
            holding = [cmdline for cmdline in _command_lines() if token.encode() in cmdline]
            assert holding == []
            opener = runtime / "open-page.html"
            assert opened["argv"][1:] == [opener.as_uri()]
            assert stat.S_IMODE(opener.stat().st_mode) == 0o600
            # It leads to the page, the secret in the fragment (sent to no server), which lets
            # the page's socket in.
            [address] = re.findall(r'url=([^"]+)"', opener.read_text())
            info = read_info(runtime)
            assert info is not None and html.unescape(address) == f"{info.pageUrl}#token={token}"
            status, head, body = await _get(info.pageUrl)
            assert status == 200 and "set-cookie:" not in head.lower()
            assert b"<title>Codex agents</title>" in body
            host = urlsplit(info.pageUrl).netloc
            async with connect(f"ws://{host}/ws", origin=f"http://{host}") as socket:  # type: ignore[arg-type]
                await socket.send(json.dumps({"type": "token", "token": token}))
                assert json.loads(await socket.recv())["type"] == "hello"


class Elsewhere:
    """Another server on loopback (another local user's, say), on a port of its own: its
    page loads an image from it, as any page does; every request it gets is kept."""

    PAGE = b'<!doctype html><title>elsewhere</title><img src="/pixel.gif" alt="">'

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.image = trio.Event()

    async def answer(self, stream: trio.SocketStream) -> None:
        data = b""
        with trio.move_on_after(5):
            while b"\r\n\r\n" not in data and (chunk := await stream.receive_some(65536)):
                data += chunk
        self.requests.append(data)
        image = data.startswith(b"GET /pixel.gif ")
        body = b"" if image else self.PAGE
        status = b"204 No Content" if image else b"200 OK"
        head = b"HTTP/1.1 %s\r\nContent-Type: text/html\r\nContent-Length: %d\r\n" % (
            status,
            len(body),
        )
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(head + b"Connection: close\r\n\r\n" + body)
        await stream.aclose()
        if image:
            self.image.set()


async def test_another_server_on_loopback_gets_nothing_of_the_pages_secret(
    start_daemon: StartDaemon, bridge_env: dict[str, str], runtime: Path, tmp_path: Path
) -> None:
    """Browsers keep cookies by host, not port, and "same-site" ignores the port: a cookie
    of the page's would go to every server on 127.0.0.1 the browser visits, with each
    request of its page's. The secret lives in the tab's sessionStorage (the page's origin
    alone, port included) and goes only to the page's WebSocket."""
    chromium = await chromium_or_skip()
    elsewhere = Elsewhere()
    with trio.fail_after(SCENARIO_SECONDS):
        async with (
            start_daemon(),
            headless_chromium(chromium, tmp_path / "profile", tmp_path / "chromium.log") as page,
            trio.open_nursery() as nursery,
        ):
            [listener] = await nursery.start(
                functools.partial(trio.serve_tcp, elsewhere.answer, 0, host="127.0.0.1")
            )
            other = listener.socket.getsockname()[1]
            token = (runtime / "page-token").read_text().strip()
            url = await trio.run_process(
                [sys.executable, "-m", "bridge", "status", "--url"],
                env=bridge_env,
                capture_stdout=True,
            )
            info = read_info(runtime)
            assert info is not None
            await page.goto(url.stdout.decode().strip())
            await page.wait_for("document.querySelector('#link.on')")
            # The user follows a link to the other server, whose page loads its image.
            await page.goto(f"http://127.0.0.1:{other}/")
            with trio.fail_after(10):
                await elsewhere.image.wait()
            # The image its page loads (a same-site request: a cookie of 127.0.0.1 would go
            # with it), then every request it got, the navigation to it included.
            images = [r for r in elsewhere.requests if r.startswith(b"GET /pixel.gif ")]
            assert images and len(elsewhere.requests) >= 2
            for request in images + elsewhere.requests:
                assert token.encode() not in request, request.decode(errors="replace")
                assert b"codex_acp_bridge" not in request, request.decode(errors="replace")
            # Nor can its script read it: the storage is the page's origin's.
            assert await page.evaluate("sessionStorage.length") == 0
            # Back on the page, without the secret in the address: the tab kept it, and a
            # reload keeps it too.
            await page.goto(info.pageUrl)
            await page.wait_for("document.querySelector('#link.on')")
            await page.evaluate("window.beforeReload = true")
            await page.send("Page.reload")
            await page.wait_for("!window.beforeReload && document.querySelector('#link.on')")
            assert await page.evaluate("location.href") == info.pageUrl
            nursery.cancel_scope.cancel()


def _command_lines() -> list[bytes]:
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):  # gone meanwhile
            lines.append(cmdline.read_bytes())
    return lines


async def _get(url: str) -> tuple[int, str, bytes]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return await http_request(parts.port, parts.path, parts.netloc, address=parts.hostname)


@asynccontextmanager
async def prompting(editor: AcpClient, cwd: str, text: str) -> AsyncIterator[tuple[str, list[Any]]]:
    """A new session of ``editor`` in ``cwd``, prompted ``text`` for the span of the
    ``async with`` (which ends once the prompt is answered): the session, and the list its
    answer lands in."""
    session = await editor.new_session(cwd)
    result: list[Any] = []

    async def prompt() -> None:
        result.append(await editor.prompt(session, text))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prompt)
        yield session, result


async def _a_notification_waits_for_its_threads_title(page: Any) -> None:
    """An ask can reach the page before the daemon has read its new thread's first
    message: the desktop notification waits for that title rather than say "untitled",
    and says "untitled" only for a thread that stays so (fed to the page as the daemon
    would send it, so the order is the one that lost the title before)."""
    await page.evaluate(NOTIFICATIONS_TO_THE_TEST)
    ask = {"kind": "command", "command": "ls"}
    rows = [
        {"threadId": f"t-{n}", "state": "requires_action", "title": "", "cwd": "/w"} for n in (1, 2)
    ]
    inbox = [{**ask, "requestId": n, "threadId": f"t-{n}"} for n in (1, 2)]
    await page.evaluate(
        f"receive({json.dumps({'type': 'update', 'threads': rows, 'inbox': inbox})}); true"
    )
    assert await page.evaluate("window.notified") == []
    titled = {**rows[0], "title": "Split the parser"}
    await page.evaluate(f"receive({json.dumps({'type': 'update', 'threads': [titled]})}); true")
    assert await page.evaluate("window.notified") == ["Codex waits on you: Split the parser"]
    # The second thread never gets a title: said as such once the wait is over.
    notified = await page.wait_for("window.notified.length === 2 && window.notified")
    assert notified[1] == "Codex waits on you: untitled"
    gone = {"type": "update", "gone": ["t-1", "t-2"], "inbox": []}
    await page.evaluate(f"receive({json.dumps(gone)}); true")


async def _running_then_child(page: Any, editor: AcpClient, cwd: str, runtime: Path) -> None:
    session = await editor.new_session(cwd)
    prompt = script(
        spawn("@@ words 400 delay_ms=10"), wait(timeout_ms=30_000), "@@ say parent done"
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(editor.prompt, session, prompt)
        await page.wait_for(f"{row(session)}?.dataset.state === 'running'")
        child = await page.wait_for(
            f"{row(session)}?.querySelector('.children [data-thread-id]')?.dataset.threadId"
        )
        assert child != session
        await name_for_shots(page, runtime, session, "Split the parser into modules")
        await name_for_shots(page, runtime, child, "Survey the parser's callers")
        # The child's transcript tail streams while it runs.
        await page.evaluate(f"{row(child)}.querySelector('.row').click()")
        await page.wait_for(
            f"{row(child)}.querySelector('.tail .agentMessage pre')?.textContent.length > 20"
        )
        await shot(page, "page-subagent.png")
        await page.evaluate(f"{row(child)}.querySelector('.row').click()")  # closed again
    await page.wait_for(f"{row(session)}?.dataset.state === 'idle'")


async def _two_editors_two_trees(page: Any, editors: tuple[AcpClient, AcpClient], cwd: str) -> None:
    """Each editor's session spawns a sub-agent at the same time: both roots are on the
    page, each running with its own child under it, then both idle."""
    prompt = script(spawn("@@ words 300 delay_ms=10"), wait(timeout_ms=30_000), "@@ say done")
    sessions = [await editor.new_session(cwd) for editor in editors]
    async with trio.open_nursery() as nursery:
        for editor, session in zip(editors, sessions, strict=True):
            nursery.start_soon(editor.prompt, session, prompt)
        children = []
        for session in sessions:
            await page.wait_for(f"{row(session)}?.dataset.state === 'running'")
            children.append(
                await page.wait_for(
                    f"{row(session)}?.querySelector('.children [data-thread-id]')?.dataset.threadId"
                )
            )
        assert len(set(children)) == 2 and not set(children) & set(sessions)
    for session in sessions:
        await page.wait_for(f"{row(session)}?.dataset.state === 'idle'")


async def _approval_answered_on_the_page(
    page: Any, editor: AcpClient, cwd: str, held: Answers, runtime: Path
) -> None:
    # Desktop notifications on, shown to the test instead of the desktop.
    await page.evaluate(NOTIFICATIONS_TO_THE_TEST)
    async with prompting(editor, cwd, ESCALATED) as (session, result):
        await held.asked.wait()
        asked_at = trio.current_time()
        card = ".ask[data-kind=command]"
        await page.wait_for(f"document.querySelector('{card}')")
        shown_in = trio.current_time() - asked_at
        assert shown_in < 1.0, f"the approval reached the page {shown_in:.2f} s after the editor"
        assert "touch approved.txt" in await page.evaluate(
            f"document.querySelector('{card} pre').textContent"
        )
        assert await page.evaluate("document.title") == "(1) Codex agents"
        [title] = await page.wait_for("window.notified.length && window.notified")
        assert title.startswith("Codex waits on you: @@ call exec_command")
        await name_for_shots(page, runtime, session, "Mark the build approved")
        await shot(page, "page-approval.png")
        if SHOTS:  # as a phone shows it
            metrics = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True}
            await page.send("Emulation.setDeviceMetricsOverride", metrics)
            await shot(page, "page-phone.png")
            await page.send("Emulation.clearDeviceMetricsOverride")
        await page.evaluate(
            f"document.querySelector('{card} button[data-decision=accept]').click()"
        )
    assert result == [Ended({"stopReason": "end_turn"})]
    assert (Path(cwd) / "approved.txt").exists()
    [asked] = [m["id"] for m in editor.received if m.get("method") == "session/request_permission"]
    await editor.wait_for(
        lambda m: m.get("method") == "$/cancel_request" and m["params"]["requestId"] == asked
    )
    await page.wait_for("!document.querySelector('.ask') && document.title === 'Codex agents'")


async def _question_answered_on_the_page(
    page: Any, editor: AcpClient, cwd: str, held: Answers, runtime: Path
) -> None:
    async with prompting(editor, cwd, QUESTION) as (session, result):
        card = ".ask[data-kind=question]"
        await page.wait_for(f"document.querySelector('{card}')")
        await page.wait_for(f"{row(session)}?.textContent.includes('needs input')")
        await name_for_shots(page, runtime, session, "Pick the theme's colour")
        await shot(page, "page-question.png")
        # The option fills the answer, as a person's click on it would.
        await page.evaluate(
            f"[...document.querySelectorAll('{card} button')].find(b => b.textContent === 'Blue').click()"
        )
        await page.evaluate(
            f"[...document.querySelectorAll('{card} button')].find(b => b.textContent === 'Answer').click()"
        )
    assert result == [Ended({"stopReason": "end_turn"})]
    assert len(held.asked_for("elicitation/create")) == 1
    [asked] = [m["id"] for m in editor.received if m.get("method") == "elicitation/create"]
    await editor.wait_for(
        lambda m: m.get("method") == "$/cancel_request" and m["params"]["requestId"] == asked
    )


def tool_outputs(model: ScriptedModel) -> list[Any]:
    """Each tool result Codex sent the model (what the model learned), decoded."""
    outputs: dict[str, Any] = {}
    for body in model.requests:
        for item in body.get("input", []):
            if item.get("type") == "function_call_output":
                outputs.setdefault(item["call_id"], item["output"])
    return [_decoded(output) for output in outputs.values()]


def _decoded(output: str) -> Any:
    try:
        return json.loads(output)
    except ValueError:
        return output  # a command's output


async def _cancelled_on_the_page(page: Any, editor: AcpClient, cwd: str, runtime: Path) -> None:
    async with prompting(editor, cwd, "@@ words 5000 delay_ms=10") as (session, result):
        await page.wait_for(f"{row(session)}?.dataset.state === 'running'")
        await name_for_shots(page, runtime, session, "Write the release notes")
        await page.evaluate(f"{row(session)}.querySelector('.row').click()")
        await page.wait_for(
            f"{row(session)}.querySelector('.tail .agentMessage pre')?.textContent.length > 40"
        )
        await page.wait_for(f"{row(session)}.querySelector('button.cancel')")
        await shot(page, "page-transcript.png")
        await page.evaluate(f"{row(session)}.querySelector('button.cancel').click()")
    assert result == [Ended({"stopReason": "cancelled"})]
    # Idle, saying how its turn ended; its cancel gone with the turn.
    await page.wait_for(f"{row(session)}?.textContent.includes('idle · interrupted')")
    await page.wait_for(f"!{row(session)}.querySelector('button.cancel')")
