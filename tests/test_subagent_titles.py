"""Every sub-agent gets its title (Codex's nickname), whatever order Codex's answers come in.

A child's first ``thread/read`` can fail (Codex answers before the new thread is readable):
the spawn item alone then places it, without a nickname. The bridge reads it again and, once
Codex names it, patches its association with the title (the RFD's ``subagent_update``:
omitted fields are unchanged), for v1 clients with ``subagents`` and for v2 clients alike.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_subagents import CHILD, ROOT, Tree


def titles(t: Tree, child: str) -> list[Any]:
    """The title of ``child``'s announcement on its parent's stream (``None``: none), then
    each title a later update gave it."""
    first, *later = t.subagent_updates(child)
    return [first.get("title"), *(u["title"] for u in later if "title" in u)]


def failed_first_read(version: int) -> Tree:
    t = Tree(version=version)
    t.spawn_started("spawn-1")
    t.status(CHILD)
    t.fail_read(CHILD)
    t.collab_completed("spawn-1", "spawnAgent", CHILD)
    return t


@pytest.mark.parametrize("version", [1, 2])
def test_a_child_placed_before_codex_could_be_read_gets_its_title_once_named(
    version: int,
) -> None:
    t = failed_first_read(version)
    assert t.announcements() == [(ROOT, CHILD)]
    assert titles(t, CHILD) == [None]
    t.answer_read(CHILD, ROOT, "Ada", role="explorer")
    assert titles(t, CHILD) == [None, "Ada"]
    [patch] = [u for u in t.subagent_updates(CHILD) if "title" in u]
    assert patch == {
        "sessionUpdate": "subagent_update",
        "sessionId": CHILD,
        "title": "Ada",
        "description": "explorer",
    }
    # The child works on, its state reported as before.
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child")
    assert t.states(CHILD)[-1] == {"state": "running"}
    t.check()


def test_a_wait_naming_a_child_placed_without_its_name_is_retitled_once_named() -> None:
    t = failed_first_read(1)
    t.collab_started("wait-1", "wait", CHILD)
    t.answer_read(CHILD, ROOT, "Ada")
    t.collab_completed("wait-1", "wait", CHILD, prompt=None)
    [wait] = [u for u in t.updates("tool_call_update", ROOT) if u["toolCallId"] == "wait-1"]
    assert wait["title"] == "Wait for Ada"
    t.check()


def test_a_child_codex_names_later_than_its_first_read_is_titled_at_the_next_collab_item() -> None:
    """Codex's first answer for a new child may lack its nickname: the spawn item that
    completes later (Codex has named it by then) makes the bridge read it again."""
    t = Tree(version=2)
    t.spawn_started("spawn-1")
    t.status(CHILD)
    t.answer_read(CHILD, ROOT, None)
    t.collab_completed("spawn-1", "spawnAgent", CHILD)
    assert titles(t, CHILD) == [None]
    t.answer_read(CHILD, ROOT, "Ada")
    assert titles(t, CHILD) == [None, "Ada"]
    t.check()
