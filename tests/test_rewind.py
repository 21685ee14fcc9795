"""``/rewind``, in the engine alone: the span it takes back, the undo plan (newest first, only
where a file is still as its change left it), its refusals and errors (the real Codex runs it
in ``tests/test_e2e_rewind.py``)."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import pytest

from bridge.codex import items as codex_items
from bridge.codex import types as codex_types
from bridge.engine.core.machines import MachineOffer, Registration
from bridge.engine.features.palette import _rewind_plan as rewind_plan
from bridge.engine.features.palette._rewind_plan import Unreadable
from tests.support.reading import text_of
from tests.test_config import THREAD, H, open_session, prompt, thread_started

BIG = "".join(f"l{i}\n" for i in range(1, 41))
BIG_EDITED = BIG.replace("l11\n", "L11\n")
BIG_DIFF = "@@ -10,3 +10,3 @@\n l10\n-l11\n+L11\n l12\n"


# -- Codex's stored items -------------------------------------------------------------------


def user(text: str, item_id: str = "u") -> dict[str, Any]:
    return {"type": "userMessage", "id": item_id, "content": [{"type": "text", "text": text}]}


def said_item(text: str = "ok") -> dict[str, Any]:
    return {"type": "agentMessage", "id": "m", "text": text}


def add(path: str, text: str) -> dict[str, Any]:
    return {"path": path, "kind": {"type": "add"}, "diff": text}


def delete(path: str, text: str) -> dict[str, Any]:
    return {"path": path, "kind": {"type": "delete"}, "diff": text}


def update(path: str, diff: str, move: str | None = None) -> dict[str, Any]:
    return {"path": path, "kind": {"type": "update", "move_path": move}, "diff": diff}


def patch(*changes: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {"type": "fileChange", "id": "p", "changes": list(changes), "status": status}


def command(
    line: str, status: str = "completed", actions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "type": "commandExecution",
        "id": "c",
        "command": f"/bin/bash -lc '{line}'",
        "cwd": "/work",
        "status": status,
        "commandActions": actions or [{"type": "unknown", "command": line}],
    }


def turn(turn_id: str, *items: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {"id": turn_id, "status": status, "items": list(items)}


def turns(*raw: dict[str, Any]) -> list[codex_types.Turn]:
    return msgspec.json.decode(msgspec.json.encode(list(raw)), type=list[codex_types.Turn])


def span_of_one_prompt(*items: dict[str, Any]) -> rewind_plan.Span:
    """The span of one prompt (``go``) whose turn holds ``items``, in ``/work``."""
    [t] = turns(turn("t", user("go"), *items))
    span = rewind_plan.find_span([t], 1, "/work")
    assert span is not None
    return span


def changes(*raw: dict[str, Any]) -> list[codex_items.FileUpdateChange]:
    return msgspec.convert(list(raw), list[codex_items.FileUpdateChange])


# -- the span ---------------------------------------------------------------------------------


def test_the_span_is_the_newest_prompts_and_every_turn_after_the_oldest() -> None:
    newest_first = turns(
        turn("t4", user("four"), patch(add("/work/d.txt", "d\n"))),
        turn("t3", said_item("compacted")),  # no prompt: a /compact, a goal's own turn
        turn("t2", user("two"), user("steered in", "u2"), command("make")),
        turn("t1", user("one")),
    )
    span = rewind_plan.find_span(newest_first, 2, "/work")
    assert span is not None
    assert span.before_turn == "t2"
    assert span.prompts == ["two", "four"]  # a steer is no prompt of its own
    assert [c.path for c in span.changes] == ["/work/d.txt"]
    assert [c.command for c in span.commands] == ["make"]
    assert rewind_plan.find_span(newest_first, 4, "/work") is None  # only three prompts
    assert rewind_plan.prompts_in(newest_first) == 3


def test_the_span_names_what_ran_but_not_reads_declined_work_or_failed_patches() -> None:
    span = span_of_one_prompt(
        command(
            "cat a.txt",
            actions=[{"type": "read", "command": "cat a.txt", "name": "a.txt", "path": "a.txt"}],
        ),
        command("rm -rf build", status="declined"),
        command("echo x > out.txt", status="failed"),
        patch(add("b.txt", "b\n"), status="failed"),
        patch(update("rel/c.txt", BIG_DIFF)),
        {
            "type": "mcpToolCall",
            "id": "m1",
            "server": "db",
            "tool": "drop",
            "status": "completed",
        },
        {
            "type": "collabAgentToolCall",
            "id": "s",
            "tool": "spawnAgent",
            "receiverThreadIds": ["child-1"],
        },
    )
    assert [c.command for c in span.commands] == ["echo x > out.txt"]
    # A relative path is taken in the session's folder.
    assert [c.path for c in span.changes] == ["/work/rel/c.txt"]
    assert span.tool_calls == ["db/drop"]
    assert span.spawned == ["child-1"]


# -- the undo plan ------------------------------------------------------------------------------


def test_changes_are_undone_newest_first_over_the_files_as_they_are() -> None:
    # Created, then edited: undoing the edit first gives back the created text, which
    # then matches the creation, so the file goes.
    plan = rewind_plan.plan_undo(
        changes(add("/w/a.txt", "a\n"), update("/w/a.txt", "@@ -1 +1 @@\n-a\n+A\n")),
        {"/w/a.txt": "A\n"},
    )
    assert [u.how for u in plan.undone] == ["restored", "removed"]
    assert plan.writes == {"/w/a.txt": None}
    assert plan.conflicts == []


def test_an_edit_deletion_and_move_are_returned() -> None:
    plan = rewind_plan.plan_undo(
        changes(
            update("/w/big.txt", BIG_DIFF),
            delete("/w/gone.txt", "old\n"),
            update("/w/from.txt", "@@ -1 +1 @@\n-x\n+y\n", move="/w/to.txt"),
        ),
        {"/w/big.txt": BIG_EDITED, "/w/gone.txt": None, "/w/from.txt": None, "/w/to.txt": "y\n"},
    )
    assert [u.how for u in plan.undone] == ["moved back", "written back", "restored"]
    assert plan.writes == {
        "/w/big.txt": BIG,
        "/w/gone.txt": "old\n",
        "/w/from.txt": "x\n",
        "/w/to.txt": None,
    }


@pytest.mark.parametrize(
    ("change", "now", "why"),
    [
        (add("/w/a.txt", "a\n"), "a\nmore\n", "it changed since"),
        (add("/w/a.txt", "a\n"), None, "it is gone since"),
        (delete("/w/a.txt", "a\n"), "new\n", "a file is there again"),
        (update("/w/a.txt", BIG_DIFF), BIG, "it changed since"),  # already undone
        (update("/w/a.txt", BIG_DIFF), "l0\n" + BIG_EDITED, "it changed since"),  # lines moved
        (update("/w/a.txt", BIG_DIFF), None, "it is gone since"),
        (update("/w/a.txt", "@@ -1,2 +1,2 @@\n-a\n"), "b\n", "its diff cannot be read"),
        (add("/w/a.txt", "a\n"), Unreadable("path is not a file"), "Codex could not read it"),
    ],
)
def test_a_file_changed_since_is_left_alone_as_a_conflict(
    change: dict[str, Any], now: Any, why: str
) -> None:
    plan = rewind_plan.plan_undo(changes(change), {"/w/a.txt": now})
    assert plan.undone == [] and plan.writes == {}
    [conflict] = plan.conflicts
    assert conflict.why.startswith(why), conflict.why


def test_a_conflict_leaves_the_older_changes_of_that_file_alone_and_the_others_not() -> None:
    plan = rewind_plan.plan_undo(
        changes(
            add("/w/a.txt", "a\n"),
            add("/w/b.txt", "b\n"),
            update("/w/a.txt", "@@ -1 +1 @@\n-a\n+A\n"),
        ),
        {"/w/a.txt": "edited by the user\n", "/w/b.txt": "b\n"},
    )
    assert [(c.change.path, c.why) for c in plan.conflicts] == [
        ("/w/a.txt", "it changed since"),
        ("/w/a.txt", "a later change to it is left alone"),
    ]
    assert plan.writes == {"/w/b.txt": None}


def test_a_move_is_left_alone_when_its_old_path_is_taken_again() -> None:
    plan = rewind_plan.plan_undo(
        changes(update("/w/from.txt", "@@ -1 +1 @@\n-x\n+y\n", move="/w/to.txt")),
        {"/w/from.txt": "someone else's\n", "/w/to.txt": "y\n"},
    )
    assert [c.why for c in plan.conflicts] == ["a file is at /w/from.txt again"]


def test_bytes_that_are_not_utf8_survive_the_round_trip() -> None:
    from bridge.engine.features.palette._rewind import decode_text, encode_text

    raw = b"caf\xe9\n"
    text = decode_text(base64.b64encode(raw).decode())
    assert text is not None
    assert base64.b64decode(encode_text(text)) == raw
    assert decode_text("not base64!") is None


# -- the command, through the engine ---------------------------------------------------------


def run(h: H, text: str) -> int:
    return h.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": text}]}
    )


def said(h: H) -> str:
    chunks = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "agent_message_chunk"]
    return text_of(chunks[-1:])


def list_turns(h: H, *newest_first: dict[str, Any], cursor: str | None = None) -> dict[str, Any]:
    request = h.codex_request("thread/turns/list")
    h.codex_reply(request["id"], {"data": list(newest_first), "nextCursor": cursor})
    return request["params"]  # type: ignore[no-any-return]


def rewind_listed(*newest_first: dict[str, Any]) -> tuple[H, int]:
    """A session here that asked ``/rewind``, Codex's stored turns ``newest_first`` listed;
    the request's id."""
    h = H()
    open_session(h)
    rid = run(h, "/rewind")
    list_turns(h, *newest_first)
    return h, rid


def answered(h: H) -> set[Any]:
    return {m["id"] for m in h.to_codex if "method" not in m and "id" in m}


def reply_all(h: H, method: str, answer: Any) -> list[dict[str, Any]]:
    """Answer every ``method`` request not answered yet: ``answer(params)`` → a result, or
    an error message as ``("error", message)``; their params, in order."""
    done = getattr(h, "_rewind_replied", set())
    h._rewind_replied = done  # type: ignore[attr-defined]
    asked = [m for m in h.to_codex if m.get("method") == method and m["id"] not in done]
    for request in asked:
        done.add(request["id"])
        result = answer(request["params"])
        if isinstance(result, tuple):
            h.codex_error(request["id"], result[1], code=-32603)
        else:
            h.codex_reply(request["id"], result)
    return [r["params"] for r in asked]


def read_files(h: H, files: dict[str, str | None]) -> list[str]:
    def read(params: dict[str, Any]) -> Any:
        text = files[params["path"]]
        if text is None:
            return ("error", "No such file or directory (os error 2)")
        return {"dataBase64": base64.b64encode(text.encode()).decode()}

    return [p["path"] for p in reply_all(h, "fs/readFile", read)]


def revert(h: H) -> dict[str, Any]:
    request = h.codex_request("thread/revert")
    h.codex_reply(request["id"], {"thread": {"id": THREAD}})
    h.codex_notify("thread/reverted", {"threadId": THREAD})
    return request["params"]  # type: ignore[no-any-return]


STORED = (
    turn("t3", user("add notes"), patch(add("/work/new.txt", "hello\n"))),
    turn("t2", user("edit big"), patch(update("/work/big.txt", BIG_DIFF)), command("make build")),
    turn("t1", user("hi"), said_item()),
)


def test_rewind_takes_back_the_last_prompt_its_files_and_its_history() -> None:
    h = H()
    open_session(h)
    rid = run(h, "/rewind")
    assert not h.sent_codex("turn/start")
    params = list_turns(h, *STORED)
    assert params == {
        "threadId": THREAD,
        "sortDirection": "desc",
        "itemsView": "full",
        "limit": 20,
    }
    assert read_files(h, {"/work/new.txt": "hello\n"}) == ["/work/new.txt"]
    assert not h.sent_codex("fs/remove"), "the history goes first"
    assert revert(h) == {"threadId": THREAD, "beforeTurnId": "t3"}
    assert reply_all(h, "fs/remove", lambda _p: {}) == [
        {"path": "/work/new.txt", "recursive": False}
    ]
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "**Rewound 1 prompt.**" in text and "“add notes”" in text
    assert "`new.txt`: removed (the prompt created it)" in text
    assert "reload the session" in text
    assert "make build" not in text  # not in the span
    h.validate()


def test_rewind_n_takes_back_n_prompts_newest_change_first_and_names_commands() -> None:
    h = H()
    open_session(h)
    rid = run(h, "/rewind 2")
    list_turns(h, *STORED)
    assert sorted(read_files(h, {"/work/new.txt": "hello\n", "/work/big.txt": BIG_EDITED})) == [
        "/work/big.txt",
        "/work/new.txt",
    ]
    assert revert(h)["beforeTurnId"] == "t2"
    [written] = reply_all(h, "fs/writeFile", lambda _p: {})
    assert written["path"] == "/work/big.txt"
    assert base64.b64decode(written["dataBase64"]).decode() == BIG
    reply_all(h, "fs/remove", lambda _p: {})
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "**Rewound 2 prompts.**" in text and "1. “edit big”\n2. “add notes”" in text
    assert text.index("`new.txt`") < text.index("`big.txt`"), "newest first"
    assert "the command `make build`, run in `/work`: its effects stay" in text


def test_a_file_changed_since_is_named_with_its_diff_and_left_as_it_is() -> None:
    h = H()
    open_session(h)
    rid = run(h, "/rewind 2")
    list_turns(h, *STORED)
    read_files(h, {"/work/new.txt": "hello\nmine\n", "/work/big.txt": BIG_EDITED})
    revert(h)
    assert not h.sent_codex("fs/remove")
    reply_all(h, "fs/writeFile", lambda _p: {})
    h.result(rid)
    text = said(h)
    assert "Left alone (changed since, so not undone):" in text
    assert "- `new.txt`: it changed since. The change was:" in text
    assert "```diff\n  +hello\n  ```" in text
    assert "`big.txt`: its edit undone" in text


def test_a_file_restored_where_it_is_gone_gets_its_folder_first() -> None:
    h, rid = rewind_listed(
        turn("t1", user("clean up"), patch(delete("/work/sub/old.txt", "old\n")))
    )
    read_files(h, {"/work/sub/old.txt": None})
    revert(h)
    assert reply_all(h, "fs/createDirectory", lambda _p: {}) == [
        {"path": "/work/sub", "recursive": True}
    ]
    [written] = reply_all(h, "fs/writeFile", lambda _p: {})
    assert written["path"] == "/work/sub/old.txt"
    h.result(rid)
    assert "`sub/old.txt`: written back (the prompt deleted it)" in said(h)


def test_a_write_codex_refuses_is_named_in_the_answer() -> None:
    h, rid = rewind_listed(*STORED)
    read_files(h, {"/work/new.txt": "hello\n"})
    revert(h)
    reply_all(h, "fs/remove", lambda _p: ("error", "Permission denied (os error 13)"))
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "Files Codex could not return" in text
    assert "`new.txt`: Codex: Permission denied (os error 13)" in text
    assert "removed (the prompt created it)" not in text


def test_more_pages_are_read_until_enough_prompts_are_found() -> None:
    h = H()
    open_session(h)
    run(h, "/rewind 2")
    list_turns(h, STORED[0], cursor="next")
    params = list_turns(h, *STORED[1:])
    assert params["cursor"] == "next"
    read_files(h, {"/work/new.txt": "hello\n", "/work/big.txt": BIG_EDITED})
    assert revert(h)["beforeTurnId"] == "t2"


def test_rewind_is_refused_while_a_turn_runs_and_is_not_queued() -> None:
    h = H()
    open_session(h)
    running = prompt(h, "work")
    error = h.error(run(h, "/rewind"))
    assert error.code == -32600 and "finished prompts only" in error.message
    assert not h.sent_codex("thread/turns/list")
    assert h.client_response(running) is None  # the turn goes on
    # An ordinary prompt still queues.
    queued = run(h, "later")
    assert h.client_response(queued) is None


def test_rewind_is_refused_when_codex_lists_a_turn_still_running() -> None:
    # Another client's turn the bridge has not seen start.
    h, rid = rewind_listed(turn("t9", user("theirs"), status="inProgress"), *STORED)
    error = h.error(rid)
    assert error.code == -32600 and "a turn is still running" in error.message
    assert not h.sent_codex("thread/revert")


@pytest.mark.parametrize("argument", ["0", "-1", "two", "2 3", "1001", "²"])
def test_rewind_takes_a_whole_number_of_prompts(argument: str) -> None:
    h = H()
    open_session(h)
    error = h.error(run(h, f"/rewind {argument}"))
    assert error.code == -32602 and "from 1 to 1000" in error.message


def test_rewinding_more_prompts_than_the_session_has_says_how_many_it_has() -> None:
    h = H()
    open_session(h)
    rid = run(h, "/rewind 5")
    list_turns(h, *STORED)
    error = h.error(rid)
    assert error.code == -32602
    assert "only 3 prompts" in error.message and "/rewind 3" in error.message
    assert not h.sent_codex("thread/revert")


def test_a_session_never_prompted_has_nothing_to_take_back() -> None:
    h = H()
    open_session(h)
    rid = run(h, "/rewind")
    h.codex_error(
        h.codex_request("thread/turns/list")["id"], "list_turns is not supported yet", -32601
    )
    assert "no prompt to take back" in h.error(rid).message


def test_codex_refusing_the_revert_is_the_prompts_error_and_no_file_is_touched() -> None:
    h, rid = rewind_listed(*STORED)
    read_files(h, {"/work/new.txt": "hello\n"})
    h.codex_error(h.codex_request("thread/revert")["id"], "turn not found: t3")
    assert "turn not found" in h.error(rid).message
    assert not h.sent_codex("fs/remove") and not h.sent_codex("fs/writeFile")
    # The session is free again.
    assert h.client_response(prompt(h, "next", turn_id="t4")) is None


BOX = MachineOffer("box", "/home/remote/ws", registration=Registration("ws://127.0.0.1:4000", "t"))


WS = "/home/remote/ws"
#: As ``STORED``, on the machine: one path relative (taken in the machine's folder).
BOX_STORED = (
    turn("t3", user("add notes"), patch(add("new.txt", "hello\n"))),
    turn("t2", user("edit big"), patch(update(f"{WS}/big.txt", BIG_DIFF))),
    turn("t1", user("hi"), said_item()),
)


def on_box(h: H) -> None:
    """The session works on the machine ``box`` and its prompt ``t3`` ran there."""
    open_session(h)
    h.pick_unstored("machine", "box")
    run(h, "there")
    h.machine_changed("box", "connected")
    h.codex_reply(
        h.codex_request("turn/start")["id"], {"turn": {"id": "t3", "status": "inProgress"}}
    )
    h.complete_turn(THREAD, "t3")


def machine_calls(h: H, method: str) -> list[Any]:
    """The engine's calls of ``method`` to the machine's exec-server not answered yet."""
    done = getattr(h, "_machine_answered", set())
    h._machine_answered = done  # type: ignore[attr-defined]
    found = [c for c in h.machine_calls if c.method == method and c.key not in done]
    done.update(c.key for c in found)
    return found


def params(call: Any) -> dict[str, Any]:
    return msgspec.json.decode(call.params)  # type: ignore[no-any-return]


def test_on_another_machine_its_files_are_read_and_written_by_its_exec_server() -> None:
    h = H(machines=[BOX])
    on_box(h)
    rid = run(h, "/rewind 2")
    list_turns(h, *BOX_STORED)
    # Not Codex's fs/* (they reach the app-server's machine): the machine's exec-server's.
    assert not h.sent_codex("fs/readFile")
    reads = machine_calls(h, "fs/readFile")
    assert {c.machine for c in reads} == {"box"}
    by_path = {params(c)["path"]: c for c in reads}
    assert sorted(by_path) == [f"file://{WS}/big.txt", f"file://{WS}/new.txt"]
    h.machine_answer(by_path[f"file://{WS}/new.txt"], {"dataBase64": b64("hello\n")})
    h.machine_answer(by_path[f"file://{WS}/big.txt"], {"dataBase64": b64(BIG_EDITED)})
    assert not machine_calls(h, "fs/remove"), "the history goes first"
    revert(h)
    [remove] = machine_calls(h, "fs/remove")
    assert params(remove) == {"path": f"file://{WS}/new.txt", "recursive": False}
    [write] = machine_calls(h, "fs/writeFile")
    assert params(write)["path"] == f"file://{WS}/big.txt"
    assert base64.b64decode(params(write)["dataBase64"]).decode() == BIG
    h.machine_answer(remove, {})
    h.machine_answer(write, {})
    assert not h.sent_codex("fs/remove") and not h.sent_codex("fs/writeFile")
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "Files returned to what they were (on box):" in text
    assert "`new.txt`: removed (the prompt created it)" in text
    assert "`big.txt`: its edit undone" in text
    h.validate()


def test_on_another_machine_a_file_changed_there_is_a_conflict_and_a_failure_is_named() -> None:
    h = H(machines=[BOX])
    on_box(h)
    rid = run(h, "/rewind 2")
    list_turns(h, *BOX_STORED)
    by_path = {params(c)["path"]: c for c in machine_calls(h, "fs/readFile")}
    # new.txt changed on the machine since; big.txt is as the edit left it, but the machine
    # refuses its write.
    h.machine_answer(by_path[f"file://{WS}/new.txt"], {"dataBase64": b64("hello\nmine\n")})
    h.machine_answer(by_path[f"file://{WS}/big.txt"], {"dataBase64": b64(BIG_EDITED)})
    revert(h)
    assert not machine_calls(h, "fs/remove")
    [write] = machine_calls(h, "fs/writeFile")
    h.machine_answer(write, error=(-32603, "Permission denied (os error 13)"))
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "Left alone (on box) (changed since, so not undone):" in text
    assert "`new.txt`: it changed since" in text and "+hello" in text
    assert "Files Codex could not return (on box)" in text
    assert "`big.txt`: Codex: Permission denied (os error 13)" in text


def test_on_a_machine_the_shell_cannot_reach_nothing_is_written_and_each_change_is_named() -> None:
    h = H(machines=[BOX])
    on_box(h)
    rid = run(h, "/rewind")
    list_turns(h, *BOX_STORED)
    [read] = machine_calls(h, "fs/readFile")
    h.machine_answer(read, error=(-32603, "machine box: ssh to box failed: Connection refused"))
    revert(h)
    assert not machine_calls(h, "fs/remove") and not machine_calls(h, "fs/writeFile")
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "`new.txt`: Codex could not read it: machine box: ssh to box failed" in text


def test_a_file_missing_on_the_machine_is_created_again_with_its_folder() -> None:
    h = H(machines=[BOX])
    on_box(h)
    deleted = turn("t3", user("drop it"), patch(delete(f"{WS}/sub dir/old.txt", "old\n")))
    rid = run(h, "/rewind")
    list_turns(h, deleted, *BOX_STORED[1:])
    [read] = machine_calls(h, "fs/readFile")
    assert params(read)["path"] == f"file://{WS}/sub%20dir/old.txt"
    h.machine_answer(read, error=(-32004, "No such file or directory (os error 2)"))
    revert(h)
    [mkdir] = machine_calls(h, "fs/createDirectory")
    assert params(mkdir) == {"path": f"file://{WS}/sub%20dir", "recursive": True}
    h.machine_answer(mkdir, {})
    [write] = machine_calls(h, "fs/writeFile")
    assert base64.b64decode(params(write)["dataBase64"]) == b"old\n"
    h.machine_answer(write, {})
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert "written back (the prompt deleted it)" in said(h)


def test_a_turn_that_worked_on_another_machine_keeps_its_files_there_and_is_named() -> None:
    h = H(machines=[BOX])
    on_box(h)  # t3 worked on box
    h.pick_unstored("machine", "local")
    run(h, "here")
    h.codex_reply(
        h.codex_request("turn/start")["id"], {"turn": {"id": "t4", "status": "inProgress"}}
    )
    h.complete_turn(THREAD, "t4")
    rid = run(h, "/rewind 2")
    list_turns(
        h,
        turn("t4", user("here"), patch(add("/work/here.txt", "h\n"))),
        turn("t3", user("there"), patch(add(f"{WS}/there.txt", "t\n"))),
        turn("t1", user("hi"), said_item()),
    )
    # Only the file of the turn that worked here is read (by Codex: the session is local).
    assert read_files(h, {"/work/here.txt": "h\n"}) == ["/work/here.txt"]
    assert not h.machine_calls
    revert(h)
    assert reply_all(h, "fs/remove", lambda _p: {}) == [
        {"path": "/work/here.txt", "recursive": False}
    ]
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "`here.txt`: removed (the prompt created it)" in text
    assert (
        f"`{WS}/there.txt` (created on the machine box, where this session no longer works)" in text
    )


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# -- only inside the session's folders -------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "inside"),
    [
        ("/work/a.txt", True),
        ("/work/sub/dir/a.txt", True),
        ("/work/sub/../a.txt", True),
        ("/work", False),  # the folder itself is not in it
        ("/workshop/a.txt", False),
        ("/work/../etc/passwd", False),
        ("/work/a/../../x", False),
        ("/home/user/.bashrc", False),
        ("a.txt", False),  # relative: below nothing
        ("//work/a.txt", False),
    ],
)
def test_inside_is_below_a_root_as_written(path: str, inside: bool) -> None:
    assert rewind_plan.inside(path, ["/work"]) is inside
    assert rewind_plan.inside(path, ["/work/"]) is inside


def test_paths_are_made_absolute_and_normalised_in_the_sessions_folder() -> None:
    span = span_of_one_prompt(
        patch(
            add("../../etc/cron.d/x", "x\n"),
            add("/work/sub/../../home/user/.profile", "p\n"),
            add("sub/./a.txt", "a\n"),
        )
    )
    assert [c.path for c in span.changes] == [
        "/etc/cron.d/x",
        "/home/user/.profile",
        "/work/sub/a.txt",
    ]


def test_a_path_that_leads_out_through_a_link_is_outside_and_says_where() -> None:
    links = {"/work/link/s.txt": "/elsewhere/s.txt", "/work": "/real/work"}

    def real_path(path: str) -> str:
        return links.get(path, path.replace("/work/", "/real/work/", 1))

    found = rewind_plan.outside_of(
        ["/work/a.txt", "/work/link/s.txt", "/etc/passwd"], ["/work"], real_path
    )
    assert found == {
        "/work/link/s.txt": "outside the session's folders (it leads to /elsewhere/s.txt): "
        "left as it is",
        "/etc/passwd": rewind_plan.OUTSIDE,
    }
    # As written only (another machine's files): the link is not seen.
    assert rewind_plan.outside_of(["/work/link/s.txt", "/etc/passwd"], ["/work"]) == {
        "/etc/passwd": rewind_plan.OUTSIDE
    }


def test_a_change_outside_and_every_older_change_of_its_files_are_left_alone() -> None:
    plan = rewind_plan.plan_undo(
        changes(
            add("/w/a.txt", "a\n"),
            update("/w/a.txt", "@@ -1 +1 @@\n-a\n+A\n", move="/etc/a.txt"),
            update("/etc/hosts", "@@ -1 +1 @@\n-x\n+y\n"),
            add("/w/b.txt", "b\n"),
        ),
        {"/w/a.txt": None, "/w/b.txt": "b\n"},
        {"/etc/a.txt": rewind_plan.OUTSIDE, "/etc/hosts": rewind_plan.OUTSIDE},
    )
    assert [(c.change.path, c.why) for c in plan.outside] == [
        ("/etc/hosts", rewind_plan.OUTSIDE),
        ("/w/a.txt", rewind_plan.OUTSIDE),  # moved out: its new end is outside
    ]
    assert [(c.change.path, c.why) for c in plan.conflicts] == [
        ("/w/a.txt", "a later change to it is left alone")
    ]
    assert plan.writes == {"/w/b.txt": None}


#: A history no prompt of this session made (a crafted rollout, another tool's): it names a
#: file outside the workspace, a ``..`` path, and one through a link that leads out; and one
#: file inside.
CRAFTED = (
    turn(
        "t9",
        user("crafted"),
        patch(
            update("/home/user/.bashrc", "@@ -1 +1 @@\n-safe\n+evil\n"),
            add("../../tmp/dropped.txt", "x\n"),
            delete("link/owned.txt", "theirs\n"),
            add("new.txt", "hello\n"),
        ),
    ),
    turn("t1", user("hi"), said_item()),
)


def test_a_crafted_history_is_rewound_inside_the_workspace_only_and_the_rest_named() -> None:
    links = {"/work/link/owned.txt": "/home/user/owned.txt"}
    h = H(real_path=lambda path: links.get(path, path))
    open_session(h)
    rid = run(h, "/rewind")
    list_turns(h, *CRAFTED)
    # Only the file inside is read...
    assert read_files(h, {"/work/new.txt": "hello\n"}) == ["/work/new.txt"]
    revert(h)
    # ... and only it is written.
    assert reply_all(h, "fs/remove", lambda _p: {}) == [
        {"path": "/work/new.txt", "recursive": False}
    ]
    assert not h.sent_codex("fs/writeFile") and not h.sent_codex("fs/createDirectory")
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "`new.txt`: removed (the prompt created it)" in text
    assert "Left alone (outside the session's folders, so not touched):" in text
    assert "- `/home/user/.bashrc`: outside the session's folders: left as it is." in text
    assert "- `/tmp/dropped.txt`: outside the session's folders: left as it is." in text
    assert (
        "- `link/owned.txt`: outside the session's folders (it leads to /home/user/owned.txt): "
        "left as it is." in text
    )
    assert "+evil" in text  # its diff, as a conflict's
    h.validate()


def test_a_link_swapped_in_after_the_files_were_read_is_not_written_through() -> None:
    # Judged inside when read; a command still running then makes the folder a link out of
    # the workspace while Codex reverts: the write is judged again, and not made.
    links: dict[str, str] = {}
    h = H(real_path=lambda path: links.get(path, path))
    open_session(h)
    rid = run(h, "/rewind")
    made = turn("t9", user("made"), patch(add("sub/new.txt", "hello\n"), add("a.txt", "a\n")))
    list_turns(h, made, turn("t1", user("hi"), said_item()))
    files = {"/work/sub/new.txt": "hello\n", "/work/a.txt": "a\n"}
    assert sorted(read_files(h, files)) == ["/work/a.txt", "/work/sub/new.txt"]
    links["/work/sub/new.txt"] = "/home/user/.ssh/new.txt"
    revert(h)
    assert reply_all(h, "fs/remove", lambda _p: {}) == [{"path": "/work/a.txt", "recursive": False}]
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "`a.txt`: removed (the prompt created it)" in text
    assert (
        "- `sub/new.txt`: outside the session's folders (it leads to /home/user/.ssh/new.txt): "
        "left as it is\n" in text
    )
    h.validate()


def test_on_another_machine_the_folders_are_judged_as_written() -> None:
    # The shell's real_path knows this machine's links, not the machine's: never asked there.
    asked: list[str] = []
    h = H(machines=[BOX], real_path=lambda path: asked.append(path) or "/elsewhere")
    on_box(h)
    rid = run(h, "/rewind")
    crafted = turn(
        "t3",
        user("crafted"),
        patch(
            add("../escape.txt", "x\n"), add(f"{WS}/../../../etc/x", "x\n"), add("in.txt", "i\n")
        ),
    )
    list_turns(h, crafted, *BOX_STORED[1:])
    [read] = machine_calls(h, "fs/readFile")
    assert params(read)["path"] == f"file://{WS}/in.txt"
    h.machine_answer(read, {"dataBase64": b64("i\n")})
    revert(h)
    [remove] = machine_calls(h, "fs/remove")
    assert params(remove)["path"] == f"file://{WS}/in.txt"
    h.machine_answer(remove, {})
    assert not machine_calls(h, "fs/writeFile") and not machine_calls(h, "fs/createDirectory")
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "Left alone (on box) (outside the session's folders, so not touched):" in text
    assert "`/home/remote/escape.txt`" in text and "`/etc/x`" in text
    assert asked == []


def test_a_rewind_writes_in_the_sessions_other_folders_too() -> None:
    h = H()
    rid = h.client_request(
        "session/new", {"cwd": "/work", "mcpServers": [], "additionalDirectories": ["/data"]}
    )
    h.codex_reply(
        h.codex_request("thread/start")["id"],
        thread_started(
            sandbox={"type": "workspaceWrite", "writableRoots": ["/data"]},
            runtimeWorkspaceRoots=["/work", "/data"],
        ),
    )
    assert h.result(rid)["sessionId"] == THREAD
    rid = run(h, "/rewind")
    list_turns(
        h,
        turn(
            "t2",
            user("both"),
            patch(add("/data/notes.txt", "n\n"), add("/etc/x.txt", "x\n"), add("a.txt", "a\n")),
        ),
        turn("t1", user("hi"), said_item()),
    )
    assert read_files(h, {"/data/notes.txt": "n\n", "/work/a.txt": "a\n"}) == [
        "/data/notes.txt",
        "/work/a.txt",
    ]
    revert(h)
    removed = reply_all(h, "fs/remove", lambda _p: {})
    assert sorted(p["path"] for p in removed) == ["/data/notes.txt", "/work/a.txt"]
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert "`/etc/x.txt`" in said(h)
