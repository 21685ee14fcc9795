"""The daemon's page without Codex: who may load it (each refusal), what it is sent, which of its
actions go to Codex; and the server itself on loopback, refusing and serving."""

from __future__ import annotations

import json
import os
import ssl
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from websockets.exceptions import InvalidStatus
from websockets.trio.client import connect

from bridge.codex.types import Thread
from bridge.daemon.page import PageOptions, PageRefused, loopback, open_page
from bridge.daemon.page.access import Access, Login, Refuse, Serve, Upgrade, check
from bridge.daemon.page.board import Board, Interrupt, Watch
from bridge.daemon.page.inbox import Answer, Refused
from bridge.daemon.page.server import Hub, serve_page
from bridge.daemon.page.transcript import TAIL_CHARS
from bridge.daemon.picture import Picture
from bridge.daemon.runtime import DaemonInfo, hold_lock, new_page_token, prepare, write_info

TOKEN = "s3cret-token"
PORT = 4242
ACCESS = Access.for_address(TOKEN, PORT)
HOST = f"127.0.0.1:{PORT}"
ORIGIN = f"http://{HOST}"
COOKIE = f"{ACCESS.cookie}={TOKEN}"


# -- access ---------------------------------------------------------------------------


def test_the_token_in_the_url_becomes_a_cookie_and_leaves_the_address() -> None:
    verdict = check(ACCESS, f"/?token={TOKEN}", {"host": HOST})
    assert isinstance(verdict, Login)
    assert verdict.location == "/"
    assert verdict.set_cookie.startswith(f"{COOKIE}; ")
    assert "HttpOnly" in verdict.set_cookie and "SameSite=Strict" in verdict.set_cookie
    assert "Secure" not in verdict.set_cookie
    # Back to one of the page's own paths, never elsewhere.
    for target in (f"/\\evil.example?token={TOKEN}", f"//evil.example/?token={TOKEN}"):
        assert check(ACCESS, target, {"host": HOST}) == Login(verdict.set_cookie, "/")
    tls = Access.for_address(TOKEN, PORT, tls=True)
    secure = check(tls, f"/?token={TOKEN}", {"host": HOST})
    assert isinstance(secure, Login) and secure.set_cookie.endswith("; Secure")


def test_with_the_cookie_the_pages_files_are_served_and_the_socket_opens() -> None:
    for path, name in (("/", "index.html"), ("/page.js", "page.js"), ("/page.css", "page.css")):
        verdict = check(ACCESS, path, {"host": HOST, "cookie": f"other=1; {COOKIE}"})
        assert isinstance(verdict, Serve) and verdict.name == name
    assert check(ACCESS, "/ws", {"host": HOST, "cookie": COOKIE, "origin": ORIGIN}) == Upgrade()
    assert check(ACCESS, "/etc/passwd", {"host": HOST, "cookie": COOKIE}) == Refuse(
        404, "not found"
    )


@pytest.mark.parametrize(
    ("target", "headers", "refusal"),
    [
        ("/", {"host": HOST}, Refuse(401, "no token")),
        ("/ws", {"host": HOST, "origin": ORIGIN}, Refuse(401, "no token")),
        ("/", {"host": HOST, "cookie": f"{ACCESS.cookie}=guess"}, Refuse(403, "wrong token")),
        ("/?token=guess", {"host": HOST}, Refuse(403, "wrong token")),
        (
            "/ws",
            {"host": HOST, "origin": ORIGIN, "cookie": f"{ACCESS.cookie}=x"},
            Refuse(403, "wrong token"),
        ),
        # The token in the URL does not open the socket: only the cookie does.
        (f"/ws?token={TOKEN}", {"host": HOST, "origin": ORIGIN}, Refuse(401, "no token")),
        # DNS rebinding: another site's name resolving to 127.0.0.1.
        ("/", {"host": f"evil.example:{PORT}", "cookie": COOKIE}, Refuse(403, "foreign Host")),
        ("/", {"cookie": COOKIE}, Refuse(403, "foreign Host")),
        ("/", {"host": "127.0.0.1:9999", "cookie": COOKIE}, Refuse(403, "foreign Host")),
        # Another site's script.
        (
            "/ws",
            {"host": HOST, "cookie": COOKIE, "origin": "https://evil.example"},
            Refuse(403, "foreign Origin"),
        ),
        ("/", {"host": HOST, "cookie": COOKIE, "origin": "null"}, Refuse(403, "foreign Origin")),
        ("/ws", {"host": HOST, "cookie": COOKIE}, Refuse(403, "no Origin")),
    ],
)
def test_each_refusal(target: str, headers: dict[str, str], refusal: Refuse) -> None:
    assert check(ACCESS, target, headers) == refusal


def test_only_get_is_answered() -> None:
    for method in ("POST", "PUT", "DELETE", "OPTIONS"):
        assert check(ACCESS, "/", {"host": HOST, "cookie": COOKIE}, method) == Refuse(
            405, "only GET"
        )


def test_a_proxys_origin_is_accepted_when_named() -> None:
    behind = Access.for_address(TOKEN, PORT, extra_origins=["https://box.example"])
    headers = {"host": "box.example", "cookie": COOKIE, "origin": "https://box.example"}
    assert check(behind, "/ws", headers) == Upgrade()
    assert check(ACCESS, "/ws", headers) == Refuse(403, "foreign Host")


# -- the board ------------------------------------------------------------------------


def thread(thread_id: str, status: str = "idle", parent: str | None = None) -> Thread:
    return Thread(
        id=thread_id,
        cwd="/w",
        preview=f"work {thread_id}",
        status={"type": status},
        parentThreadId=parent,
    )


def board_with(*threads: Thread) -> Board:
    picture = Picture()
    for stored in threads:
        picture.seen(stored)
    board = Board(picture)
    board.picture_changed()
    return board


APPROVAL = {
    "threadId": "t1",
    "turnId": "u1",
    "itemId": "i1",
    "reason": "needs the network",
    "command": "curl example.com",
    "cwd": "/w",
}


def test_an_approval_goes_to_the_inbox_and_one_answer_goes_to_codex() -> None:
    board = board_with(thread("t1", "active"))
    view = board.opened()
    assert board.request(7, "item/commandExecution/requestApproval", APPROVAL, now=100.0)
    hello = board.hello(view, {})
    [asked] = hello["inbox"]
    assert asked["requestId"] == 7 and asked["command"] == "curl example.com"
    assert asked["askedAt"] == 100.0 and asked["reason"] == "needs the network"
    assert board.action(view, {"type": "answer", "requestId": 7, "decision": "accept"}) == Answer(
        7, {"decision": "accept"}
    )
    # A second click (or another page) is not sent twice.
    assert isinstance(
        board.action(view, {"type": "answer", "requestId": 7, "decision": "decline"}), Refused
    )
    changed = board.update(view)
    assert changed is not None and changed["inbox"][0]["answered"] is True
    board.notification("serverRequest/resolved", {"threadId": "t1", "requestId": 7}, now=101.0)
    changed = board.update(view)
    assert changed is not None and changed["inbox"] == []


def test_a_request_sent_again_when_the_watcher_subscribes_keeps_when_it_was_asked() -> None:
    board = board_with(thread("t1", "active"))
    waiting = {"type": "active", "activeFlags": ["waitingOnApproval"]}
    board.picture.status("t1", waiting)
    board.notification("thread/status/changed", {"threadId": "t1", "status": waiting}, now=50.0)
    view = board.opened()
    board.request(7, "item/commandExecution/requestApproval", APPROVAL, now=90.0)
    board.request(7, "item/commandExecution/requestApproval", APPROVAL, now=95.0)
    assert [a["askedAt"] for a in board.hello(view, {})["inbox"]] == [50.0]


@pytest.mark.parametrize(
    "action",
    [
        {"type": "answer", "requestId": 99, "decision": "accept"},  # an unknown request
        {"type": "answer", "requestId": 7, "decision": "sure"},
        {"type": "answer", "requestId": 7},
        {"type": "cancel", "threadId": "t1"},  # no turn runs
        {"type": "cancel", "threadId": "nope"},
        {"type": "watch", "threadId": "nope"},
        {"type": "shell", "command": "rm -rf /"},
        ["answer"],
        None,
    ],
)
def test_actions_refused(action: Any) -> None:
    board = board_with(thread("t1", "active"))
    view = board.opened()
    board.request(7, "item/commandExecution/requestApproval", APPROVAL, now=1.0)
    assert isinstance(board.action(view, action), Refused)


def test_a_question_is_answered_with_an_answer_for_each_of_its_questions() -> None:
    board = board_with(thread("t1", "active"))
    view = board.opened()
    questions = [{"id": "color", "header": "Color", "question": "Which?", "options": []}]
    params = {"threadId": "t1", "turnId": "u1", "itemId": "i2", "questions": questions}
    assert board.request(3, "item/tool/requestUserInput", params, now=1.0)
    assert isinstance(
        board.action(view, {"type": "answer", "requestId": 3, "answers": {}}), Refused
    )
    answer = board.action(view, {"type": "answer", "requestId": 3, "answers": {"color": ["Red"]}})
    assert answer == Answer(3, {"answers": {"color": {"answers": ["Red"]}}})
    assert not board.request(4, "item/permissions/requestApproval", params, now=1.0)


def test_a_file_changes_diff_is_shown_with_its_approval() -> None:
    board = board_with(thread("t1", "active"))
    view = board.opened()
    change = {"path": "/w/.git/x", "kind": {"type": "add"}, "diff": "+hi\n"}
    item = {"type": "fileChange", "id": "i9", "changes": [change], "status": "inProgress"}
    board.notification("item/started", {"threadId": "t1", "turnId": "u1", "item": item}, now=1.0)
    board.request(5, "item/fileChange/requestApproval", {**APPROVAL, "itemId": "i9"}, now=1.0)
    [asked] = board.hello(view, {})["inbox"]
    assert asked["kind"] == "patch"
    assert asked["changes"] == [{"path": "/w/.git/x", "kind": "add", "diff": "+hi\n"}]


def test_cancel_names_the_running_turn() -> None:
    board = board_with(thread("t1", "active"))
    view = board.opened()
    board.notification("turn/started", {"threadId": "t1", "turn": {"id": "u1"}}, now=1.0)
    assert board.action(view, {"type": "cancel", "threadId": "t1"}) == Interrupt("t1", "u1")
    board.notification(
        "turn/completed", {"threadId": "t1", "turn": {"id": "u1", "status": "interrupted"}}, now=2.0
    )
    assert isinstance(board.action(view, {"type": "cancel", "threadId": "t1"}), Refused)


def test_a_page_is_sent_only_what_changed_and_the_tail_of_the_thread_it_watches() -> None:
    board = board_with(
        thread("t1", "active"), thread("t2", "idle"), thread("c1", "active", parent="t1")
    )
    view = board.opened()
    hello = board.hello(view, {"pid": 1})
    assert hello["type"] == "hello" and hello["daemon"] == {"pid": 1}
    assert {row["threadId"] for row in hello["threads"]} == {"t1", "t2", "c1"}
    assert [row["parentThreadId"] for row in hello["threads"] if row["threadId"] == "c1"] == ["t1"]
    assert board.update(view) is None  # nothing changed
    delta = {"threadId": "c1", "turnId": "u", "itemId": "m1", "delta": "hello\nworld"}
    board.notification("item/agentMessage/delta", delta, now=5.0)
    update = board.update(view)
    assert update is not None and [row["threadId"] for row in update["threads"]] == ["c1"]
    assert update["threads"][0]["lastLine"] == "world"
    assert "tail" not in update  # no tail watched
    assert board.action(view, {"type": "watch", "threadId": "c1"}) == Watch("c1")
    update = board.update(view)
    assert update is not None
    assert update["tail"] == {
        "threadId": "c1",
        "entries": [{"id": "m1", "kind": "agentMessage", "text": "hello\nworld", "status": ""}],
    }
    board.notification(
        "item/agentMessage/delta", {**delta, "delta": "x" * (TAIL_CHARS * 2)}, now=6.0
    )
    update = board.update(view)
    assert update is not None and len(update["tail"]["entries"][0]["text"]) == TAIL_CHARS


def test_with_no_page_open_the_stream_is_not_even_looked_at() -> None:
    board = board_with(thread("t1", "active"))
    before = board.version
    delta = {"threadId": "t1", "turnId": "u", "itemId": "m1", "delta": "hi"}
    board.notification("item/agentMessage/delta", delta, now=1.0)
    board.notification("thread/tokenUsage/updated", {"threadId": "t1", "tokenUsage": {}}, now=1.0)
    assert board.version == before
    # What a page needs when it opens still counts: since when a thread is in its state.
    board.notification(
        "thread/status/changed", {"threadId": "t1", "status": {"type": "idle"}}, now=2.0
    )
    assert board.version > before


def test_the_watcher_subscribes_to_loaded_threads_while_a_page_is_open() -> None:
    board = board_with(thread("t1", "active"), thread("t2", "idle"), thread("old", "notLoaded"))
    assert board.subscriptions() == ([], [])
    board.opened()
    resume, leave = board.subscriptions()
    assert sorted(resume) == ["t1", "t2"] and leave == []
    assert board.subscriptions() == ([], [])  # asked once
    board.resumed(
        "t1",
        {"model": "m", "thread": {"turns": [{"id": "u1", "status": "inProgress", "items": []}]}},
    )
    board.resumed("t2", {"thread": {"turns": []}})
    board.closed()
    # The last page gone: the idle thread is left, the running one once its turn ends.
    assert board.subscriptions() == ([], ["t2"])
    board.unsubscribed("t2")
    assert board.action(board.opened(), {"type": "cancel", "threadId": "t1"}) == Interrupt(
        "t1", "u1"
    )


def test_rate_limits_are_merged_and_sent() -> None:
    board = board_with()
    view = board.opened()
    board.hello(view, {})
    window = {"usedPercent": 40, "windowDurationMins": 300, "resetsAt": 9}
    board.notification("account/rateLimits/updated", {"rateLimits": {"primary": window}}, now=1.0)
    board.notification("account/rateLimits/updated", {"rateLimits": {"secondary": None}}, now=1.0)
    update = board.update(view)
    assert update is not None and update["limits"] == {"primary": window}


def test_a_page_is_told_each_machines_link_and_each_threads_machine() -> None:
    picture = Picture({"t1": "box"}.get)
    for stored in (thread("t1", "active"), thread("c1", "active", parent="t1"), thread("t2")):
        picture.seen(stored)
    board = Board(picture)
    board.picture_changed()
    box = {"name": "box", "url": "ssh://devbox", "state": "connecting"}
    board.machines_changed([box])
    view = board.opened()
    hello = board.hello(view, {})
    assert hello["machines"] == [box]
    assert {row["threadId"]: row["machine"] for row in hello["threads"]} == {
        "t1": "box",
        "c1": "box",
        "t2": "local",
    }
    board.machines_changed([box])
    assert board.update(view) is None  # the same: nothing to send
    down = {**box, "state": "down", "reason": "ssh: Connection refused"}
    board.machines_changed([down])
    update = board.update(view)
    assert update is not None and update["machines"] == [down] and "threads" not in update


# -- the server, on loopback ------------------------------------------------------------


async def test_the_server_refuses_and_serves(nursery: trio.Nursery) -> None:
    board = board_with(thread("t1", "active"))
    hub = Hub(board, lambda: {"pid": 1})
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    access = Access.for_address(TOKEN, port)
    await nursery.start(serve_page, hub, access, listeners)
    host, cookie = f"127.0.0.1:{port}", f"{access.cookie}={TOKEN}"
    with trio.fail_after(10):
        assert (await _get(port, "/", host, ""))[0] == 401
        assert (await _get(port, "/", host, f"{access.cookie}=nope"))[0] == 403
        assert (await _get(port, "/", f"evil.example:{port}", cookie))[0] == 403
        status, head, _body = await _get(port, f"/?token={TOKEN}", host, "")
        assert status == 303 and f"set-cookie: {cookie};" in head.lower()
        status, head, body = await _get(port, "/", host, cookie)
        assert status == 200 and "content-security-policy: default-src 'none'" in head.lower()
        assert b"<title>Codex agents</title>" in body
        for origin in ("https://evil.example", None):
            headers = [("Cookie", cookie)] + ([("Origin", origin)] if origin else [])
            with pytest.raises(InvalidStatus) as refused:
                async with connect(f"ws://{host}/ws", additional_headers=headers, origin=None):
                    pass
            assert refused.value.response.status_code == 403
        async with connect(
            f"ws://{host}/ws",
            additional_headers=[("Cookie", cookie)],
            origin=f"http://{host}",  # type: ignore[arg-type]
        ) as page:
            hello = json.loads(await page.recv())
            assert hello["type"] == "hello" and hello["threads"][0]["threadId"] == "t1"
            await page.send(json.dumps({"type": "answer", "requestId": 1, "decision": "accept"}))
            assert json.loads(await page.recv())["type"] == "refused"
            # Pushed as it changes, no polling.
            hub.request(2, "item/commandExecution/requestApproval", json.dumps(APPROVAL).encode())
            pushed = json.loads(await page.recv())
            assert [a["requestId"] for a in pushed["inbox"]] == [2]
            assert board.pages == 1
    nursery.cancel_scope.cancel()


async def _get(port: int, target: str, host: str, cookie: str) -> tuple[int, str, bytes]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    lines = [f"GET {target} HTTP/1.1", f"Host: {host}"] + ([f"Cookie: {cookie}"] if cookie else [])
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    await stream.aclose()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode(), body


async def test_the_page_leaves_loopback_only_with_tls(tmp_path: Path) -> None:
    with pytest.raises(PageRefused, match="only with TLS"):
        await open_page(tmp_path, PageOptions(host="0.0.0.0"))
    assert not (tmp_path / "page-token").exists()
    opened = await open_page(tmp_path, PageOptions())
    try:
        assert opened.url.startswith("http://127.0.0.1:") and opened.ssl is None
        assert (tmp_path / "page-token").read_text().strip() == opened.access.token
        assert stat.S_IMODE((tmp_path / "page-token").stat().st_mode) == 0o600
    finally:
        for listener in opened.listeners:
            await listener.aclose()
    assert loopback("localhost") and loopback("::1") and loopback("127.0.0.2")
    assert not loopback("0.0.0.0") and not loopback("box.example")


async def test_the_page_over_tls_sends_a_secure_cookie(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    argv += ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    await trio.run_process(
        [*argv, "-keyout", str(key), "-out", str(cert)],
        capture_stdout=True,
        capture_stderr=True,
    )
    opened = await open_page(tmp_path, PageOptions(tls_cert=str(cert), tls_key=str(key)))
    assert opened.url.startswith("https://127.0.0.1:")
    port = opened.listeners[0].socket.getsockname()[1]
    hub = Hub(board_with(), dict)
    await nursery.start(
        lambda task_status: serve_page(
            hub, opened.access, opened.listeners, ssl=opened.ssl, task_status=task_status
        )
    )
    trusted = ssl.create_default_context(cafile=str(cert))
    with trio.fail_after(10):
        stream = await trio.open_ssl_over_tcp_stream("127.0.0.1", port, ssl_context=trusted)
        request = f"GET /?token={opened.access.token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
        await stream.send_all(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += await stream.receive_some(65536)
        await stream.aclose()
    assert head.startswith(b"HTTP/1.1 303")
    assert b"; Secure" in head and b"SameSite=Strict" in head
    nursery.cancel_scope.cancel()


async def test_status_url_and_open_give_the_pages_address_with_its_secret(tmp_path: Path) -> None:
    runtime = prepare(tmp_path / "runtime")
    argv = [sys.executable, "-m", "bridge", "status", "--runtime-dir", str(runtime)]
    with trio.fail_after(30):
        none = await trio.run_process([*argv, "--url"], capture_stderr=True, check=False)
        assert none.returncode == 1
        assert none.stderr.decode() == f"codex-acp-bridge status: no daemon runs on {runtime}\n"
        info = DaemonInfo(pid=os.getpid(), bridgeVersion="x", state="running")
        write_info(runtime, info)
        with hold_lock(runtime):
            no_page = await trio.run_process([*argv, "--url"], capture_stderr=True, check=False)
            assert no_page.returncode == 1
            assert "serves no page" in no_page.stderr.decode()
            info.pageUrl = "http://127.0.0.1:4242/"
            write_info(runtime, info)
            token = new_page_token(runtime)
            url = await trio.run_process([*argv, "--url"], capture_stdout=True)
            assert url.stdout.decode() == f"http://127.0.0.1:4242/?token={token}\n"
            # --notify opens it (the browser $BROWSER names) with notifications on.
            opened = tmp_path / "opened"
            browser = (
                f"{sys.executable} -c \"import sys; open('{opened}', 'w').write(sys.argv[1])\" %s"
            )
            await trio.run_process([*argv, "--notify"], env={**os.environ, "BROWSER": browser})
            assert opened.read_text() == f"http://127.0.0.1:4242/?token={token}#notify"
