"""The daemon's live picture, the status tree, and whether serve attaches (no daemon process,
no Codex)."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from bridge.codex.threads import StoredThread
from bridge.daemon.picture import Picture
from bridge.daemon.runtime import DaemonInfo, codex_home, hold_lock, prepare, write_info
from bridge.daemon.status import render, snapshot
from bridge.shell.codex_transport import ENV_CODEX_BIN
from bridge.shell.run import ServeOptions, choose_codex

ROOT = StoredThread(id="root", cwd="/w/app", preview="Fix the flaky test", updatedAt=1_000)
CHILD = StoredThread(
    id="child", cwd="/w/app", parentThreadId="root", agentNickname="Ada", updatedAt=1_050
)
OTHER = StoredThread(id="other", cwd="/w/doc", name="Write the README", updatedAt=900)


def lines(picture: Picture) -> dict[str, dict[str, object]]:
    return {line.threadId: msgspec.to_builtins(line) for line in picture.lines()}


def test_status_flags_and_a_lost_codex_become_the_four_states() -> None:
    picture = Picture()
    for stored in (ROOT, CHILD, OTHER):
        picture.seen(stored)
    picture.status("root", {"type": "active", "activeFlags": []})
    picture.status("child", {"type": "active", "activeFlags": ["waitingOnApproval"]})
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


def test_the_tree_puts_children_under_their_parent_and_reads_at_a_glance() -> None:
    picture = Picture()
    for stored in (ROOT, CHILD, OTHER):
        picture.seen(stored)
    picture.status("root", {"type": "active", "activeFlags": []})
    picture.status("child", {"type": "active", "activeFlags": ["waitingOnApproval"]})
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
