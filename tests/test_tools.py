"""Tool items as ACP tool calls, plans and thread names: the engine alone (dicts in, dicts out)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.codex.items import CommandAction
from bridge.codex.messages import decode_item
from bridge.engine.views import diffs
from bridge.engine.views.command_kind import command_kind
from bridge.engine.views.content import fenced
from bridge.engine.views.tool_views import (
    LIVE_OUTPUT_CHARS,
    command_locations,
    history_updates,
    unwrap_shell,
)
from tests.support.acp_schema import ConversationValidator
from tests.support.engine_harness import Harness

THREAD, TURN, CWD = "thread-1", "turn-1", "/work"


# -- helpers -------------------------------------------------------------------------------------


def session(capabilities: dict[str, Any] | None = None) -> Harness:
    h = Harness()
    h.client_request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities or {}})
    h.new_session(THREAD, cwd=CWD)
    return h


def started(h: Harness, item: dict[str, Any], thread: str = THREAD) -> None:
    h.codex_notify("item/started", {"threadId": thread, "turnId": TURN, "item": item})


def completed(h: Harness, item: dict[str, Any], thread: str = THREAD) -> None:
    h.codex_notify("item/completed", {"threadId": thread, "turnId": TURN, "item": item})


def tool_updates(h: Harness) -> list[dict[str, Any]]:
    return [u for u in h.updates() if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


def assert_valid(h: Harness) -> None:
    """Everything the bridge sent the client is valid ACP (schema, per method)."""
    validator = ConversationValidator()
    for message in h.to_client:
        if "method" in message or "id" not in message:
            validator.agent_sent(message)


def texts(update: dict[str, Any]) -> list[str]:
    return [
        c["content"]["text"]
        for c in update.get("content", [])
        if c["type"] == "content" and c["content"]["type"] == "text"
    ]


def command(
    status: str = "inProgress",
    *,
    item_id: str = "call_1",
    cmd: str = "/bin/bash -lc 'echo hi'",
    actions: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "type": "commandExecution",
        "id": item_id,
        "command": cmd,
        "cwd": CWD,
        "processId": "123",
        "source": "unifiedExecStartup",
        "status": status,
        "commandActions": actions
        if actions is not None
        else [{"type": "unknown", "command": "echo hi"}],
        "aggregatedOutput": None,
        "exitCode": None,
        "durationMs": None,
        **extra,
    }


def delta(h: Harness, text: str, item_id: str = "call_1") -> None:
    h.codex_notify(
        "item/commandExecution/outputDelta",
        {"threadId": THREAD, "turnId": TURN, "itemId": item_id, "delta": text},
    )


def file_change(changes: list[dict[str, Any]], status: str = "inProgress") -> dict[str, Any]:
    return {"type": "fileChange", "id": "call_p", "changes": changes, "status": status}


def update_change(path: str, diff: str, move_path: str | None = None) -> dict[str, Any]:
    return {"path": path, "kind": {"type": "update", "move_path": move_path}, "diff": diff}


def client_requests(h: Harness, method: str) -> list[dict[str, Any]]:
    return [m for m in h.to_client if m.get("method") == method and "id" in m]


def client_answers(h: Harness, rid: Any, result: Any = None, error: str | None = None) -> None:
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
    if error is None:
        reply["result"] = result
    else:
        reply["error"] = {"code": -32603, "message": error}
    h.client_raw(msgspec.json.encode(reply))


# -- titles and kinds of commands ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command_line", "title"),
    [
        ("/bin/bash -lc 'echo hi'", "echo hi"),
        ("bash -c 'ls -la | head -n 3'", "ls -la | head -n 3"),
        ('/usr/bin/zsh -lc "git status --short"', "git status --short"),
        ("bash -l -c 'make test'", "make test"),
        ("sh -c 'cd /tmp && make'", "cd /tmp && make"),
        ("/bin/bash -lc 'cat <<EOF\nline\nEOF'", "cat <<EOF\nline\nEOF"),
        ("pwsh -NoProfile -Command Get-ChildItem -Force", "Get-ChildItem -Force"),
        ("cmd.exe /c dir /s", "dir /s"),
        # Not a shell wrapper: shown as Codex gives it.
        ("echo hi", "echo hi"),
        ("python -c 'print(1)'", "python -c 'print(1)'"),
        ("bash script.sh -c x", "bash script.sh -c x"),
        ("bash --norc -c 'x'", "bash --norc -c 'x'"),
        ("/bin/bash -lc 'unbalanced", "/bin/bash -lc 'unbalanced"),
        ("bash -lc", "bash -lc"),
    ],
)
def test_a_command_title_is_the_command_without_its_shell_wrapper(
    command_line: str, title: str
) -> None:
    assert unwrap_shell(command_line) == title


@pytest.mark.parametrize(
    ("types", "kind"),
    [
        (["read"], "read"),
        (["read", "read"], "read"),
        (["search"], "search"),
        (["listFiles"], "search"),
        (["read", "search"], "search"),
        (["read", "unknown"], "execute"),
        (["unknown"], "execute"),
        ([], "execute"),
        (["someFutureType"], "execute"),
    ],
)
def test_a_simple_commands_kind_follows_codex_command_actions(types: list[str], kind: str) -> None:
    actions = [CommandAction(type=t, command="x") for t in types]
    assert command_kind("x", actions) == kind  # one simple command: tests/test_command_kinds.py


def test_locations_are_absolute_paths_from_the_actions() -> None:
    actions = [
        CommandAction(type="read", command="cat a", name="a", path="/w/a.txt"),
        CommandAction(type="listFiles", command="ls sub", path="sub"),
        CommandAction(type="search", command="rg x .", query="x", path="."),
        CommandAction(type="search", command="rg y", query="y"),
        CommandAction(type="read", command="cat a", name="a", path="/w/a.txt"),
        CommandAction(type="unknown", command="make"),
    ]
    assert [loc.path for loc in command_locations(actions, "/w")] == ["/w/a.txt", "/w/sub", "/w"]
    assert command_locations(actions[1:2], "") == []  # no base for a relative path


@pytest.mark.parametrize(
    ("text", "info", "expected"),
    [
        ("hi\n", "", "```\nhi\n```"),
        ("no newline", "py", "```py\nno newline\n```"),
        ("a ``` b\n", "", "````\na ``` b\n````"),
        ("`````\n", "", "``````\n`````\n``````"),
    ],
)
def test_output_is_fenced_so_no_line_can_close_the_fence(
    text: str, info: str, expected: str
) -> None:
    assert fenced(text, info) == expected


# -- diff reconstruction ---------------------------------------------------------------------------

BIG_OLD = "".join(f"l{i}\n" for i in range(1, 41))
BIG_NEW = BIG_OLD.replace("l11\n", "L11\n").replace("l31\n", "L31\n")
BIG_DIFF = "@@ -10,3 +10,3 @@\n l10\n-l11\n+L11\n l12\n@@ -30,3 +30,3 @@\n l30\n-l31\n+L31\n l32\n"
SHIFT_OLD = "a\nb\nc\nd\ne\nf\ng\nh\n"
SHIFT_NEW = "a\nNEW1\nNEW2\nb\nc\nd\ne\nf\nh\n"
SHIFT_DIFF = "@@ -1,2 +1,4 @@\n a\n+NEW1\n+NEW2\n b\n@@ -6,3 +8,2 @@\n f\n-g\n h\n"
NONL_OLD, NONL_NEW = "first\nlast", "first\nLAST\n"
NONL_DIFF = "@@ -1,2 +1,2 @@\n first\n-last\n\\ No newline at end of file\n+LAST\n"
ADD_TOP_OLD, ADD_TOP_NEW = "x\n", "new\nx\n"
ADD_TOP_DIFF = "@@ -1 +1,2 @@\n+new\n x\n"
CUT_OLD, CUT_NEW = "keep\ndrop1\ndrop2\n", "keep\n"
CUT_DIFF = "@@ -1,3 +1 @@\n keep\n-drop1\n-drop2\n"
CRLF_OLD, CRLF_NEW = "one\r\ntwo\r\n", "one\r\nTWO\r\n"
CRLF_DIFF = "@@ -1,2 +1,2 @@\n one\r\n-two\r\n+TWO\r\n"
MOVED_DIFF = "@@ -1 +1 @@\n-m\n+M\n\n\nMoved to: /w/moved.txt"


@pytest.mark.parametrize(
    ("diff", "old", "new"),
    [
        (BIG_DIFF, BIG_OLD, BIG_NEW),
        (SHIFT_DIFF, SHIFT_OLD, SHIFT_NEW),
        (NONL_DIFF, NONL_OLD, NONL_NEW),
        (ADD_TOP_DIFF, ADD_TOP_OLD, ADD_TOP_NEW),
        (CUT_DIFF, CUT_OLD, CUT_NEW),
        (CRLF_DIFF, CRLF_OLD, CRLF_NEW),
        (MOVED_DIFF, "m\n", "M\n"),
    ],
    ids=["two-hunks", "shifted-lines", "no-newline", "insert-at-top", "cut", "crlf", "moved"],
)
def test_both_whole_texts_are_rebuilt_from_the_file_before_or_after_the_patch(
    diff: str, old: str, new: str
) -> None:
    hunks = diffs.parse_hunks(diff)
    assert diffs.rebuild(hunks, old) == (old, new), "from the file as it was"
    assert diffs.rebuild(hunks, new) == (old, new), "from the file already patched"


def test_hunk_sides_are_exact_excerpts_of_the_two_texts() -> None:
    hunks = diffs.parse_hunks(BIG_DIFF + "trailing junk\n")
    assert [(h.old_start, h.old_count, h.new_start, h.new_count) for h in hunks] == [
        (10, 3, 10, 3),
        (30, 3, 30, 3),
    ]
    assert [(h.old_text, h.new_text) for h in hunks] == [
        ("l10\nl11\nl12\n", "l10\nL11\nl12\n"),
        ("l30\nl31\nl32\n", "l30\nL31\nl32\n"),
    ]
    [nonl] = diffs.parse_hunks(NONL_DIFF)
    assert (nonl.old_text, nonl.new_text) == ("first\nlast", "first\nLAST\n")


@pytest.mark.parametrize(
    "text",
    [
        "",  # an empty file
        BIG_OLD.replace("l10\n", "edited by the user\n"),  # neither side fits
        BIG_OLD.replace("l31\n", "L31\n"),  # half patched
        BIG_OLD[: len(BIG_OLD) // 4],  # shorter than the hunks reach
    ],
)
def test_a_text_that_fits_neither_side_is_not_trusted(text: str) -> None:
    assert diffs.rebuild(diffs.parse_hunks(BIG_DIFF), text) is None


def test_a_text_that_fits_both_sides_is_ambiguous_and_not_trusted() -> None:
    # A third "a" between two: "a\na\na\n" is the new text *and* an old one with more lines.
    hunks = diffs.parse_hunks("@@ -1,2 +1,3 @@\n a\n+a\n a\n")
    assert diffs.rebuild(hunks, "a\na\n") == ("a\na\n", "a\na\na\n")
    assert diffs.rebuild(hunks, "a\na\na\n") is None
    # An empty side fits anywhere: without context, the old text of a cut is ambiguous.
    cut = diffs.parse_hunks("@@ -2,2 +1,0 @@\n-b\n-c\n")
    assert diffs.rebuild(cut, "a\nb\nc\n") is None
    assert diffs.rebuild(cut, "a\n") == ("a\nb\nc\n", "a\n")
    assert diffs.rebuild([], "a\n") is None


@pytest.mark.parametrize(
    ("diff", "old", "new"),
    [
        # Appending and cutting at the end of a file: the end is where both sides differ.
        ("@@ -2,2 +2,4 @@\n b\n c\n+d\n+e\n", "a\nb\nc\n", "a\nb\nc\nd\ne\n"),
        ("@@ -2,3 +2 @@\n b\n-c\n-d\n", "a\nb\nc\nd\n", "a\nb\n"),
        # Codex's own context of one line; the same change in the middle of a file.
        ("@@ -1,2 +1,3 @@\n a\n b\n+c\n", "a\nb\n", "a\nb\nc\n"),
    ],
    ids=["append", "cut-the-end", "append-short-file"],
)
def test_a_last_hunk_short_of_context_marks_the_end_of_the_file(
    diff: str, old: str, new: str
) -> None:
    hunks = diffs.parse_hunks(diff)
    assert diffs.rebuild(hunks, old) == (old, new)
    assert diffs.rebuild(hunks, new) == (old, new)
    # Without the end, the appended lines would be ambiguous: old and new both fit.
    assert diffs.rebuild(hunks, old + "more\n") is None


@pytest.mark.parametrize(
    "diff",
    [
        "@@ -1,3 +1,3 @@\n a\n-b\n",  # too short
        "@@ -1,2 +1 @@\n a\n b\n c\n",  # overruns the new side
        "@@ -1,2 +1,2 @@\n a\n?b\n",  # not a diff line
        "@@ -1,2 +1,2 @@\n a\n@@ -5 +5 @@\n x\n",  # a hunk cut by the next
    ],
)
def test_malformed_hunks_are_an_error(diff: str) -> None:
    with pytest.raises(diffs.DiffError):
        diffs.parse_hunks(diff)


def test_split_lines_keeps_line_ends_and_only_splits_on_newline() -> None:
    assert diffs.split_lines("a\r\nb\x0cc\nd") == ["a\r\n", "b\x0cc\n", "d"]
    assert diffs.split_lines("") == []


# -- commands, live -------------------------------------------------------------------------------


def test_a_command_is_a_tool_call_with_streamed_output_and_a_final_status() -> None:
    h = session()
    started(h, command())
    delta(h, "h")
    delta(h, "i\n")
    completed(
        h,
        command("completed", aggregatedOutput="warning\nhi\n", exitCode=0, durationMs=12),
    )
    call, first, second, final = tool_updates(h)
    assert call["sessionUpdate"] == "tool_call"
    assert call["toolCallId"] == "call_1"  # the Codex item id: approvals name the same
    assert (call["title"], call["kind"], call["status"]) == ("echo hi", "execute", "in_progress")
    assert call["rawInput"]["command"] == "/bin/bash -lc 'echo hi'"
    assert call["rawInput"]["cwd"] == CWD
    assert texts(first) == ["```\nh\n```"] and set(first) == {
        "sessionUpdate",
        "toolCallId",
        "content",
    }
    assert texts(second) == ["```\nhi\n```"]
    assert final["sessionUpdate"] == "tool_call_update"
    assert final["status"] == "completed"
    # Codex's aggregated output is the final word (it has what the stream missed).
    assert texts(final) == ["```\nwarning\nhi\n```"]
    assert final["rawOutput"] == {
        "status": "completed",
        "exitCode": 0,
        "durationMs": 12,
        "aggregatedOutput": "warning\nhi\n",
    }
    assert_valid(h)


def test_a_failed_command_says_its_exit_code() -> None:
    h = session()
    started(h, command())
    completed(h, command("failed", aggregatedOutput="boom\n", exitCode=3))
    final = tool_updates(h)[-1]
    assert final["status"] == "failed"
    assert texts(final) == ["```\nboom\n```", "Exit code 3"]
    assert final["rawOutput"]["exitCode"] == 3
    assert_valid(h)


def test_a_declined_command_fails_saying_it_did_not_run() -> None:
    h = session()
    started(h, command())
    completed(h, command("declined"))
    final = tool_updates(h)[-1]
    assert final["status"] == "failed"
    assert texts(final) == ["Declined: the command did not run."]
    assert final["rawOutput"]["status"] == "declined"
    assert_valid(h)


@pytest.mark.parametrize(
    ("actions", "kind", "paths"),
    [
        (
            [{"type": "read", "command": "cat a.py", "name": "a.py", "path": "/work/a.py"}],
            "read",
            ["/work/a.py"],
        ),
        (
            [{"type": "search", "command": "rg foo src", "query": "foo", "path": "src"}],
            "search",
            ["/work/src"],
        ),
        ([{"type": "listFiles", "command": "ls", "path": None}], "search", []),
        (
            [
                {"type": "read", "command": "cat a.py", "name": "a.py", "path": "/work/a.py"},
                {"type": "unknown", "command": "wc -l"},
            ],
            "execute",
            ["/work/a.py"],
        ),
    ],
)
def test_read_and_search_commands_get_their_kind_and_locations(
    actions: list[dict[str, Any]], kind: str, paths: list[str]
) -> None:
    h = session()
    started(h, command(actions=actions))
    [call] = tool_updates(h)
    assert call["kind"] == kind
    assert [loc["path"] for loc in call["locations"]] == paths
    assert_valid(h)


def test_a_file_read_shows_its_output_highlighted_as_the_file() -> None:
    h = session()
    read = [{"type": "read", "command": "cat a.py", "name": "a.py", "path": "/work/a.py"}]
    started(h, command(actions=read, cmd="/bin/bash -lc 'cat a.py'"))
    completed(h, command("completed", actions=read, aggregatedOutput="x = 1\n", exitCode=0))
    assert texts(tool_updates(h)[-1]) == ["```py\nx = 1\n```"]


def test_a_long_running_output_is_sent_as_its_tail_while_it_runs() -> None:
    h = session()
    started(h, command())
    line = "x" * 99 + "\n"
    delta(h, line * (LIVE_OUTPUT_CHARS // 100 + 50))
    [shown] = texts(tool_updates(h)[-1])
    assert len(shown) <= LIVE_OUTPUT_CHARS + 20
    assert shown.startswith("```\n…\n" + line)
    completed(h, command("completed", aggregatedOutput=line * 3, exitCode=0))
    assert texts(tool_updates(h)[-1]) == ["```\n" + line * 3 + "```"]


def test_output_and_stdin_of_unknown_or_finished_commands_are_ignored() -> None:
    h = session()
    delta(h, "stray", item_id="nobody")
    started(h, command())
    completed(h, command("completed", aggregatedOutput="", exitCode=0))
    before = len(h.to_client)
    delta(h, "late")
    h.codex_notify(
        "item/commandExecution/terminalInteraction",
        {"threadId": THREAD, "turnId": TURN, "itemId": "call_1", "processId": "1", "stdin": "y\n"},
    )
    assert len(h.to_client) == before


def test_stdin_written_to_a_running_command_shows_in_its_output() -> None:
    h = session()
    started(h, command())
    delta(h, "Continue? ")
    h.codex_notify(
        "item/commandExecution/terminalInteraction",
        {"threadId": THREAD, "turnId": TURN, "itemId": "call_1", "processId": "1", "stdin": "y\n"},
    )
    assert texts(tool_updates(h)[-1]) == ["```\nContinue? y\n```"]


# -- commands in Zed's terminal ------------------------------------------------------------------------

ZED = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True,
       "_meta": {"terminal_output": True, "terminal-auth": True}}  # fmt: skip


def test_a_client_that_declares_terminal_output_gets_the_command_as_a_terminal() -> None:
    h = session(ZED)
    started(h, command())
    delta(h, "hi\n")
    completed(h, command("failed", aggregatedOutput="hi\n", exitCode=2))
    call, out, final = tool_updates(h)
    assert call["content"] == [{"type": "terminal", "terminalId": "call_1"}]
    assert call["_meta"] == {"terminal_info": {"terminal_id": "call_1", "cwd": CWD}}
    assert out == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_1",
        "_meta": {"terminal_output": {"terminal_id": "call_1", "data": "hi\n"}},
    }
    assert final["status"] == "failed"
    assert final["content"] == [
        {"type": "terminal", "terminalId": "call_1"},
        {"type": "content", "content": {"type": "text", "text": "Exit code 2"}},
    ]
    assert final["_meta"] == {
        "terminal_exit": {"terminal_id": "call_1", "exit_code": 2, "signal": None}
    }
    assert final["rawOutput"]["aggregatedOutput"] == "hi\n"
    assert_valid(h)


def test_a_terminal_gets_the_whole_output_at_the_end_when_nothing_streamed() -> None:
    h = session(ZED)
    started(h, command())
    completed(h, command("completed", aggregatedOutput="all at once\n", exitCode=0))
    _call, out, final = tool_updates(h)
    assert out["_meta"] == {"terminal_output": {"terminal_id": "call_1", "data": "all at once\n"}}
    assert final["_meta"]["terminal_exit"]["exit_code"] == 0


def test_a_killed_command_has_no_exit_code_in_the_terminal() -> None:
    h = session(ZED)
    started(h, command())
    completed(h, command("failed", aggregatedOutput="", exitCode=-1))
    assert tool_updates(h)[-1]["_meta"]["terminal_exit"]["exit_code"] is None


def test_file_reads_stay_text_even_for_a_terminal_client() -> None:
    h = session(ZED)
    read = [{"type": "read", "command": "cat a", "name": "a", "path": "/work/a"}]
    started(h, command(actions=read))
    delta(h, "content\n")
    call, out = tool_updates(h)
    assert call["content"] == [] and "_meta" not in call
    assert texts(out) == ["```\ncontent\n```"]


@pytest.mark.parametrize("meta", [None, {}, {"terminal_output": False}, {"terminal_output": "yes"}])
def test_without_the_declaration_no_terminal_is_ever_referenced(meta: Any) -> None:
    capabilities: dict[str, Any] = {"terminal": True}
    if meta is not None:
        capabilities["_meta"] = meta
    h = session(capabilities)
    started(h, command())
    delta(h, "hi\n")
    completed(h, command("completed", aggregatedOutput="hi\n", exitCode=0))
    for update in tool_updates(h):
        assert "_meta" not in update
        assert all(c["type"] != "terminal" for c in update.get("content", []))


# -- file changes ----------------------------------------------------------------------------------

PATCH = [
    update_change("/work/a.txt", "@@ -1,3 +1,3 @@\n line1\n-line2\n+LINE2\n line3\n"),
    {"path": "/work/gone.txt", "kind": {"type": "delete"}, "diff": "bye\n"},
    {"path": "/work/new.txt", "kind": {"type": "add"}, "diff": "hello\nworld\n"},
]


def test_a_patch_is_an_edit_with_a_diff_per_file_and_its_locations() -> None:
    h = session()
    started(h, file_change(PATCH))
    completed(h, file_change(PATCH, "completed"))
    call, final = tool_updates(h)
    assert (call["kind"], call["status"]) == ("edit", "in_progress")
    assert call["title"] == "Edit 3 files: a.txt, gone.txt, new.txt"
    a, gone, new = call["content"]
    assert (a["type"], a["path"], a["oldText"], a["newText"]) == (
        "diff",
        "/work/a.txt",
        "line1\nline2\nline3\n",
        "line1\nLINE2\nline3\n",
    )
    assert a["_meta"] == {"hunk": {"oldStart": 1, "oldLines": 3, "newStart": 1, "newLines": 3}}
    assert (gone["oldText"], gone["newText"]) == ("bye\n", "")
    assert new["newText"] == "hello\nworld\n"
    assert new.get("oldText") is None  # null or absent: a new file
    assert call["locations"] == [
        {"path": "/work/a.txt", "line": 1},
        {"path": "/work/gone.txt"},
        {"path": "/work/new.txt", "line": 1},
    ]
    assert final["status"] == "completed"
    assert final["content"] == call["content"]
    assert_valid(h)


@pytest.mark.parametrize(
    ("change", "title"),
    [
        ({"path": "/work/n.txt", "kind": {"type": "add"}, "diff": "x\n"}, "Create n.txt"),
        ({"path": "/work/d.txt", "kind": {"type": "delete"}, "diff": "x\n"}, "Delete d.txt"),
        (update_change("/work/src/u.py", "@@ -1 +1 @@\n-a\n+b\n"), "Edit src/u.py"),
        (update_change("/elsewhere/u.py", "@@ -1 +1 @@\n-a\n+b\n"), "Edit /elsewhere/u.py"),
        (
            update_change("/work/m.txt", MOVED_DIFF, move_path="/work/moved.txt"),
            "Move m.txt → moved.txt",
        ),
    ],
)
def test_a_single_file_change_is_titled_by_what_happens_to_it(
    change: dict[str, Any], title: str
) -> None:
    h = session()
    started(h, file_change([change]))
    assert tool_updates(h)[0]["title"] == title
    assert_valid(h)


def test_an_update_known_only_by_hunks_shows_one_diff_per_hunk() -> None:
    h = session()
    started(h, file_change([update_change("/work/big.txt", BIG_DIFF)]))
    [call] = tool_updates(h)
    assert [(d["oldText"], d["newText"]) for d in call["content"]] == [
        ("l10\nl11\nl12\n", "l10\nL11\nl12\n"),
        ("l30\nl31\nl32\n", "l30\nL31\nl32\n"),
    ]
    assert [d["_meta"]["hunk"]["newStart"] for d in call["content"]] == [10, 30]
    assert call["locations"] == [{"path": "/work/big.txt", "line": 10}]
    assert not client_requests(h, "fs/read_text_file"), "the client did not offer to read files"


def test_a_malformed_diff_is_shown_as_text_not_guessed() -> None:
    h = session()
    started(h, file_change([update_change("/work/x.txt", "@@ -1,5 +1,5 @@\n a\n")]))
    [call] = tool_updates(h)
    assert texts(call) == ["```diff\n@@ -1,5 +1,5 @@\n a\n```"]
    assert_valid(h)


@pytest.mark.parametrize("read_when", ["before the patch", "after the patch"])
def test_a_client_that_reads_files_gets_whole_old_and_new_texts(read_when: str) -> None:
    h = session(ZED)
    started(h, file_change([update_change("/work/big.txt", BIG_DIFF)]))
    [read] = client_requests(h, "fs/read_text_file")
    assert read["params"] == {"sessionId": THREAD, "path": "/work/big.txt"}
    completed(h, file_change([update_change("/work/big.txt", BIG_DIFF)], "completed"))
    # The answer may come after Codex wrote the patch: the rebuild tells which text it got.
    client_answers(
        h, read["id"], {"content": BIG_OLD if read_when == "before the patch" else BIG_NEW}
    )
    call, final, whole = tool_updates(h)
    assert len(call["content"]) == 2  # hunks until the file is known
    assert final["status"] == "completed"
    assert set(whole) == {"sessionUpdate", "toolCallId", "content"}
    assert whole["content"] == [
        {"type": "diff", "path": "/work/big.txt", "oldText": BIG_OLD, "newText": BIG_NEW}
    ]
    assert_valid(h)


def test_a_file_read_that_fits_neither_side_leaves_the_hunks() -> None:
    h = session(ZED)
    started(h, file_change([update_change("/work/big.txt", BIG_DIFF)]))
    [read] = client_requests(h, "fs/read_text_file")
    before = len(h.to_client)
    client_answers(h, read["id"], {"content": "the user rewrote this file\n"})
    assert len(h.to_client) == before, "nothing changes: no update"
    client_answers(h, 999, {"content": "an answer to nothing"})  # ignored, logged
    completed(h, file_change([update_change("/work/big.txt", BIG_DIFF)], "completed"))
    assert len(tool_updates(h)[-1]["content"]) == 2


def test_a_refused_read_leaves_the_hunks_and_a_moved_file_is_read_where_it_went() -> None:
    h = session(ZED)
    change = update_change("/work/m.txt", MOVED_DIFF, move_path="/work/moved.txt")
    started(h, file_change([change]))
    [first] = client_requests(h, "fs/read_text_file")
    assert first["params"]["path"] == "/work/m.txt"
    client_answers(h, first["id"], error="no such file")
    second = client_requests(h, "fs/read_text_file")[-1]
    assert second["params"]["path"] == "/work/moved.txt"
    client_answers(h, second["id"], {"content": "M\n"})
    whole = tool_updates(h)[-1]
    assert whole["content"] == [
        {"type": "diff", "path": "/work/moved.txt", "oldText": "m\n", "newText": "M\n"}
    ]
    # A plain refusal: the hunks stay, nothing else is asked.
    h2 = session(ZED)
    started(h2, file_change([update_change("/work/big.txt", BIG_DIFF)]))
    [read] = client_requests(h2, "fs/read_text_file")
    client_answers(h2, read["id"], error="not in the project")
    assert len(client_requests(h2, "fs/read_text_file")) == 1
    assert len(tool_updates(h2)) == 1


def test_added_and_deleted_files_are_not_read_they_are_whole_in_the_patch() -> None:
    h = session(ZED)
    started(h, file_change(PATCH[1:]))
    assert client_requests(h, "fs/read_text_file") == []


def test_a_declined_patch_fails_and_says_so_keeping_its_diffs() -> None:
    h = session()
    started(h, file_change(PATCH[2:]))
    completed(h, file_change(PATCH[2:], "declined"))
    final = tool_updates(h)[-1]
    assert final["status"] == "failed"
    assert final["content"][0]["type"] == "diff"
    assert texts(final) == ["Declined: the change was not applied."]


def test_a_patch_still_being_written_updates_its_diffs() -> None:
    h = session()
    started(h, file_change([]))
    h.codex_notify(
        "item/fileChange/patchUpdated",
        {"threadId": THREAD, "turnId": TURN, "itemId": "call_p", "changes": PATCH[2:]},
    )
    call, update = tool_updates(h)
    assert call["content"] == [] and call["title"] == "Edit files"
    assert update["title"] == "Create new.txt"
    assert update["content"][0]["newText"] == "hello\nworld\n"
    assert update["locations"] == [{"path": "/work/new.txt", "line": 1}]
    assert_valid(h)


# -- other tools ---------------------------------------------------------------------------------------


def mcp(status: str = "inProgress", **extra: Any) -> dict[str, Any]:
    return {
        "type": "mcpToolCall",
        "id": "call_m",
        "server": "docs",
        "tool": "lookup",
        "status": status,
        "arguments": {"q": "trio"},
        "result": None,
        "error": None,
        **extra,
    }


def test_an_mcp_tool_call_shows_its_result_blocks() -> None:
    h = session()
    started(h, mcp())
    h.codex_notify(
        "item/mcpToolCall/progress",
        {"threadId": THREAD, "turnId": TURN, "itemId": "call_m", "message": "halfway"},
    )
    blocks = [
        {"type": "text", "text": "found it"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "resource_link", "uri": "https://x.test/doc", "name": "doc"},
        {"type": "resource", "resource": {"uri": "file:///a", "text": "A"}},
        {"type": "hologram", "beam": 1},
    ]
    result = {"content": blocks, "structuredContent": None, "_meta": None}
    completed(h, mcp("completed", result=result, durationMs=3))
    call, progress, final = tool_updates(h)
    assert (call["title"], call["kind"], call["rawInput"]) == (
        "docs: lookup",
        "other",
        {"q": "trio"},
    )
    assert texts(progress) == ["halfway"]
    assert final["status"] == "completed"
    assert [c["content"] for c in final["content"][:4]] == blocks[:4]
    assert final["content"][4]["content"]["text"].startswith("```json\n")  # kept, as JSON
    assert final["rawOutput"]["content"] == blocks
    assert_valid(h)


def test_a_failed_mcp_tool_call_shows_its_error() -> None:
    h = session()
    started(h, mcp())
    completed(h, mcp("failed", error={"message": "server went away"}))
    final = tool_updates(h)[-1]
    assert final["status"] == "failed"
    assert texts(final) == ["server went away"]
    assert final["rawOutput"] == {"error": "server went away"}
    assert_valid(h)


def test_structured_mcp_output_without_blocks_is_shown_as_json() -> None:
    h = session()
    completed(h, mcp("completed", result={"content": [], "structuredContent": {"n": 1}}))
    [call] = tool_updates(h)
    assert call["sessionUpdate"] == "tool_call"  # never seen starting: announced whole
    assert texts(call) == ['```json\n{\n  "n": 1\n}\n```']


def test_a_dynamic_tool_call_shows_its_content_items() -> None:
    h = session()
    item = {
        "type": "dynamicToolCall",
        "id": "call_d",
        "tool": "screenshot",
        "namespace": "app",
        "arguments": {"window": 1},
        "status": "inProgress",
    }
    started(h, item)
    items = [
        {"type": "inputText", "text": "here"},
        {"type": "inputImage", "imageUrl": "data:image/png;base64,iVBORw0KGgo="},
        {"type": "inputImage", "imageUrl": "https://x.test/shot.png"},
        {"type": "inputAudio", "audioUrl": "data:audio/wav;base64,UklGRg=="},
    ]
    completed(h, {**item, "status": "completed", "success": False, "contentItems": items})
    call, final = tool_updates(h)
    assert (call["title"], call["kind"]) == ("app/screenshot", "other")
    assert final["status"] == "failed"  # completed, but the tool said it did not succeed
    assert [c["content"]["type"] for c in final["content"]] == [
        "text",
        "image",
        "resource_link",
        "audio",
    ]
    assert final["content"][1]["content"] == {
        "type": "image",
        "data": "iVBORw0KGgo=",
        "mimeType": "image/png",
    }
    assert_valid(h)


@pytest.mark.parametrize(
    ("action", "query", "kind", "title"),
    [
        (
            {"type": "search", "query": "trio", "queries": None},
            "trio",
            "search",
            "Search the web: trio",
        ),
        ({"type": "search", "queries": ["a", "b"]}, "", "search", "Search the web: a | b"),
        ({"type": "openPage", "url": "https://x.test/p"}, "", "fetch", "Open https://x.test/p"),
        (
            {"type": "findInPage", "url": "https://x.test/p", "pattern": "needle"},
            "",
            "fetch",
            'Find "needle" in https://x.test/p',
        ),
        ({"type": "other"}, "", "search", "Search the web"),
        (None, "plain", "search", "Search the web: plain"),
    ],
)
def test_a_web_search_is_titled_by_its_action(
    action: dict[str, Any] | None, query: str, kind: str, title: str
) -> None:
    h = session()
    item = {"type": "webSearch", "id": "ws_1", "query": "", "action": {"type": "search"}}
    started(h, item)
    completed(h, {**item, "query": query, "action": action})
    call, final = tool_updates(h)
    assert (call["title"], call["status"]) == ("Search the web", "in_progress")
    assert (final["kind"], final["title"], final["status"]) == (kind, title, "completed")
    assert_valid(h)


def test_an_image_view_links_the_image_and_its_location() -> None:
    h = session()
    item = {"type": "imageView", "id": "call_i", "path": "/work/pics/a b.png"}
    started(h, item)
    completed(h, item)
    call, final = tool_updates(h)
    assert (call["title"], call["kind"]) == ("View image pics/a b.png", "read")
    assert call["content"] == [
        {
            "type": "content",
            "content": {
                "type": "resource_link",
                "uri": "file:///work/pics/a%20b.png",
                "name": "a b.png",
                "mimeType": "image/png",
            },
        }
    ]
    assert call["locations"] == [{"path": "/work/pics/a b.png"}]
    assert final["status"] == "completed"
    assert_valid(h)


def test_context_compaction_is_a_tool_call_or_a_compaction_update_when_declared() -> None:
    item = {"type": "contextCompaction", "id": "cmp_1"}
    h = session()
    started(h, item)
    completed(h, item)
    call, final = tool_updates(h)
    assert (call["kind"], call["status"], final["status"]) == ("other", "in_progress", "completed")
    assert texts(final) == ["The conversation so far was compacted."]
    assert_valid(h)

    declared = session({"session": {"compaction": {}}})
    started(declared, item)
    completed(declared, item)
    assert [u for u in declared.updates() if u["sessionUpdate"] != "usage_update"] == [
        {"sessionUpdate": "compaction_update", "compactionId": "cmp_1", "status": "in_progress"},
        {"sessionUpdate": "compaction_update", "compactionId": "cmp_1", "status": "completed"},
    ]


# -- plans and names -------------------------------------------------------------------------------------


def test_a_plan_update_is_an_acp_plan_with_every_step() -> None:
    h = session()
    h.codex_notify(
        "turn/plan/updated",
        {
            "threadId": THREAD,
            "turnId": TURN,
            "explanation": "starting",
            "plan": [
                {"step": "read", "status": "completed"},
                {"step": "write", "status": "inProgress"},
                {"step": "test", "status": "pending"},
                {"step": "ship", "status": "someday"},
            ],
        },
    )
    [plan] = h.updates()
    assert plan == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "read", "priority": "medium", "status": "completed"},
            {"content": "write", "priority": "medium", "status": "in_progress"},
            {"content": "test", "priority": "medium", "status": "pending"},
            {"content": "ship", "priority": "medium", "status": "pending"},
        ],
        "_meta": {"explanation": "starting"},
    }
    h.codex_notify("turn/plan/updated", {"threadId": THREAD, "turnId": TURN, "plan": []})
    assert h.updates()[-1] == {"sessionUpdate": "plan", "entries": []}
    assert_valid(h)


def test_a_thread_name_is_the_session_title() -> None:
    h = session()
    h.codex_notify("thread/name/updated", {"threadId": THREAD, "threadName": "Fix the build"})
    h.codex_notify("thread/name/updated", {"threadId": THREAD, "threadName": None})
    assert h.updates() == [
        {"sessionUpdate": "session_info_update", "title": "Fix the build"},
        {"sessionUpdate": "session_info_update", "title": None},
    ]
    assert_valid(h)


# -- bad input -----------------------------------------------------------------------------------------


def test_items_of_other_threads_and_other_kinds_are_not_shown() -> None:
    # (Sub-agent collab items are the Subagents feature's: see tests/test_subagents.py.)
    h = session()
    started(h, command(), thread="someone-else")
    h.codex_notify("turn/plan/updated", {"threadId": "someone-else", "turnId": TURN, "plan": []})
    h.codex_notify("thread/name/updated", {"threadId": "someone-else", "threadName": "x"})
    others: list[dict[str, Any]] = [
        {"type": "sleep", "id": "s", "durationMs": 5},
        {"type": "someFutureTool", "id": "f"},
        {"type": "agentMessage", "id": "m", "text": ""},
    ]  # fmt: skip
    for item in others:
        started(h, item)
    assert tool_updates(h) == []


def test_a_malformed_tool_item_is_skipped_and_the_session_keeps_working() -> None:
    h = session()
    started(h, {"type": "commandExecution", "id": "bad", "status": 7})  # no command
    started(h, {"type": "fileChange", "id": "worse", "changes": "nope"})
    assert tool_updates(h) == []
    started(h, command())
    completed(h, command("completed", aggregatedOutput="ok\n", exitCode=0))
    assert [u["status"] for u in tool_updates(h)] == ["in_progress", "completed"]
    assert_valid(h)


def test_an_announced_call_whose_completion_is_malformed_ends_as_failed() -> None:
    h = session()
    started(h, command())
    completed(h, {"type": "commandExecution", "id": "call_1", "command": ["not", "a", "string"]})
    final = tool_updates(h)[-1]
    assert (final["toolCallId"], final["status"]) == ("call_1", "failed")
    assert texts(final) and "does not understand" in texts(final)[0]
    # An unannounced malformed completion says nothing at all.
    completed(h, {"type": "commandExecution", "id": "other", "command": 5})
    assert tool_updates(h)[-1] is final
    assert_valid(h)


def test_a_repeated_start_does_not_announce_a_call_twice() -> None:
    h = session()
    started(h, command())
    started(h, command())
    completed(h, command("completed", exitCode=0, aggregatedOutput=""))
    completed(h, command("completed", exitCode=0, aggregatedOutput=""))
    kinds = [u["sessionUpdate"] for u in tool_updates(h)]
    assert kinds == ["tool_call", "tool_call_update", "tool_call_update"]


# -- history -------------------------------------------------------------------------------------------


def encoded(item: dict[str, Any]) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode(item))


def test_history_shows_a_finished_command_as_one_tool_call_with_its_final_state() -> None:
    [call] = history_updates(
        decode_item(encoded(command("failed", aggregatedOutput="nope\n", exitCode=1))), cwd=CWD
    )
    shown = msgspec.to_builtins(call)
    assert shown["sessionUpdate"] == "tool_call"
    assert (shown["toolCallId"], shown["title"], shown["status"]) == ("call_1", "echo hi", "failed")
    assert texts(shown) == ["```\nnope\n```", "Exit code 1"]
    ConversationValidator().agent_sent(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "s", "update": shown},
        }
    )


@pytest.mark.parametrize(
    ("item", "status", "title"),
    [
        (command("inProgress"), "failed", "echo hi"),  # its turn was cut short: it never ends
        (file_change(PATCH, "completed"), "completed", "Edit 3 files: a.txt, gone.txt, new.txt"),
        (
            mcp("completed", result={"content": [{"type": "text", "text": "t"}]}),
            "completed",
            "docs: lookup",
        ),
        ({"type": "webSearch", "id": "w", "query": "q"}, "completed", "Search the web: q"),
        ({"type": "imageView", "id": "i", "path": "/work/a.png"}, "completed", "View image a.png"),
        ({"type": "contextCompaction", "id": "c"}, "completed", "Compact the conversation"),
    ],
)
def test_history_shows_each_tool_item_with_its_final_status(
    item: dict[str, Any], status: str, title: str
) -> None:
    [call] = history_updates(decode_item(encoded(item)), cwd=CWD)
    shown = msgspec.to_builtins(call)
    assert (shown["status"], shown["title"]) == (status, title)
    ConversationValidator().agent_sent(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "s", "update": shown},
        }
    )


@pytest.mark.parametrize(
    "item",
    [
        {"type": "userMessage", "id": "u", "content": []},
        {"type": "agentMessage", "id": "a", "text": "hi"},
        {"type": "reasoning", "id": "r", "summary": []},
        {"type": "collabAgentToolCall", "id": "c"},
        {"type": "commandExecution", "id": "bad"},  # malformed: logged, not shown
    ],
)
def test_history_shows_nothing_for_items_that_are_not_readable_tools(item: dict[str, Any]) -> None:
    assert history_updates(decode_item(encoded(item))) == []
