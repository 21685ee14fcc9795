"""AIR's diffPatch: one Git patch per changed file, from what Codex gives."""

from __future__ import annotations

from typing import Any

from bridge.codex import items as codex_items
from bridge.engine.views.git_patch import git_patch


def change(
    path: str, kind: str, diff: str, move_path: str | None = None
) -> codex_items.FileUpdateChange:
    return codex_items.FileUpdateChange(
        path=path, kind=codex_items.PatchChangeKind(type=kind, move_path=move_path), diff=diff
    )


def test_an_added_file_is_a_new_file_patch() -> None:
    assert git_patch(change("/w/new.txt", "add", "a\nb\n")) == (
        "diff --git a/w/new.txt b/w/new.txt\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/w/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n"
    )


def test_a_deleted_file_without_a_final_newline_says_so() -> None:
    assert git_patch(change("/w/old.txt", "delete", "x\ny")) == (
        "diff --git a/w/old.txt b/w/old.txt\ndeleted file mode 100644\n"
        "--- a/w/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n"
        "\\ No newline at end of file\n"
    )


def test_an_update_keeps_codexs_hunks_under_git_headers_and_a_move_is_a_rename() -> None:
    diff = "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\r\n+A\r\n b\nMoved to: /w/y.txt\n"
    assert git_patch(change("/w/x.txt", "update", diff, move_path="/w/y.txt")) == (
        "diff --git a/w/x.txt b/w/y.txt\nrename from w/x.txt\nrename to w/y.txt\n"
        "--- a/w/x.txt\n+++ b/w/y.txt\n@@ -1,2 +1,2 @@\n-a\r\n+A\r\n b\n"
    )


def test_a_path_with_a_space_ends_its_file_lines_with_a_tab() -> None:
    patch = git_patch(change("/w/my file.txt", "add", "a\n"))
    assert patch is not None and "+++ b/w/my file.txt\t\n" in patch


def test_what_no_patch_can_say_falls_back_to_the_plain_diff() -> None:
    assert git_patch(change("/w/empty.txt", "add", "")) is None
    assert git_patch(change("/w/bin", "add", "a\x00b")) is None
    assert git_patch(change('/w/q"uote.txt', "add", "a\n")) is None
    assert git_patch(change("/w/x.txt", "update", "@@ -1,3 +1,3 @@\n-a\n+b\n")) is None
    assert git_patch(change("/w/x.txt", "update", "Moved to: /w/y.txt\n", "/w/y.txt")) is None


def test_a_plain_diff_a_patch_client_gets_says_its_kind_as_a_patch_would() -> None:
    from bridge.engine.views.tool_views import describe

    item = codex_items.FileChangeItem(
        id="fc-1",
        status="completed",
        changes=[
            change("/w/empty.txt", "add", ""),
            change('/w/q"uote.txt', "update", "@@ -1,2 +1,2 @@\n-a\n+b\n c\n"),
            change("/w/ok.txt", "add", "a\n"),
        ],
    )
    metas: list[dict[str, Any]] = []
    for block in describe(item, patch=True).content:
        assert isinstance(block.meta, dict), block
        metas.append(block.meta)
    assert [m["kind"] for m in metas] == ["add", "update", "add"]
    assert metas[1]["hunk"]["oldStart"] == 1
    assert "jetbrains" in metas[2]
    # A client that asked for no patches: the plain diffs of every client.
    plain = [block.meta for block in describe(item).content]
    assert "kind" not in str(plain)
