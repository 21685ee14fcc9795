"""The daemon's live picture and the status tree (pure: no daemon, no Codex)."""

from __future__ import annotations

import msgspec

from bridge.codex.threads import StoredThread
from bridge.daemon.picture import Picture
from bridge.daemon.runtime import DaemonInfo
from bridge.daemon.status import render, snapshot

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
