"""What a Codex collab item looks like to an ACP client: session messages and tool calls.

Pure functions for :mod:`bridge.engine.features.subagents.subagents`, shared by the live path and
the replay of a loaded history (:func:`history_updates`), so a replayed call looks exactly as the
live one ended. A collab item (``collabAgentToolCall``) is one of the model's dealings
with its sub-agents:

===================  =================================  ====================================
Codex's ``tool``     with the ``subagents`` capability  without it
===================  =================================  ====================================
``spawnAgent``       a ``session_message`` per          a tool call ``Spawn NAME``
                     receiver (:func:`text_message`)
``sendInput``        a ``session_message`` per          a tool call ``Message NAME``
                     receiver
``wait``             a tool call ``Wait for NAME``,     the tool call alone
                     and each result as a message
                     from the sub-agent
``closeAgent``,      a tool call ``Close NAME`` /       the same
``resumeAgent``      ``Resume NAME``
===================  =================================  ====================================

NAME is Codex's nickname for each receiver (a :data:`Nickname` lookup says it), else
"sub-agent". A tool call's content is the prompt it sent and each receiver's state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET

from ....acp import subagents as acp_subagents
from ....acp import tools as acp_tools
from ....acp import types as acp_types
from ....codex import items as codex_items

#: Codex's nickname for a sub-agent thread, if it is known.
Nickname = Callable[[str], str | None]

_TITLES = {
    "spawnAgent": "Spawn",
    "sendInput": "Message",
    "wait": "Wait for",
    "closeAgent": "Close",
    "resumeAgent": "Resume",
}


def text_message(
    message_id: str, sender: str, recipient: str, text: str
) -> acp_subagents.SessionMessage:
    """One session-to-session message of plain text (outgoing or incoming view alike)."""
    return acp_subagents.SessionMessage(
        messageId=message_id,
        senderSessionId=sender,
        recipientSessionId=recipient,
        content=[acp_types.TextContent(text=text)],
    )


def is_message(item: codex_items.CollabAgentToolCallItem) -> bool:
    """A spawn or ``send_input``: a message to each receiver (with the capability)."""
    return item.tool in ("spawnAgent", "sendInput")


def agent_name(thread_id: str, nickname: Nickname) -> str:
    return nickname(thread_id) or "sub-agent"


def title(item: codex_items.CollabAgentToolCallItem, nickname: Nickname) -> str:
    names = ", ".join(agent_name(t, nickname) for t in item.receiverThreadIds) or "sub-agent"
    verb = _TITLES.get(item.tool)
    return f"{verb} {names}" if verb is not None else f"{item.tool} {names}"


def states_content(
    item: codex_items.CollabAgentToolCallItem, nickname: Nickname
) -> list[Any] | msgspec.UnsetType:
    """The prompt a spawn or message sent, and each receiver's state as Codex reports it."""
    lines = []
    if item.prompt and is_message(item):
        lines.append(item.prompt)
    for thread_id, state in item.agentsStates.items():
        if isinstance(state, dict):
            status = state.get("status", "")
            message = state.get("message")
            lines.append(
                f"{agent_name(thread_id, nickname)}: {status}" + (f"\n{message}" if message else "")
            )
    if not lines:
        return UNSET
    return [acp_tools.Content(content=acp_types.TextContent(text="\n\n".join(lines)))]


def final_status(item: codex_items.CollabAgentToolCallItem) -> acp_tools.ToolCallStatus:
    return "completed" if item.status == "completed" else "failed"


def tool_call(
    item: codex_items.CollabAgentToolCallItem,
    status: acp_tools.ToolCallStatus,
    nickname: Nickname,
    content: list[Any] | msgspec.UnsetType = UNSET,
    raw_output: Any = UNSET,
) -> acp_tools.ToolCall:
    """The ``tool_call`` of a collab item (live: as it starts; replayed: as it ended)."""
    raw_input = {"tool": item.tool, "targets": item.receiverThreadIds, "prompt": item.prompt}
    return acp_tools.ToolCall(
        toolCallId=item.id,
        title=title(item, nickname),
        name=item.tool,
        kind="other",
        status=status,
        content=content,
        rawInput=raw_input,
        rawOutput=raw_output,
    )


def final_update(
    item: codex_items.CollabAgentToolCallItem, nickname: Nickname
) -> acp_tools.ToolCallUpdate:
    """The update that ends a live collab tool call: what a replay of the item shows."""
    return acp_tools.ToolCallUpdate(
        toolCallId=item.id,
        title=title(item, nickname),
        status=final_status(item),
        content=states_content(item, nickname),
        rawOutput={"agentsStates": item.agentsStates},
    )


def results(item: codex_items.CollabAgentToolCallItem) -> list[tuple[str, str]]:
    """What each sub-agent a ``wait`` waited for reported: (its thread, its message)."""
    found = []
    for receiver, state in item.agentsStates.items():
        message = state.get("message") if isinstance(state, dict) else None
        if message:
            found.append((receiver, message))
    return found


def history_updates(
    item: codex_items.CollabAgentToolCallItem,
    session_id: str,
    nickname: Nickname,
    *,
    as_tool_call: bool,
    exposing: bool,
) -> list[msgspec.Struct]:
    """A stored collab item of ``session_id`` as a load replays it: its tool call
    (``as_tool_call``) or its messages, then a wait's results as messages (``exposing``:
    the client takes sub-agent sessions)."""
    out: list[msgspec.Struct] = []
    if as_tool_call:
        out.append(
            tool_call(
                item,
                final_status(item),
                nickname,
                states_content(item, nickname),
                raw_output={"agentsStates": item.agentsStates},
            )
        )
    elif item.prompt is not None:
        # A historical address is no announcement (RFD): the recipient may be
        # announced later in this replay, or never.
        several = len(item.receiverThreadIds) > 1
        out += [
            text_message(
                f"{item.id}/{receiver}" if several else item.id, session_id, receiver, item.prompt
            )
            for receiver in item.receiverThreadIds
        ]
    if item.tool == "wait" and exposing:
        for receiver, message in results(item):
            out.append(text_message(f"{item.id}/{receiver}", receiver, session_id, message))
    return out
