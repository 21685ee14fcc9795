"""The daemon's live picture, the status tree, and whether serve attaches (no daemon process,
no Codex)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import termios
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import trio

from bridge.codex.types import Thread, TurnEnvironment
from bridge.codex_choice import ServeOptions, choose_codex
from bridge.daemon.picture import Picture
from bridge.daemon.runtime import (
    DaemonInfo,
    DaemonMachine,
    codex_home,
    hold_lock,
    prepare,
    read_info,
    write_info,
    write_status,
)
from bridge.daemon.status import Size, render, snapshot
from bridge.machines import command_machine, parse_url
from bridge.shell.codex_transport import ENV_CODEX_BIN

ROOT = Thread(id="root", cwd="/w/app", preview="Fix the flaky test", updatedAt=1_000)
CHILD = Thread(
    id="child", cwd="/w/app", parentThreadId="root", agentNickname="Ada", updatedAt=1_050
)
OTHER = Thread(id="other", cwd="/w/doc", name="Write the README", updatedAt=900)


def lines(picture: Picture) -> dict[str, dict[str, object]]:
    return {line.threadId: msgspec.to_builtins(line) for line in picture.lines()}


def three_threads() -> Picture:
    """``root`` running, its ``child`` waiting on an approval, ``other`` seen, no status."""
    picture = Picture()
    for stored in (ROOT, CHILD, OTHER):
        picture.seen(stored)
    picture.status("root", {"type": "active", "activeFlags": []})
    picture.status("child", {"type": "active", "activeFlags": ["waitingOnApproval"]})
    return picture


def test_status_flags_and_a_lost_codex_become_the_four_states() -> None:
    picture = three_threads()
    picture.status("other", {"type": "idle"})
    shown = lines(picture)
    assert shown["root"]["state"] == "running"
    assert shown["child"]["state"] == "requires_action"
    assert shown["child"]["waitingOn"] == ["approval"]
    assert shown["other"]["state"] == "idle"
    assert not picture.status("unseen", {"type": "idle"})  # to be read first
    picture.lost()
    assert {line["state"] for line in lines(picture).values()} == {"unknown"}
    picture.back()
    assert lines(picture)["root"]["state"] == "running"


def test_a_read_does_not_undo_a_newer_status() -> None:
    picture = Picture()
    picture.seen(ROOT)
    picture.status("root", {"type": "active", "activeFlags": ["waitingOnUserInput"]})
    stale = msgspec.structs.replace(ROOT, status={"type": "idle"}, preview="Fix it")
    picture.seen(stale)
    line = lines(picture)["root"]
    assert line["state"] == "requires_action" and line["waitingOn"] == ["input"]
    assert line["title"] == "Fix it"


def test_an_ephemeral_thread_is_no_thread_of_the_user() -> None:
    # Codex's TUI titles a new thread in an ephemeral thread of its own (loaded, never stored).
    picture = Picture()
    picture.seen(ROOT)
    picture.seen(Thread(id="title", cwd="/w/app", updatedAt=1_100, ephemeral=True))
    assert list(lines(picture)) == ["root"]
    assert "title" in picture  # not read again at each of its status changes
    assert picture.status("title", {"type": "active", "activeFlags": []})
    assert list(lines(picture)) == ["root"]


def test_the_tree_puts_children_under_their_parent_and_reads_at_a_glance() -> None:
    picture = three_threads()
    info = DaemonInfo(
        pid=42,
        bridgeVersion="0.1.0",
        state="running",
        url="ws://127.0.0.1:4",
        codexVersion="x 0.169.0",
    )
    threads = [msgspec.to_builtins(line) for line in picture.lines()]
    text = render(info, threads, now=1_100)
    assert text.splitlines() == [
        "daemon 42 · Codex x 0.169.0 on ws://127.0.0.1:4 · running",
        "● running           Fix the flaky test  /w/app  1m",
        "  ◆ needs approval  Ada                 /w/app  50s",
        "○ idle              Write the README    /w/doc  3m",
    ]
    assert snapshot(info, threads)["daemon"]["pid"] == 42
    assert render(info, [], now=0).splitlines()[1] == "  no threads"


def test_each_thread_shows_its_machine_and_each_machine_its_link() -> None:
    """A sub-agent works where its root does (Codex starts it there)."""
    picks = {"root": "box"}
    picture = Picture(picks.get)
    for stored in (ROOT, CHILD, OTHER):
        picture.seen(stored)
    picture.status("root", {"type": "active", "activeFlags": []})
    picture.status("child", {"type": "active", "activeFlags": ["waitingOnApproval"]})
    shown = lines(picture)
    assert (shown["root"]["machine"], shown["child"]["machine"]) == ("box", "box")
    assert shown["other"]["machine"] == "local"
    info = DaemonInfo(
        pid=42,
        bridgeVersion="0.1.0",
        state="running",
        url="ws://127.0.0.1:4",
        machines=[
            DaemonMachine(
                name="box",
                url="podman://devbox/srv/src",
                kind="podman",
                where="podman container devbox",
                path="/srv/src",
                state="connected",
            ),
            DaemonMachine(
                name="gpu",
                url="ssh://me@gpu",
                kind="ssh",
                where="me@gpu",
                state="down",
                reason="ssh: Connection refused",
            ),
        ],
    )
    threads = [msgspec.to_builtins(line) for line in picture.lines()]
    assert render(info, threads, now=1_100).splitlines() == [
        "daemon 42 · Codex on ws://127.0.0.1:4 · running",
        "machines: box (podman container devbox) connected · gpu (ssh me@gpu) down (ssh: "
        "Connection refused)",
        "● running           Fix the flaky test  box:/srv/src  1m",
        "  ◆ needs approval  Ada                 box:/srv/src  50s",
        "○ idle              Write the README    /w/doc        3m",
    ]
    daemon = snapshot(info, threads)["daemon"]
    assert [(m["name"], m["kind"], m["where"], m["state"]) for m in daemon["machines"]] == [
        ("box", "podman", "podman container devbox", "connected"),
        ("gpu", "ssh", "me@gpu", "down"),
    ]
    assert all("token" not in json.dumps(m).lower() for m in daemon["machines"])
    # Without machines, a thread says none (the picture of a daemon without any).
    assert "machine" not in lines(three_threads())["root"]


def test_a_daemon_json_written_before_machines_had_a_kind_reads_and_shows_as_it_did(
    tmp_path: Path,
) -> None:
    """A daemon of an older bridge still running when this one's ``status`` reads its file:
    no ``kind`` nor ``where``; each machine shows by name, as it did."""
    directory = prepare(tmp_path / "runtime")
    older = {
        "pid": 42,
        "bridgeVersion": "0.1.0",
        "state": "running",
        "url": "ws://127.0.0.1:4",
        "machines": [{"name": "box", "url": "ssh://devbox/src", "state": "connected"}],
    }
    fd = os.open(directory / "daemon.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(older, file)
    info = read_info(directory)
    assert info is not None
    [box] = info.machines
    assert (box.kind, box.where) == ("", "")
    assert render(info, [], now=0).splitlines()[1] == "machines: box connected"


def test_each_kind_of_machine_reads_with_where_it_is() -> None:
    specs = [
        parse_url("a", "ssh://me@devbox:2222/src"),
        parse_url("b", "podman://devbox/src?user=dev"),
        parse_url("c", "docker://web"),
        parse_url("d", "ws://127.0.0.1:4600"),
        command_machine("e", ["kubectl", "exec", "-i", "pod/devbox", "--"]),
    ]
    machines = [
        DaemonMachine(name=s.name, url=s.url, kind=s.scheme, where=s.where(), state="idle")
        for s in specs
    ]
    info = DaemonInfo(pid=1, bridgeVersion="0.1.0", state="running", machines=machines)
    assert render(info, [], now=0).splitlines()[1].split(" · ") == [
        "machines: a (ssh me@devbox:2222) idle",
        "b (podman container devbox as dev) idle",
        "c (docker container web) idle",
        "d (ws 127.0.0.1:4600) idle",
        "e (command kubectl exec -i pod/devbox --) idle",
    ]


# -- fitting the terminal ----------------------------------------------------------------------

INFO = DaemonInfo(pid=42, bridgeVersion="0.1.0", state="running", url="ws://127.0.0.1:4")
NOW = 100_000
HEADER = "daemon 42 · Codex on ws://127.0.0.1:4 · running"


def busy_day() -> list[dict[str, object]]:
    """60 threads as a long day leaves them: 54 idle roots, one a minute, the newest first
    (idle-0 is the newest); a running root whose sub-agent waits for an approval and another
    has finished; an idle root of an hour ago whose sub-agent waits for input; an old
    running root."""
    picture = Picture()
    for i in range(54):
        picture.seen(
            Thread(id=f"idle-{i}", cwd="/w/app", preview=f"idle {i}", updatedAt=NOW - 60 * (i + 1))
        )
        picture.status(f"idle-{i}", {"type": "idle"})
    threads = [
        ("busy", None, "Busy root", 50, "active", []),
        ("busy-asks", "busy", "", 40, "active", ["waitingOnApproval"]),
        ("busy-done", "busy", "", 45, "idle", []),
        ("old", None, "Old root", 3_600, "idle", []),
        ("old-asks", "old", "", 3_500, "active", ["waitingOnUserInput"]),
        ("slow", None, "Slow root", 7_200, "active", []),
    ]
    for thread_id, parent, title, ago, kind, flags in threads:
        nickname = None if parent is None else thread_id.title()
        picture.seen(
            Thread(
                id=thread_id,
                cwd="/w/app",
                preview=title,
                parentThreadId=parent,
                agentNickname=nickname,
                updatedAt=NOW - ago,
            )
        )
        picture.status(thread_id, {"type": kind, "activeFlags": flags})
    return [msgspec.to_builtins(line) for line in picture.lines()]


def test_a_busy_day_fits_forty_rows_waiting_then_running_then_the_newest_idle() -> None:
    threads = busy_day()
    assert len(threads) == 60
    lines = render(INFO, threads, now=NOW, size=Size(120, 40)).splitlines()
    # 39 lines: the 40th is the prompt's (or the watching cursor's); the header stays on top.
    assert len(lines) == 39
    assert lines[:8] == [
        HEADER,
        "● running           Busy root  /w/app  50s",
        "  ◆ needs approval  Busy-Asks  /w/app  40s",
        "  ○ idle            Busy-Done  /w/app  45s",  # the newest idle thread
        "○ idle              Old root   /w/app  1h",  # brought along by its waiting sub-agent
        "  ◆ needs input     Old-Asks   /w/app  58m",
        "● running           Slow root  /w/app  2h",
        "○ idle              idle 0     /w/app  1m",
    ]
    # Then the newest idle roots, as many as the height leaves room for, and the count.
    assert [line.split()[2:4] for line in lines[7:-1]] == [["idle", str(i)] for i in range(31)]
    assert lines[-1] == "… and 23 idle threads; status --all lists them"


def test_all_shows_every_thread_in_the_same_order() -> None:
    threads = busy_day()
    everything = render(INFO, threads, now=NOW)
    fitted = render(INFO, threads, now=NOW, size=Size(120, 40))
    lines = everything.splitlines()
    assert len(lines) == 61 and lines[0] == HEADER
    assert not any(line.startswith("…") for line in lines)
    assert lines[1:38] == fitted.splitlines()[1:38]
    # A terminal tall enough for everything needs no count line.
    assert render(INFO, threads, now=NOW, size=Size(120, 62)) == everything


def test_waiting_and_running_threads_are_shown_even_past_the_screen() -> None:
    picture = Picture()
    for i in range(30):
        picture.seen(Thread(id=f"t{i}", cwd="/w", preview=f"t{i}", updatedAt=NOW - i))
        flags = ["waitingOnApproval"] if i % 2 else []
        picture.status(f"t{i}", {"type": "active", "activeFlags": flags})
    picture.seen(Thread(id="calm", cwd="/w", preview="calm", updatedAt=NOW))
    picture.status("calm", {"type": "idle"})
    threads = [msgspec.to_builtins(line) for line in picture.lines()]
    lines = render(INFO, threads, now=NOW, size=Size(80, 10)).splitlines()
    assert lines[0] == HEADER
    states = [line.split("  ")[0] for line in lines[1:31]]
    assert states == ["◆ needs approval"] * 15 + ["● running"] * 15
    assert lines[31:] == ["… and 1 idle thread; status --all lists them"]


def test_a_narrow_terminal_squeezes_titles_and_no_line_wraps() -> None:
    threads = busy_day()
    for columns in (60, 40, 20):
        lines = render(INFO, threads, now=NOW, size=Size(columns, 40)).splitlines()
        assert max(len(line) for line in lines) <= columns
        assert len(lines) == 39
    lines = render(INFO, threads, now=NOW, size=Size(60, 40)).splitlines()
    assert lines[1].endswith("/w/app  50s")  # the folder and the age stay


def test_a_thread_not_yet_titled_reads_by_its_folder_and_age_not_its_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", "/home/ada")
    picture = Picture()
    picture.seen(
        Thread(
            id="019a8f2e-7c41-7d10-b3a5-5f0c2e9d1a77", cwd="/home/ada/src/app", updatedAt=NOW - 180
        )
    )
    picture.status("019a8f2e-7c41-7d10-b3a5-5f0c2e9d1a77", {"type": "idle"})
    threads = [msgspec.to_builtins(line) for line in picture.lines()]
    text = render(INFO, threads, now=NOW)
    assert text.splitlines()[1] == "○ idle  untitled  ~/src/app  3m"
    assert "019a8f2e" not in text


# -- the command, on a terminal and piped ------------------------------------------------------

#: One `status` run: a Python start and a read of the runtime directory.
STATUS_SECONDS = 30


@pytest.fixture
def busy_daemon(tmp_path: Path) -> Iterator[Path]:
    """A runtime directory whose daemon (this process, holding the lock) publishes a busy day."""
    runtime = prepare(tmp_path / "runtime")
    write_info(runtime, INFO)
    write_status(runtime, busy_day())
    with hold_lock(runtime):
        yield runtime


def status_argv(runtime: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "bridge", "status", "--runtime-dir", str(runtime), *args]


def plain_env() -> dict[str, str]:
    """No $COLUMNS / $LINES: the size comes from the terminal."""
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


async def on_terminal(argv: list[str], *, rows: int, columns: int, until: bytes = b"") -> str:
    """What ``argv`` shows on a terminal of that size; with ``until``, it is stopped once
    that has been shown (``--watch`` does not end by itself)."""
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    shown = b""
    with trio.fail_after(STATUS_SECONDS):
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=child, env=plain_env()
        )
        os.close(child)
        screen = trio.lowlevel.FdStream(parent)
        try:
            while not (until and until in shown):
                try:
                    data = await screen.receive_some(65536)
                except (trio.BrokenResourceError, OSError):
                    break  # EIO: the program ended and closed the terminal
                if not data:
                    break
                shown += data
        finally:
            if process.returncode is None and until:
                process.kill()
            await process.wait()
            await screen.aclose()
    return shown.decode().replace("\r\n", "\n")


async def test_status_on_a_terminal_fits_it_and_all_or_a_pipe_prints_everything(
    busy_daemon: Path,
) -> None:
    fitted = await on_terminal(status_argv(busy_daemon), rows=40, columns=120)
    lines = fitted.splitlines()
    assert len(lines) == 39 and lines[0] == HEADER
    assert lines[-1] == "… and 23 idle threads; status --all lists them"
    everything = await on_terminal(status_argv(busy_daemon, "--all"), rows=40, columns=120)
    assert len(everything.splitlines()) == 61
    with trio.fail_after(STATUS_SECONDS):
        piped = await trio.run_process(
            status_argv(busy_daemon), env=plain_env(), capture_stdout=True
        )
    assert piped.stdout.decode().splitlines() == everything.splitlines()
    as_json = await trio.run_process(
        status_argv(busy_daemon, "--json"), env=plain_env(), capture_stdout=True
    )
    assert len(json.loads(as_json.stdout)["threads"]) == 60


async def test_status_watch_fits_the_terminal(busy_daemon: Path) -> None:
    count = b"status --all lists them"
    shown = await on_terminal(
        status_argv(busy_daemon, "--watch"), rows=20, columns=100, until=count
    )
    screen = shown.split("\x1b[H\x1b[2J")[-1]
    lines = screen.splitlines()
    assert len(lines) == 19 and lines[0] == HEADER
    assert lines[-1] == "… and 43 idle threads; status --all lists them"


def test_a_long_folder_is_cut_before_the_title() -> None:
    deep = "/tmp/pytest-of-ada/pytest-12/test_a_very_long_name_of_a_test0/workspace"
    thread = {"threadId": "t", "state": "idle", "title": "@@ say watched", "cwd": deep}
    lines = render(INFO, [thread | {"updatedAt": NOW - 5}], now=NOW, size=Size(60, 24))
    assert lines.splitlines()[1] == "○ idle  @@ say watched  …_long_name_of_a_test0/workspace  5s"
    assert len(lines.splitlines()[1]) <= 60


def test_serve_attaches_only_where_every_override_can_go_with_a_thread(tmp_path: Path) -> None:
    """``-c`` overrides an attached Codex takes per thread (with thread/start) leave the
    daemon's Codex fit; one Codex reads only when it starts (sign-in, its stores) does not."""
    codex = tmp_path / "codex"
    codex.write_text("#!/bin/sh\n")
    codex.chmod(0o755)
    env = {"CODEX_HOME": str(tmp_path / "home"), ENV_CODEX_BIN: str(codex)}
    directory = prepare(tmp_path / "runtime")
    info = DaemonInfo(
        pid=1,
        bridgeVersion="0",
        state="running",
        url="ws://127.0.0.1:1",
        codexPid=2,
        codexBin=os.path.realpath(codex),
        codexHome=codex_home(env),
    )
    with hold_lock(directory):
        write_info(directory, info)
        per_thread = ServeOptions(runtime_dir=str(directory), parsed_overrides={"model": "o3"})
        chosen = choose_codex(per_thread, env)
        assert chosen.daemon == directory and chosen.says.startswith("Codex: the daemon's")
        whole = {"model": "o3", "forced_login_method": "api"}
        options = ServeOptions(runtime_dir=str(directory), parsed_overrides=whole)
        chosen = choose_codex(options, env)
        assert chosen.daemon is None and chosen.daemon_runs
        assert chosen.says == (
            f"Codex: its own, {codex}, not the daemon's (pid 1): "
            "-c forced_login_method applies to a whole Codex, not to one thread"
        )
        off = choose_codex(ServeOptions(runtime_dir=str(directory), use_daemon=False), env)
        assert off.daemon is None and off.says.endswith("(--no-daemon)")
    gone = choose_codex(ServeOptions(runtime_dir=str(directory)), env)
    assert gone.daemon is None and not gone.daemon_runs


def test_serve_attaches_to_codex_s_own_daemon_when_it_answers_and_runs_the_codex_asked_for(
    tmp_path: Path,
) -> None:
    """No bridge daemon: Codex's daemon of the editor's ``CODEX_HOME``, if something listens
    on its socket and it runs the version a named binary has; else a Codex of its own."""
    home = tmp_path / "home"
    control = home / "app-server-control"
    control.mkdir(parents=True)
    release = home / "packages" / "app-server-daemon" / "releases" / "0.169.0-x86_64"
    release.mkdir(parents=True)
    (home / "packages" / "app-server-daemon" / "current").symlink_to(release)
    # As Codex does: the socket in a short folder, a link to it in CODEX_HOME.
    short = Path(tempfile.mkdtemp(prefix="cd-", dir="/tmp"))
    (control / "app-server-control.sock").symlink_to(short / "s.sock")

    def binary(name: str, version: str) -> str:
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\necho codex-cli {version}\n")
        path.chmod(0o755)
        return str(path)

    env = {"CODEX_HOME": str(home), ENV_CODEX_BIN: binary("same", "0.169.0")}
    options = ServeOptions(runtime_dir=str(tmp_path / "runtime"))
    try:
        assert choose_codex(options, env).url is None  # nothing listens yet
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(short / "s.sock"))
            listener.listen()
            chosen = choose_codex(options, env)
            assert chosen.url == f"unix://{control / 'app-server-control.sock'}"
            assert chosen.daemon is None and chosen.daemon_runs
            assert chosen.says.startswith(f"Codex: Codex's daemon on {control}")
            other = {**env, ENV_CODEX_BIN: binary("newer", "0.171.0")}
            refused = choose_codex(options, other)
            assert refused.url is None and refused.says.endswith("Codex's daemon runs 0.169.0"), (
                refused.says
            )
            off = choose_codex(ServeOptions(runtime_dir=str(tmp_path), use_daemon=False), env)
            assert off.url is None and off.says.endswith("(--no-daemon)")
            # The bridge's daemon serves another CODEX_HOME: Codex's daemon of this one.
            directory = prepare(tmp_path / "runtime")
            elsewhere = DaemonInfo(
                pid=1, bridgeVersion="0", state="running", url="ws://x", codexHome="/else"
            )
            with hold_lock(directory):
                write_info(directory, elsewhere)
                chosen = choose_codex(options, env)
                assert chosen.url is not None and chosen.daemon_runs
                assert "not the daemon's (pid 1): the daemon serves CODEX_HOME /else" in (
                    chosen.says
                )
    finally:
        shutil.rmtree(short)


def test_a_sessions_other_folders_show_beside_its_folder_while_codex_reports_them() -> None:
    picture = Picture()
    roots = ["/w/app", "/w/shared", "/w/lib"]
    environment = TurnEnvironment(environmentId="local", cwd="/w/app", runtimeWorkspaceRoots=roots)
    picture.seen(msgspec.structs.replace(ROOT, environments=[environment]))
    picture.seen(OTHER)
    assert lines(picture)["root"]["folders"] == ["/w/shared", "/w/lib"]
    assert "folders" not in lines(picture)["other"]
    # Read again once Codex no longer holds it (a stored thread says no roots): still known.
    picture.seen(ROOT)
    assert lines(picture)["root"]["folders"] == ["/w/shared", "/w/lib"]
    info = DaemonInfo(pid=42, bridgeVersion="0.1.0", state="running")
    text = render(info, [msgspec.to_builtins(line) for line in picture.lines()], now=1_100)
    assert "/w/app (+2 folders)" in text
    assert "/w/doc  " in text and "/w/doc (+" not in text
