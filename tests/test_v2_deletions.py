"""ACP v2: a file Codex deletes is a ``delete`` change with a patch that removes it (v1's
diff of it, unchanged, says so only by its empty new text)."""

from __future__ import annotations

from tests.test_tools import file_change, started, tool_updates
from tests.test_tools import session as v1_session
from tests.test_v2 import V2

DELETED = {"path": "/work/old.txt", "kind": {"type": "delete"}, "diff": "one\ntwo\n"}
EMPTIED = {
    "path": "/work/empty.txt",
    "kind": {"type": "update", "move_path": None},
    "diff": "@@ -1,1 +0,0 @@\n-gone\n",
}


def test_v2_a_deleted_file_is_a_delete_and_its_patch_removes_it() -> None:
    h = V2.with_turn()
    h.codex_notify(
        "item/started",
        {"threadId": "thread-1", "turnId": "turn-1", "item": file_change([DELETED, EMPTIED])},
    )
    [call] = [u for u in h.updates("thread-1") if u.get("toolCallId") == "call_p"]
    deleted, emptied = call["content"]
    assert deleted["changes"] == [{"operation": "delete", "path": "/work/old.txt"}]
    assert deleted["patch"]["text"] == (
        "diff --git /work/old.txt /work/old.txt\n"
        "deleted file mode 100644\n"
        "--- /work/old.txt\n"
        "+++ /dev/null\n"
        "@@ -1,2 +0,0 @@\n"
        "-one\n"
        "-two\n"
    )
    # A change that empties a file is no deletion.
    assert emptied["changes"] == [{"operation": "modify", "path": "/work/empty.txt"}]
    h.validate()


def test_v1_a_deleted_file_is_still_a_diff_to_empty_text() -> None:
    h = v1_session()
    started(h, file_change([DELETED]))
    [call] = tool_updates(h)
    assert call["content"] == [
        {"type": "diff", "path": "/work/old.txt", "oldText": "one\ntwo\n", "newText": ""}
    ]
