"""The daemon's page without Codex: who may load it (each refusal), what it is sent, which of its
actions go to Codex; and the server itself on loopback, refusing and serving."""

from __future__ import annotations

import html
import json
import logging
import os
import ssl
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.trio.client import connect

from bridge.codex.types import Thread
from bridge.daemon.page import PageOptions, PageRefused, loopback, open_page, server
from bridge.daemon.page.access import Access, Refuse, Serve, Upgrade, admit, check
from bridge.daemon.page.actions import read_action
from bridge.daemon.page.board import Board, Interrupt, Outcome, View, Watch
from bridge.daemon.page.inbox import Answer, Refused
from bridge.daemon.page.server import MAX_ACTION, Hub, serve_page
from bridge.daemon.page.transcript import TAIL_CHARS
from bridge.daemon.picture import Picture
from bridge.daemon.runtime import DaemonInfo, hold_lock, new_page_token, prepare, write_info
from tests.support.browser import stand_in_browser
from tests.support.loopback import http_request
from tests.support.picture import thread

TOKEN = "s3cret-token"
PORT = 4242
ACCESS = Access.for_address(TOKEN, PORT)
HOST = f"127.0.0.1:{PORT}"
ORIGIN = f"http://{HOST}"
SECRET = json.dumps({"type": "token", "token": TOKEN})


# -- access ---------------------------------------------------------------------------


def test_the_pages_files_are_served_without_the_secret_and_the_socket_opens() -> None:
    """The files hold no data: no secret asks for them, and none is given in a cookie."""
    for path, name in (("/", "index.html"), ("/page.js", "page.js"), ("/page.css", "page.css")):
        verdict = check(ACCESS, path, {"host": HOST})
        assert isinstance(verdict, Serve) and verdict.name == name
        # A secret in the URL is no different, right or wrong: ignored.
        for token in (TOKEN, "guess"):
            assert check(ACCESS, f"{path}?token={token}", {"host": HOST}) == verdict
    assert check(ACCESS, "/", {"host": HOST, "origin": ORIGIN}) == Serve(
        "index.html", "text/html; charset=utf-8"
    )
    # The socket opens for the page's origin; its first message must hold the secret.
    assert check(ACCESS, "/ws", {"host": HOST, "origin": ORIGIN}) == Upgrade()
    assert check(ACCESS, "/etc/passwd", {"host": HOST}) == Refuse(404, "not found")


@pytest.mark.parametrize(
    ("target", "headers", "refusal"),
    [
        # DNS rebinding: another site's name resolving to 127.0.0.1.
        ("/", {"host": f"evil.example:{PORT}"}, Refuse(403, "foreign Host")),
        ("/page.js", {"host": f"evil.example:{PORT}"}, Refuse(403, "foreign Host")),
        ("/", {}, Refuse(403, "foreign Host")),
        ("/", {"host": "127.0.0.1:9999"}, Refuse(403, "foreign Host")),
        (f"/?token={TOKEN}", {"host": "127.0.0.1:9999"}, Refuse(403, "foreign Host")),
        # Another site's script.
        ("/ws", {"host": HOST, "origin": "https://evil.example"}, Refuse(403, "foreign Origin")),
        ("/ws", {"host": HOST, "origin": "http://127.0.0.1:9999"}, Refuse(403, "foreign Origin")),
        ("/", {"host": HOST, "origin": "null"}, Refuse(403, "foreign Origin")),
        ("/ws", {"host": HOST}, Refuse(403, "no Origin")),
    ],
)
def test_each_refusal(target: str, headers: dict[str, str], refusal: Refuse) -> None:
    assert check(ACCESS, target, headers) == refusal


def test_only_get_is_answered() -> None:
    for method in ("POST", "PUT", "DELETE", "OPTIONS"):
        for target in ("/", "/ws", f"/?token={TOKEN}"):
            assert check(ACCESS, target, {"host": HOST, "origin": ORIGIN}, method) == Refuse(
                405, "only GET"
            )


def test_a_proxys_origin_is_accepted_when_named() -> None:
    behind = Access.for_address(TOKEN, PORT, extra_origins=["https://box.example"])
    headers = {"host": "box.example", "origin": "https://box.example"}
    assert check(behind, "/ws", headers) == Upgrade()
    assert check(ACCESS, "/ws", headers) == Refuse(403, "foreign Host")


@pytest.mark.parametrize(
    ("message", "refusal"),
    [
        (json.dumps({"type": "token", "token": TOKEN}), None),
        (json.dumps({"type": "token", "token": TOKEN, "more": [1]}), None),
        (json.dumps({"type": "token", "token": "guess"}), "wrong token"),
        (json.dumps({"type": "token", "token": TOKEN + "x"}), "wrong token"),
        (json.dumps({"type": "token", "token": TOKEN[:-1]}), "wrong token"),
        (json.dumps({"type": "token", "token": "\ud800"}), "no token"),  # not UTF-8
        (json.dumps({"type": "token", "token": ""}), "wrong token"),
        (json.dumps({"type": "token"}), "no token"),
        (json.dumps({"type": "token", "token": [TOKEN]}), "no token"),
        (json.dumps({"type": "watch", "threadId": "t1"}), "no token"),
        (json.dumps({"token": TOKEN}), "no token"),
        (TOKEN, "no token"),
        (TOKEN.encode(), "no token"),
        (json.dumps({"type": "token", "token": TOKEN}).encode(), "no token"),
        (
            '{"type": "token", "token": "' + TOKEN + '", "deep": ' + "[" * 3000 + "]" * 3000 + "}",
            "no token",
        ),
        ("not json", "no token"),
        ("", "no token"),
    ],
)
def test_the_sockets_first_message_must_hold_the_secret(
    message: str | bytes, refusal: str | None
) -> None:
    assert admit(ACCESS, message) == refusal


# -- the board ------------------------------------------------------------------------


def board_with(*threads: Thread) -> Board:
    picture = Picture()
    for stored in threads:
        picture.seen(stored)
    board = Board(picture)
    board.picture_changed()
    return board


def act(board: Board, view: View, message: Any) -> Outcome:
    """What ``board`` makes of a page's ``message``, sent as the page sends it (JSON)."""
    action = read_action(json.dumps(message))
    return action if isinstance(action, Refused) else board.action(view, action)


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
    assert act(board, view, {"type": "answer", "requestId": 7, "decision": "accept"}) == Answer(
        7, {"decision": "accept"}
    )
    # A second click (or another page) is not sent twice.
    assert isinstance(
        act(board, view, {"type": "answer", "requestId": 7, "decision": "decline"}), Refused
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
    assert isinstance(act(board, view, action), Refused)


def test_a_question_is_answered_with_an_answer_for_each_of_its_questions() -> None:
    board = board_with(thread("t1", "active"))
    view = board.opened()
    questions = [{"id": "color", "header": "Color", "question": "Which?", "options": []}]
    params = {"threadId": "t1", "turnId": "u1", "itemId": "i2", "questions": questions}
    assert board.request(3, "item/tool/requestUserInput", params, now=1.0)
    assert isinstance(act(board, view, {"type": "answer", "requestId": 3, "answers": {}}), Refused)
    answer = act(board, view, {"type": "answer", "requestId": 3, "answers": {"color": ["Red"]}})
    assert answer == Answer(3, {"answers": {"color": {"answers": ["Red"]}}})
    # A question whose id is no string (Codex's mistake) cannot be answered, and raises nothing.
    odd = {**params, "questions": [{**questions[0], "id": ["color"]}]}
    assert board.request(5, "item/tool/requestUserInput", odd, now=1.0)
    assert isinstance(act(board, view, {"type": "answer", "requestId": 5, "answers": {}}), Refused)
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
    assert act(board, view, {"type": "cancel", "threadId": "t1"}) == Interrupt("t1", "u1")
    board.notification(
        "turn/completed", {"threadId": "t1", "turn": {"id": "u1", "status": "interrupted"}}, now=2.0
    )
    assert isinstance(act(board, view, {"type": "cancel", "threadId": "t1"}), Refused)


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
    assert act(board, view, {"type": "watch", "threadId": "c1"}) == Watch("c1")
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
    assert act(board, board.opened(), {"type": "cancel", "threadId": "t1"}) == Interrupt("t1", "u1")


def test_a_resume_that_fails_after_its_thread_began_to_work_is_asked_again() -> None:
    """A new thread has no rollout, so the watcher's resume of it fails; once it works it has
    one, and its status change lets the resume be asked again. Under load the failure can come
    after that change: the thread must not then wait, unwatched, for its next change (the end
    of its turn), or the page shows nothing of the turn."""
    board = board_with(thread("t1", "idle"))
    board.opened()
    assert board.subscriptions() == (["t1"], [])
    status = {"threadId": "t1", "status": {"type": "active", "activeFlags": []}}
    board.notification("thread/status/changed", status, now=1.0)
    board.resume_failed("t1")  # "no rollout": it was asked before the thread's first prompt
    assert board.subscriptions() == (["t1"], [])
    # Failed with no change since it was asked: not asked again until the thread changes.
    board.resume_failed("t1")
    assert board.subscriptions() == ([], [])
    board.notification("thread/status/changed", status, now=2.0)
    assert board.subscriptions() == (["t1"], [])


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
    host = f"127.0.0.1:{port}"
    with trio.fail_after(10):
        assert (await http_request(port, "/", f"evil.example:{port}"))[0] == 403
        assert (await http_request(port, "/", host, method="POST"))[0] == 405
        # The files to anyone who names the page's own address; no cookie, ever.
        for target in ("/", f"/?token={TOKEN}", "/?token=guess"):
            status, head, body = await http_request(port, target, host)
            assert status == 200 and "set-cookie" not in head.lower(), target
            assert "content-security-policy: default-src 'none'" in head.lower()
            assert b"<title>Codex agents</title>" in body
        status, head, body = await http_request(port, "/page.js", host)
        assert status == 200 and b"sessionStorage" in body and TOKEN.encode() not in body
        for origin in ("https://evil.example", f"http://127.0.0.1:{port + 1}", None):
            headers = [("Origin", origin)] if origin else []
            with pytest.raises(InvalidStatus) as refused:
                async with connect(f"ws://{host}/ws", additional_headers=headers, origin=None):
                    pass
            assert refused.value.response.status_code == 403
        async with _open_socket(host) as page:
            await page.send(SECRET)
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


@pytest.mark.parametrize(
    ("first", "reason"),
    [
        # What the page does once let in: not done, the socket closed.
        (json.dumps({"type": "answer", "requestId": 7, "decision": "accept"}), "no token"),
        (json.dumps({"type": "token", "token": "an old daemon's"}), "wrong token"),
        (None, "no token in time"),
    ],
)
async def test_the_socket_is_sent_nothing_and_does_nothing_until_its_secret_comes(
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    first: str | None,
    reason: str,
) -> None:
    monkeypatch.setattr(server, "AUTH_SECONDS", 0.5)
    caplog.set_level(logging.DEBUG)
    board = board_with(thread("t1", "active"))
    board.request(7, "item/commandExecution/requestApproval", APPROVAL, now=1.0)
    answered: list[Any] = []

    async def respond(request_id: Any, result: Any) -> None:
        answered.append((request_id, result))

    hub, host, _port = await _serving(nursery, board)
    nursery.start_soon(hub.follow, _never, respond)
    with trio.fail_after(5):
        async with _open_socket(host) as page:
            if first is not None:
                await page.send(first)
            # Closed before a message of the page's was ever sent it.
            with pytest.raises(ConnectionClosed) as closed:
                await page.recv()
    assert closed.value.rcvd is not None
    # The reason says which rule closed it: the wrong first message at once, or the
    # server's clock (its wait began at the handshake, before the test's could).
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, reason)
    assert answered == [] and board.pages == 0
    nursery.cancel_scope.cancel()
    # The daemon's log says why, and holds no secret (the test's client logs its own frames).
    daemons = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("bridge."))
    assert f"the page refused a WebSocket: {reason}" in daemons
    assert TOKEN not in daemons and "an old daemon" not in daemons
    assert not [r for r in caplog.records if r.exc_info], caplog.text


async def _never(_method: str, _params: Any) -> Any:
    await trio.sleep_forever()


async def test_a_restarted_daemons_page_refuses_the_old_secret(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """Each start a new secret: the one an old tab kept in its sessionStorage opens nothing."""
    first = await open_page(tmp_path, PageOptions())
    for listener in first.listeners:
        await listener.aclose()
    second = await open_page(tmp_path, PageOptions())
    assert first.access.token != second.access.token
    assert (tmp_path / "page-token").read_text().strip() == second.access.token
    await nursery.start(serve_page, Hub(board_with(), dict), second.access, second.listeners)
    host = second.url.split("//", 1)[1].rstrip("/")
    with trio.fail_after(5):
        for token, answer in ((first.access.token, None), (second.access.token, "hello")):
            async with _open_socket(host) as page:
                await page.send(json.dumps({"type": "token", "token": token}))
                if answer is None:
                    with pytest.raises(ConnectionClosed) as closed:
                        await page.recv()
                    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
                else:
                    assert json.loads(await page.recv())["type"] == answer
    nursery.cancel_scope.cancel()


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


async def test_the_page_over_tls_lets_its_socket_in_with_the_secret(
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
    host = f"127.0.0.1:{port}"
    with trio.fail_after(10):
        stream = await trio.open_ssl_over_tcp_stream("127.0.0.1", port, ssl_context=trusted)
        await stream.send_all(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += await stream.receive_some(65536)
        await stream.aclose()
        assert head.startswith(b"HTTP/1.1 200") and b"set-cookie" not in head.lower()
        async with connect(
            f"wss://{host}/ws",
            ssl=trusted,
            origin=f"https://{host}",  # type: ignore[arg-type]
        ) as page:
            await page.send(json.dumps({"type": "token", "token": opened.access.token}))
            assert json.loads(await page.recv())["type"] == "hello"
    nursery.cancel_scope.cancel()


async def test_status_url_gives_the_pages_address_and_open_hands_it_over_in_a_private_file(
    tmp_path: Path,
) -> None:
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
            # The secret in the fragment, which a browser sends to no server.
            assert url.stdout.decode() == f"http://127.0.0.1:4242/#token={token}\n"
            both = await trio.run_process([*argv, "--url", "--notify"], capture_stdout=True)
            assert both.stdout.decode() == f"http://127.0.0.1:4242/#token={token}&notify\n"
            # --notify opens it (the browser $BROWSER names) with notifications on: the
            # browser is given a private file that leads there, never the secret itself.
            async with stand_in_browser(tmp_path / "browser") as browser:
                env = {**os.environ, "BROWSER": browser.command}
                await trio.run_process([*argv, "--notify"], env=env)
                [opened] = browser.opened()
    opener = runtime / "open-page.html"
    assert opened["argv"][1:] == [opener.as_uri()]
    assert stat.S_IMODE(opener.stat().st_mode) == 0o600
    leads_to = f"http://127.0.0.1:4242/#token={token}&notify"
    assert f'content="0; url={html.escape(leads_to)}"' in opener.read_text()
    assert f"location.replace({json.dumps(leads_to)})" in opener.read_text()


async def _serving(nursery: trio.Nursery, board: Board) -> tuple[Hub, str, int]:
    """The page of ``board`` served on loopback: its hub, its ``Host`` and its port."""
    hub = Hub(board, lambda: {"pid": 1})
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    access = Access.for_address(TOKEN, port)
    await nursery.start(serve_page, hub, access, listeners)
    return hub, f"127.0.0.1:{port}", port


def _open_socket(host: str) -> Any:
    """The page's socket, opened as the page opens it (its origin), its secret not yet sent."""
    return connect(f"ws://{host}/ws", origin=f"http://{host}")  # type: ignore[arg-type]


DEEP = "[" * 3000 + "]" * 3000

#: What no page sends: each is refused, and the socket stays open.
MALFORMED = [
    {"type": "cancel", "threadId": ["t1"]},
    {"type": "cancel"},
    {"type": "answer", "requestId": ["1"], "decision": "accept"},
    {"type": "answer", "requestId": {"id": 1}, "decision": "accept"},
    {"type": "answer", "requestId": True, "decision": "accept"},  # not request 1
    {"type": "answer", "requestId": None, "decision": "accept"},
    {"type": "answer", "requestId": 1, "decision": ["accept"]},
    {"type": "answer", "requestId": 3, "answers": {"color": "Red"}},
    {"type": "answer", "requestId": 3, "answers": [["Red"]]},
    {"type": "watch", "threadId": 7},
    {"type": ["watch"]},
    {"threadId": "t1"},
    ["watch"],
    "watch",
    7,
]


async def test_a_pages_malformed_messages_are_refused_and_its_socket_lives_on(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    board = board_with(thread("t1", "active"))
    board.notification("thread/status/changed", {"threadId": "t1"}, now=1.0)
    board.request(1, "item/commandExecution/requestApproval", APPROVAL, now=1.0)
    questions = [{"id": "color", "header": "Color", "question": "Which?", "options": []}]
    asked = {"threadId": "t1", "turnId": "u1", "itemId": "i2", "questions": questions}
    board.request(3, "item/tool/requestUserInput", asked, now=2.0)
    _hub, host, _port = await _serving(nursery, board)
    texts: list[str | bytes] = [json.dumps(m) for m in MALFORMED]
    texts += [
        # Nested deeper than a JSON-RPC message may be: refused before it is decoded.
        f'{{"type": "watch", "threadId": "t1", "deep": {DEEP}}}',
        DEEP,
        "[" * 3000,
        "not json",
        b'{"type": "cancel", "threadId": [1]}',
    ]
    with trio.fail_after(10):
        async with _open_socket(host) as page:
            await page.send(SECRET)
            assert json.loads(await page.recv())["type"] == "hello"
            for text in texts:
                await page.send(text)
                answer = json.loads(await page.recv())
                assert answer["type"] == "refused" and answer["reason"], text
            # Still the page's socket: what it asks is done, and nothing was answered.
            await page.send(json.dumps({"type": "watch", "threadId": "t1"}))
            update = json.loads(await page.recv())
            assert update["tail"]["threadId"] == "t1"
            assert [a["requestId"] for a in board.hello(board.opened(), {})["inbox"]] == [1, 3]
    nursery.cancel_scope.cancel()
    assert not [r for r in caplog.records if r.exc_info], caplog.text


async def test_a_message_larger_than_any_action_closes_the_socket_as_too_big(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    _hub, host, _port = await _serving(nursery, board_with())
    with trio.fail_after(10):
        async with _open_socket(host) as page:
            await page.send(SECRET)
            await page.recv()
            await page.send(json.dumps({"type": "watch", "pad": "x" * MAX_ACTION}))
            with pytest.raises(ConnectionClosed) as closed:
                await page.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    nursery.cancel_scope.cancel()
    assert not [r for r in caplog.records if r.exc_info], caplog.text


async def test_past_its_connections_in_flight_the_page_refuses_one_and_serves_those_it_has(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(server, "MAX_CONNECTIONS", 3)
    caplog.set_level(logging.WARNING, logger=server.__name__)
    board = board_with(thread("t1", "active"))
    _hub, host, port = await _serving(nursery, board)
    request = f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    with trio.fail_after(10):
        async with _open_socket(host) as page:  # one: a page open in a tab
            await page.send(SECRET)
            assert json.loads(await page.recv())["type"] == "hello"
            # Two and three: connections whose request has not come yet.
            waiting = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(2)]
            for _ in range(2):  # each one more is refused at once, and said once in the log
                extra = await trio.open_tcp_stream("127.0.0.1", port)
                refused = await _read_to_end(extra)
                assert refused.startswith(b"HTTP/1.1 503 "), refused
            refusals = [r for r in caplog.records if "refuses connections" in r.getMessage()]
            assert len(refusals) == 1
            # Those it has are served: the page's socket, a request that comes now.
            await page.send(json.dumps({"type": "cancel", "threadId": "t1"}))
            assert json.loads(await page.recv())["type"] == "refused"
            await waiting[0].send_all(request)
            assert (await _read_to_end(waiting[0])).startswith(b"HTTP/1.1 200 ")
            # That one closed once answered: the next is let in.
            assert (await http_request(port, "/", host))[0] == 200
            await waiting[1].aclose()
    nursery.cancel_scope.cancel()


async def test_a_request_that_does_not_arrive_in_time_is_cut_off(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "REQUEST_SECONDS", 0.3)
    _hub, _host, port = await _serving(nursery, board_with())
    with trio.fail_after(5):
        slow = await trio.open_tcp_stream("127.0.0.1", port)
        await slow.send_all(b"GET / HTTP/1.1\r\nHost: ")  # and nothing more
        assert await _read_to_end(slow) == b""
    nursery.cancel_scope.cancel()


async def _read_to_end(stream: trio.SocketStream) -> bytes:
    data = b""
    try:
        while chunk := await stream.receive_some(65536):
            data += chunk
    except trio.BrokenResourceError:  # closed with our bytes unread
        pass
    await stream.aclose()
    return data
