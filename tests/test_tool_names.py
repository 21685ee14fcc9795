"""A tool call's ``name`` (stable schema, ``ToolCall.name``): the MCP or dynamic tool's own
name, else Codex's item kind; live, in a replayed history, in v1 and v2."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.codex.messages import decode_item
from bridge.engine.views.tool_views import history_updates
from tests.test_tools import (
    THREAD,
    assert_valid,
    command,
    completed,
    encoded,
    file_change,
    mcp,
    session,
    started,
    tool_updates,
)
from tests.test_v2 import V2

ITEMS = [
    pytest.param(command(), "commandExecution", id="command"),
    pytest.param(
        file_change([{"path": "/work/a.txt", "kind": {"type": "add"}, "diff": "a\n"}]),
        "fileChange",
        id="file-change",
    ),
    pytest.param(mcp(), "lookup", id="mcp"),
    pytest.param(
        {"type": "dynamicToolCall", "id": "call_d", "tool": "open_ticket", "status": "inProgress"},
        "open_ticket",
        id="dynamic",
    ),
    pytest.param({"type": "webSearch", "id": "call_w", "query": "trio"}, "webSearch", id="web"),
    pytest.param(
        {"type": "imageView", "id": "call_i", "path": "/work/a.png"}, "imageView", id="image"
    ),
]


@pytest.mark.parametrize(("item", "name"), ITEMS)
def test_v1_a_tool_call_names_its_tool_from_start_to_end(item: dict[str, Any], name: str) -> None:
    h = session()
    started(h, item)
    done = {**item, "status": "completed"} if "status" in item else item
    completed(h, done)
    updates = tool_updates(h)
    assert updates[0]["sessionUpdate"] == "tool_call"
    assert updates[0]["name"] == name
    assert updates[-1]["name"] == name
    assert_valid(h)


@pytest.mark.parametrize(("item", "name"), ITEMS)
def test_a_replayed_tool_call_names_its_tool(item: dict[str, Any], name: str) -> None:
    [first, *_] = [
        u
        for u in history_updates(decode_item(encoded(item)), cwd="/work")
        if hasattr(u, "toolCallId")
    ]
    assert first.name == name


def test_v2_the_tool_call_upsert_names_its_tool() -> None:
    h = V2.with_turn()
    started(h, mcp())
    completed(h, mcp("completed", result={"content": [], "structuredContent": None}))
    upserts = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "tool_call_update"]
    assert upserts and all(u["name"] == "lookup" for u in upserts if "title" in u)
    assert upserts[0]["name"] == "lookup"
    h.validate()
