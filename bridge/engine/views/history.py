"""A thread read from Codex → the ``session/update``s that replay it (``session/load``).

Pure functions. The replay shows each finished item once, whole, in the order
Codex stored it: the user's messages as ``user_message_chunk``, answers as
``agent_message_chunk``, reasoning summaries as ``agent_thought_chunk`` (each
with the item id as ``messageId``), Plan mode's proposed plan as live (a Markdown
``plan_update``, which the face may show as the agent's message), and tool items as the tools feature shows
them finished (:func:`bridge.engine.views.tool_views.history_updates`). What a stored
thread does not hold, and so a replay cannot show, is listed in
``docs/history.md``.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ...acp import types as acp_types
from ...codex import types as codex_types
from ...codex.messages import ThreadItem, decode_item
from . import tool_views, translate

log = logging.getLogger(__name__)

# The text forms ``features/prompts/_input.py`` gives links and embedded files, read back so the
# replay shows the user what they attached, not the bridge's rendering of it.
# Compiled at first use (the re module caches them), not at import.
_LINK = r"\[@(?P<name>[^\]\n]+)\]\((?P<uri>[^)\s]+)\)"
_CONTEXT = r'(?s)<context ref="(?P<uri>[^"\n]+)">\n(?P<text>.*)\n</context>'
_DATA_URL = r"(?s)data:(?P<mime>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)"


ItemReplay = Callable[[ThreadItem], list[msgspec.Struct] | None]
#: Codex's nicknames of sub-agents, by thread id (``None``: it gave none): what tool
#: calls naming them are titled with.
Nicknames = Mapping[str, str | None]


def stored_items(thread: codex_types.Thread) -> list[ThreadItem]:
    """Every item of ``thread``'s turns, oldest first, each decoded once."""
    return [decode_item(raw) for turn in thread.turns for raw in turn.items]


def replay_updates(
    thread_id: str,
    items: list[ThreadItem],
    *,
    first: ItemReplay | None = None,
    cwd: str = "",
    phases: bool = False,
    terminals: bool = False,
) -> list[msgspec.Struct]:
    """Every update that replays a stored thread's items (:func:`stored_items`).

    ``first`` may claim an item before the generic rules (it returns ``None``
    for items it leaves alone): the sub-agent feature replays collab items.
    ``cwd``, the session's, shortens paths in tool titles as the live ones are.
    ``phases``: an AIR client's answers carry their phase, as live.
    ``terminals``: commands are shown in ACP v2's terminals, as live.
    """
    out: list[msgspec.Struct] = []
    for item in items:
        try:
            claimed = first(item) if first is not None else None
            out += (
                claimed
                if claimed is not None
                else item_updates(item, cwd, phases=phases, terminals=terminals)
            )
        except Exception:  # one bad stored item must not fail the whole load
            log.warning(
                "thread %s: skipping a stored item not understood", thread_id, exc_info=True
            )
    return out


def item_updates(
    item: ThreadItem, cwd: str = "", *, phases: bool = False, terminals: bool = False
) -> list[msgspec.Struct]:
    """The updates that show one stored item (``cwd``: the session's, for tool titles;
    ``phases``: an answer's chunks say its phase, for an AIR client; ``terminals``: a
    command's output in an ACP v2 terminal)."""
    match item:
        case codex_types.UserMessageItem(id=item_id, content=content):
            return [
                acp_types.UserMessageChunk(content=block, messageId=item_id)
                for block in map(user_content, content)
                if block is not None
            ]
        case codex_types.AgentMessageItem():
            # As live: what Codex's display says, the answer never when it is withheld.
            chunks = translate.answer_updates(item, streamed=False)
            phase = item.phase if phases else None
            return [translate.with_phase(chunk, phase) for chunk in chunks]
        case codex_types.ReasoningItem(id=item_id, summary=summary):
            # Parts are paragraphs, as the live stream separates them.
            text = "\n\n".join(part for part in summary if part)
            return [translate.thought_chunk(item_id, text)] if text else []
        case codex_types.PlanItem():
            return list(translate.proposed_plan(item))
    return tool_views.history_updates(item, cwd=cwd, terminals=terminals)


def user_content(entry: dict[str, Any]) -> acp_types.ContentBlock | None:
    """One entry of a ``userMessage``'s content (a Codex ``UserInput``) as an ACP block."""
    kind = entry.get("type")
    if kind == "text":
        return _text_block(str(entry.get("text", "")))
    if kind == "image":
        url = entry.get("url")
        if not isinstance(url, str):  # an uploaded file id: nothing to show
            return None
        data_url = re.fullmatch(_DATA_URL, url)
        if data_url:
            return acp_types.ImageContent(data=data_url["data"], mimeType=data_url["mime"])
        return _link(url)
    if kind in ("localImage", "mention", "skill", "localAudio"):
        path = entry.get("path")
        if not isinstance(path, str):
            return None
        name = entry.get("name")
        return _link(_path_uri(path), name if isinstance(name, str) else posixpath.basename(path))
    log.debug("user input of type %r not replayed", kind)
    return None


def _text_block(text: str) -> acp_types.ContentBlock:
    link = re.fullmatch(_LINK, text)
    if link:
        return acp_types.ResourceLink(uri=link["uri"], name=link["name"])
    context = re.fullmatch(_CONTEXT, text)
    if context:
        return acp_types.EmbeddedResource(resource={"uri": context["uri"], "text": context["text"]})
    return acp_types.TextContent(text=text)


def _link(uri: str, name: str | None = None) -> acp_types.ResourceLink:
    # Here and in _path_uri, not at the top: urllib.parse pulls in ipaddress (~2 ms with it),
    # and only a replayed link needs it, not the engine's start.
    from urllib.parse import urlsplit

    return acp_types.ResourceLink(
        uri=uri, name=name or posixpath.basename(urlsplit(uri).path) or uri
    )


def _path_uri(path: str) -> str:
    from urllib.parse import quote, urlsplit

    if urlsplit(path).scheme:  # already a URI (``app://...``, ``plugin://...``)
        return path
    return "file://" + quote(path)
