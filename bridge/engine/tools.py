"""Tool items → ACP ``tool_call`` / ``tool_call_update``; plans, thread names.

Every Codex tool item becomes one ACP tool call whose ``toolCallId`` *is* the
item id (approvals name the same id). ``item/started`` announces it
(``tool_call``), the item's own notifications update it while it runs, and
``item/completed`` gives its final status and content (``tool_call_update``).
What each item looks like is decided by :func:`describe`, a pure function of
the item, which the replay of a thread's history (:func:`history_updates`)
shares with the live path.

==========================  ========  =============================================
Codex item                  kind      content
==========================  ========  =============================================
``commandExecution``        execute,  the output (streamed, then the final
                            read or   ``aggregatedOutput``), or Zed's terminal
                            search    (below); title: the command, unwrapped
``fileChange``              edit      a ``diff`` per file (see below)
``mcpToolCall``             other     the MCP result's content blocks, or its error
``dynamicToolCall``         other     its content items (text, images, audio)
``webSearch``               search,   the page opened, as a link
                            fetch
``imageView``               read      the image, as a link to the file
``contextCompaction``       other     (a ``compaction_update`` instead, for clients
                                      that declared ``session.compaction``)
==========================  ========  =============================================

Statuses: ``inProgress`` → ``in_progress``; ``completed``; ``failed`` (with
the exit code, for a command); ``declined`` → ``failed`` with a note (ACP has
no "declined").

File changes. ACP wants each file's whole old and new text; Codex gives the
whole text for an added file (old ``null``) and a deleted one (new ``""``),
but only diff hunks for an update. When the client can read files
(``fs.readTextFile``), the bridge asks it for the file and rebuilds both sides
from it and the hunks (:mod:`bridge.engine.diffs`); the file may be read
before or after Codex wrote the patch, and the rebuild tells which (or gives
up). Until then, or without that capability, each hunk is one ``diff`` whose
old and new text are the hunk's two sides (a few lines around each change),
with ``_meta.hunk`` giving its line numbers: the client sees what changed, not
the whole file.

Terminal output in Zed. Zed (and its adapters codex-acp and claude-agent-acp)
render a command's output in a terminal when the client declares
``clientCapabilities._meta.terminal_output: true`` and the agent sends: a
``terminal`` content item whose id is the tool call id, with
``_meta.terminal_info {terminal_id, cwd}`` on the ``tool_call``; each piece of
output as ``_meta.terminal_output {terminal_id, data}`` on a
``tool_call_update``; and ``_meta.terminal_exit {terminal_id, exit_code,
signal}`` with the final status. That ``terminal`` id was never created with
``terminal/create``, so any other client would be shown a terminal that does
not exist: the bridge sends this form only to a client that declared it, and
only for commands of kind ``execute`` (a file read shows better as text).
Everyone else gets the output as text content.
"""

from __future__ import annotations

import logging
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import msgspec
from msgspec import UNSET, Raw

from ..acp import tools as acp
from ..acp import types as acp_types
from ..codex import items as codex
from ..codex import types as codex_types
from ..jsonrpc.peer import ErrorObject
from . import diffs

if TYPE_CHECKING:
    from .engine import Engine
    from .sessions import Session

log = logging.getLogger(__name__)

#: How much of a running command's output a text-mode update carries: each update
#: replaces the content, so an unbounded one would resend the whole output each time.
LIVE_OUTPUT_CHARS = 32_000

_STATUS: dict[str, acp.ToolCallStatus] = {
    "inProgress": "in_progress",
    "completed": "completed",
    "failed": "failed",
    "declined": "failed",
}
_PLAN_STATUS: dict[str, acp.PlanEntryStatus] = {
    "pending": "pending",
    "inProgress": "in_progress",
    "completed": "completed",
}


# -- what a tool item looks like --------------------------------------------------------------


@dataclass
class ToolView:
    """Everything an ACP client is shown of one tool item at one moment."""

    title: str
    kind: acp.ToolKind
    status: acp.ToolCallStatus
    content: list[acp.ToolCallContent] = field(default_factory=list)
    locations: list[acp.ToolCallLocation] = field(default_factory=list)
    raw_input: Any = UNSET
    raw_output: Any = UNSET

    def tool_call(self, tool_call_id: str, meta: acp_types.Meta = UNSET) -> acp.ToolCall:
        return acp.ToolCall(
            toolCallId=tool_call_id,
            title=self.title,
            kind=self.kind,
            status=self.status,
            content=self.content,
            locations=self.locations,
            rawInput=self.raw_input,
            rawOutput=self.raw_output,
            meta=meta,
        )

    def update(self, tool_call_id: str, meta: acp_types.Meta = UNSET) -> acp.ToolCallUpdate:
        """Every field, for the final update: a client that missed one catches up."""
        return acp.ToolCallUpdate(
            toolCallId=tool_call_id,
            title=self.title,
            kind=self.kind,
            status=self.status,
            content=self.content,
            locations=self.locations,
            rawInput=self.raw_input,
            rawOutput=self.raw_output,
            meta=meta,
        )


def describe(
    item: codex.ToolItem,
    *,
    cwd: str = "",
    output: str = "",
    files: Mapping[str, str] | None = None,
) -> ToolView:
    """The ACP view of ``item``.

    ``cwd`` (the session's) shortens paths in titles; ``output`` is what a running
    command has printed so far; ``files`` maps a changed file's path to its text as
    the client read it.
    """
    match item:
        case codex.CommandExecutionItem():
            view = _command(item, output)
        case codex.FileChangeItem():
            view = _file_change(item, cwd, files or {})
        case codex.McpToolCallItem():
            view = _mcp(item)
        case codex.DynamicToolCallItem():
            view = _dynamic(item)
        case codex.WebSearchItem():
            view = _web_search(item)
        case codex.ImageViewItem():
            view = _image_view(item, cwd)
        case codex.ContextCompactionItem():
            view = ToolView(title="Compact the conversation", kind="other", status="in_progress")
    return view


_WITHOUT_STATUS = (codex.WebSearchItem, codex.ImageViewItem, codex.ContextCompactionItem)


def finished(item: codex.ToolItem, view: ToolView) -> ToolView:
    """``view`` of an item that is over: items without a status of their own (web
    search, image view, compaction) are done once Codex says they are."""
    if isinstance(item, codex.ContextCompactionItem):
        view.content = [text_content("The conversation so far was compacted.")]
    if isinstance(item, _WITHOUT_STATUS) and view.status == "in_progress":
        view.status = "completed"
    return view


def history_updates(item: Raw, *, cwd: str = "") -> list[msgspec.Struct]:
    """The updates that show a finished tool item in a replayed history (``session/load``).

    Empty for items that are not tools (messages, reasoning, user input) and for
    a tool item this bridge cannot read (logged). One ``tool_call`` with the
    item's final status and content; ``cwd``, the session's, shortens the paths
    in titles. A command's output is text here (never Zed's terminal), and a
    changed file's diff is made of hunks (there is no file to read back).
    """
    try:
        tool = codex.decode_tool_item(item)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        log.warning("a tool item in the thread's history is not understood, not shown: %s", exc)
        return []
    if tool is None:
        return []
    view = finished(tool, describe(tool, cwd=cwd))
    if view.status == "in_progress":
        # Still running in a stored thread: its turn was cut short, it will never end.
        view.status = "failed"
    return [view.tool_call(tool.id)]


# -- commands -------------------------------------------------------------------------------------

_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})
_POWERSHELLS = frozenset({"pwsh", "powershell", "pwsh.exe", "powershell.exe"})


def unwrap_shell(command: str) -> str:
    """The script of a ``SHELL -lc 'SCRIPT'`` line (``bash``, ``zsh``, ``sh`` ...,
    ``pwsh -Command``, ``cmd /c``); any other command unchanged."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    if len(argv) < 3:
        return command
    program = posixpath.basename(argv[0].replace("\\", "/"))
    lowered = program.lower()
    if lowered in _SHELLS:
        for i, arg in enumerate(argv[1:-1], start=1):
            if not arg.startswith("-") or arg.startswith("--"):
                break
            if "c" in arg[1:]:
                return argv[i + 1]
    elif lowered in _POWERSHELLS:
        for i, arg in enumerate(argv[1:-1], start=1):
            if arg.lower() in ("-command", "-c"):
                return " ".join(argv[i + 1 :])
    elif lowered in ("cmd", "cmd.exe") and argv[1].lower() == "/c":
        return " ".join(argv[2:])
    return command


def command_kind(actions: list[codex.CommandAction]) -> acp.ToolKind:
    """``read`` when every part of the line reads files, ``search`` when every part reads,
    lists or searches, else ``execute`` (also when Codex could not tell)."""
    types = {action.type for action in actions}
    if not types or not types <= {"read", "listFiles", "search"}:
        return "execute"
    return "read" if types == {"read"} else "search"


def command_locations(actions: list[codex.CommandAction], cwd: str) -> list[acp.ToolCallLocation]:
    """The files and folders the command's parts name, as absolute paths."""
    seen: list[str] = []
    for action in actions:
        if action.path is None or action.type not in ("read", "listFiles", "search"):
            continue
        path = _absolute(action.path, cwd)
        if path is not None and path not in seen:
            seen.append(path)
    return [acp.ToolCallLocation(path=path) for path in seen]


def _absolute(path: str, cwd: str) -> str | None:
    if path.startswith("/"):
        return posixpath.normpath(path)
    if cwd.startswith("/"):
        return posixpath.normpath(posixpath.join(cwd, path))
    return None  # ACP locations are absolute; a relative path without a base is dropped


def _command(item: codex.CommandExecutionItem, output: str) -> ToolView:
    kind = command_kind(item.commandActions)
    status = _STATUS.get(item.status, "failed")
    text = item.aggregatedOutput if item.aggregatedOutput is not None else output
    if status == "in_progress":
        text = _tail(text)
    info = ""
    reads = [a for a in item.commandActions if a.type == "read"]
    if kind == "read" and len(reads) == 1:
        info = _extension(reads[0].name or reads[0].path or "")
    content: list[acp.ToolCallContent] = [text_content(fenced(text, info))] if text else []
    content += command_notes(item)
    raw_input: dict[str, Any] = {"command": item.command, "cwd": item.cwd}
    if item.commandActions:
        raw_input["commandActions"] = item.commandActions
    raw_output: Any = UNSET
    if status != "in_progress":
        raw_output = {"status": item.status, "exitCode": item.exitCode}
        if item.durationMs is not None:
            raw_output["durationMs"] = item.durationMs
        if item.aggregatedOutput is not None:
            raw_output["aggregatedOutput"] = item.aggregatedOutput
    return ToolView(
        title=unwrap_shell(item.command),
        kind=kind,
        status=status,
        content=content,
        locations=command_locations(item.commandActions, item.cwd),
        raw_input=raw_input,
        raw_output=raw_output,
    )


def command_notes(item: codex.CommandExecutionItem) -> list[acp.ToolCallContent]:
    """What the output alone does not say: the exit code of a failure, a refusal."""
    if item.status == "failed" and item.exitCode is not None:
        return [text_content(f"Exit code {item.exitCode}")]
    if item.status == "declined":
        return [text_content("Declined: the command did not run.")]
    return []


def _tail(text: str) -> str:
    if len(text) <= LIVE_OUTPUT_CHARS:
        return text
    cut = text[-LIVE_OUTPUT_CHARS:]
    newline = cut.find("\n")
    return "…\n" + (cut[newline + 1 :] if 0 <= newline < len(cut) - 1 else cut)


def _extension(name: str) -> str:
    base = posixpath.basename(name)
    stem, dot, ext = base.rpartition(".")
    return ext if dot and stem and re.fullmatch(r"[A-Za-z0-9_+-]+", ext) else ""


# -- file changes ------------------------------------------------------------------------------


def _file_change(item: codex.FileChangeItem, cwd: str, files: Mapping[str, str]) -> ToolView:
    content: list[acp.ToolCallContent] = []
    locations: list[acp.ToolCallLocation] = []
    for change in item.changes:
        content += change_content(change, files.get(change.path))
        locations += _change_locations(change)
    if item.status == "declined":
        content.append(text_content("Declined: the change was not applied."))
    return ToolView(
        title=_change_title(item.changes, cwd),
        kind="edit",
        status=_STATUS.get(item.status, "failed"),
        content=content,
        locations=locations,
        raw_input={"changes": item.changes},
        raw_output=UNSET if item.status == "inProgress" else {"status": item.status},
    )


def change_content(change: codex.FileUpdateChange, text: str | None) -> list[acp.ToolCallContent]:
    """The ``diff`` items for one changed file; ``text`` is the file as the client read it."""
    kind = change.kind.type
    if kind == "add":
        return [acp.Diff(path=change.path, oldText=None, newText=change.diff)]
    if kind == "delete":
        return [acp.Diff(path=change.path, oldText=change.diff, newText="")]
    target = change.kind.move_path or change.path
    try:
        hunks = diffs.parse_hunks(change.diff)
    except diffs.DiffError as exc:
        log.warning("Codex's diff for %s is not understood (%s); shown as text", change.path, exc)
        return [text_content(fenced(change.diff, "diff"))]
    if text is not None:
        whole = diffs.rebuild(hunks, text)
        if whole is not None:
            return [acp.Diff(path=target, oldText=whole[0], newText=whole[1])]
        log.info("the text read for %s fits neither side of Codex's diff; showing hunks", target)
    return [
        acp.Diff(
            path=target,
            oldText=hunk.old_text,
            newText=hunk.new_text,
            meta={
                "hunk": {
                    "oldStart": hunk.old_start,
                    "oldLines": hunk.old_count,
                    "newStart": hunk.new_start,
                    "newLines": hunk.new_count,
                }
            },
        )
        for hunk in hunks
    ]


def _change_locations(change: codex.FileUpdateChange) -> list[acp.ToolCallLocation]:
    if change.kind.type == "update":
        try:
            hunks = diffs.parse_hunks(change.diff)
        except diffs.DiffError:
            hunks = []
        line = max(hunks[0].new_start, 1) if hunks else UNSET
        return [acp.ToolCallLocation(path=change.kind.move_path or change.path, line=line)]
    if change.kind.type == "add":
        return [acp.ToolCallLocation(path=change.path, line=1)]
    return [acp.ToolCallLocation(path=change.path)]


_VERBS = {"add": "Create", "delete": "Delete", "update": "Edit"}


def _change_title(changes: list[codex.FileUpdateChange], cwd: str) -> str:
    if len(changes) == 1:
        change = changes[0]
        if change.kind.type == "update" and change.kind.move_path:
            return f"Move {_shown(change.path, cwd)} → {_shown(change.kind.move_path, cwd)}"
        return f"{_VERBS.get(change.kind.type, 'Edit')} {_shown(change.path, cwd)}"
    names = [_shown(c.kind.move_path or c.path, cwd) for c in changes]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"Edit {len(changes)} files: {shown}" if changes else "Edit files"


def _shown(path: str, cwd: str) -> str:
    """``path`` relative to the session's folder when inside it."""
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


# -- MCP, dynamic tools, web search, images ---------------------------------------------------------


def _mcp(item: codex.McpToolCallItem) -> ToolView:
    content: list[acp.ToolCallContent] = []
    raw_output: Any = UNSET
    if item.result is not None:
        content = [_mcp_block(block) for block in item.result.content]
        if not content and item.result.structuredContent is not None:
            encoded = msgspec.json.format(msgspec.json.encode(item.result.structuredContent))
            content = [text_content(fenced(encoded.decode(), "json"))]
        raw_output = item.result
    if item.error is not None:
        content.append(text_content(item.error.message or "The tool call failed."))
        raw_output = {"error": item.error.message}
    return ToolView(
        title=f"{item.server}: {item.tool}",
        kind="other",
        status=_STATUS.get(item.status, "failed"),
        content=content,
        raw_input=item.arguments,
        raw_output=raw_output,
    )


def _mcp_block(block: Any) -> acp.ToolCallContent:
    """An MCP content block is an ACP one (ACP borrowed MCP's shapes); anything else is shown
    as its JSON."""
    encoded = msgspec.json.encode(block)
    try:
        decoded = acp_types.decode_content_block(encoded)
    except (msgspec.ValidationError, msgspec.DecodeError):
        decoded = None
    if decoded is None or isinstance(decoded, acp_types.UnknownContent):
        return text_content(fenced(msgspec.json.format(encoded).decode(), "json"))
    return acp.Content(content=decoded)


def _dynamic(item: codex.DynamicToolCallItem) -> ToolView:
    status = _STATUS.get(item.status, "failed")
    if item.success is False and status == "completed":
        status = "failed"
    content = [_dynamic_block(entry) for entry in item.contentItems or []]
    raw_output: Any = UNSET
    if item.status != "inProgress":
        raw_output = {"success": item.success, "contentItems": item.contentItems}
    title = f"{item.namespace}/{item.tool}" if item.namespace else item.tool
    return ToolView(
        title=title,
        kind="other",
        status=status,
        content=content,
        raw_input=item.arguments,
        raw_output=raw_output,
    )


_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+);base64,(.*)", re.DOTALL)


def _dynamic_block(entry: dict[str, Any]) -> acp.ToolCallContent:
    kind = entry.get("type")
    if kind == "inputText":
        return text_content(str(entry.get("text", "")))
    url = entry.get("imageUrl") if kind == "inputImage" else entry.get("audioUrl")
    if isinstance(url, str):
        data = _DATA_URL.fullmatch(url)
        if data is not None and kind == "inputImage":
            return acp.Content(
                content=acp_types.ImageContent(data=data.group(2), mimeType=data.group(1))
            )
        if data is not None:
            return acp.Content(
                content=acp_types.AudioContent(data=data.group(2), mimeType=data.group(1))
            )
        return acp.Content(content=acp_types.ResourceLink(uri=url, name=posixpath.basename(url)))
    return text_content(fenced(msgspec.json.encode(entry).decode(), "json"))


def _web_search(item: codex.WebSearchItem) -> ToolView:
    action = item.action
    kind: acp.ToolKind = "search"
    content: list[acp.ToolCallContent] = []
    if action is not None and action.type == "openPage" and action.url:
        kind, title = "fetch", f"Open {action.url}"
        content = [acp.Content(content=acp_types.ResourceLink(uri=action.url, name=action.url))]
    elif action is not None and action.type == "findInPage" and action.url:
        kind = "fetch"
        title = f'Find "{action.pattern}" in {action.url}' if action.pattern else action.url
    else:
        queries = action.queries if action is not None and action.queries else None
        query = item.query or (action.query if action is not None else None) or ""
        shown = " | ".join(queries) if queries else query
        title = f"Search the web: {shown}" if shown else "Search the web"
    raw_input: Any = action if action is not None else {"query": item.query}
    return ToolView(
        title=title,
        kind=kind,
        status="in_progress",
        content=content,
        raw_input=raw_input,
        raw_output=UNSET if item.results is None else {"results": item.results},
    )


_IMAGE_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "bmp": "image/bmp",
    "svg": "image/svg+xml",
    "tif": "image/tiff",
    "tiff": "image/tiff",
}


def _image_view(item: codex.ImageViewItem, cwd: str) -> ToolView:
    mime = _IMAGE_TYPES.get(_extension(item.path).lower())
    link = acp_types.ResourceLink(
        uri="file://" + quote(item.path),
        name=posixpath.basename(item.path) or item.path,
        mimeType=mime if mime is not None else UNSET,
    )
    path = _absolute(item.path, cwd)
    return ToolView(
        title=f"View image {_shown(item.path, cwd)}",
        kind="read",
        status="in_progress",
        content=[acp.Content(content=link)],
        locations=[acp.ToolCallLocation(path=path)] if path is not None else [],
        raw_input={"path": item.path},
    )


# -- text helpers -------------------------------------------------------------------------------------


def text_content(text: str) -> acp.Content:
    return acp.Content(content=acp_types.TextContent(text=text))


def fenced(text: str, info: str = "") -> str:
    """``text`` as a Markdown code block whose fence no line of it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{info}\n{body}{fence}"


# -- the feature: following live items ------------------------------------------------------------------


@dataclass(eq=False)
class _Call:
    """A tool item the client has been told about and that has not finished."""

    session_id: str
    item: codex.ToolItem
    #: Shown as Zed's terminal (see the module docstring).
    terminal: bool = False
    #: What a running command printed so far (``outputDelta``, stdin echoes).
    output: str = ""
    #: A changed file's text as the client read it, by the change's path.
    files: dict[str, str] = field(default_factory=dict)
    #: Paths asked of the client already (answered or not).
    asked: set[str] = field(default_factory=set)
    reads_pending: int = 0
    completed: bool = False
    #: The content last sent, encoded: a file read that changes nothing sends nothing.
    sent_content: bytes = b""


_ITEM_NOTE = msgspec.json.Decoder(codex_types.ItemNotification)
_OUTPUT_DELTA = msgspec.json.Decoder(codex.CommandExecutionOutputDelta)


class _ItemIdentity(msgspec.Struct):
    type: str = ""
    id: str = ""


class Tools:
    """Follows tool items, plans and thread names, and shows them to the client."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        #: (thread id, item id) → the running call.
        self._calls: dict[tuple[str, str], _Call] = {}
        #: (thread id, item id) of every tool call announced: a late ``item/completed``
        #: updates it, never announces it twice.
        self._announced: set[tuple[str, str]] = set()
        engine.on_codex_notification("item/started", self._on_item_started)
        engine.on_codex_notification("item/completed", self._on_item_completed)
        engine.on_codex_notification("item/commandExecution/outputDelta", self._on_output_delta)
        engine.on_codex_notification(
            "item/commandExecution/terminalInteraction", self._on_terminal_interaction
        )
        engine.on_codex_notification("item/fileChange/patchUpdated", self._on_patch_updated)
        engine.on_codex_notification("item/mcpToolCall/progress", self._on_mcp_progress)
        engine.on_codex_notification("turn/plan/updated", self._on_plan_updated)
        engine.on_codex_notification("thread/name/updated", self._on_thread_name_updated)
        engine.session_closed_hooks.append(self._on_session_closed)

    # -- capabilities -----------------------------------------------------------------------------

    def _terminal_output(self) -> bool:
        meta = self.engine.client_capabilities.meta
        return isinstance(meta, dict) and meta.get("terminal_output") is True

    def _compaction_updates(self) -> bool:
        session = self.engine.client_capabilities.session
        return isinstance(session, dict) and isinstance(session.get("compaction"), dict)

    # -- items ------------------------------------------------------------------------------------

    def _item(self, raw: Raw, method: str) -> tuple[Session, codex.ToolItem] | None:
        note = _ITEM_NOTE.decode(raw)
        session = self.engine.sessions.get(note.threadId)
        if session is None:
            return None
        try:
            item = codex.decode_tool_item(note.item)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            log.warning("Codex %s: a tool item not understood, not shown: %s", method, exc)
            if method == "item/completed":
                self._malformed_completion(session, note.item)
            return None
        return None if item is None else (session, item)

    def _malformed_completion(self, session: Session, raw: Raw) -> None:
        # Never leave an announced call spinning: it ends, saying why it shows nothing.
        try:
            identity = msgspec.json.decode(raw, type=_ItemIdentity)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return
        key = (session.thread_id, identity.id)
        if key not in self._announced:
            return
        self._calls.pop(key, None)
        note = "Codex reported this tool's result in a form the bridge does not understand."
        self.engine.update(
            session.session_id,
            acp.ToolCallUpdate(
                toolCallId=identity.id, status="failed", content=[text_content(note)]
            ),
        )

    def _on_item_started(self, raw: Raw) -> None:
        found = self._item(raw, "item/started")
        if found is None:
            return
        session, item = found
        key = (session.thread_id, item.id)
        if isinstance(item, codex.ContextCompactionItem) and self._compaction_updates():
            self.engine.update(
                session.session_id, acp.CompactionUpdate(compactionId=item.id, status="in_progress")
            )
            return
        if key in self._announced:
            log.info("item/started again for %s; ignored", item.id)
            return
        view = describe(item, cwd=session.cwd)
        terminal = self._terminal_output() and view.kind == "execute"
        call = _Call(session.session_id, item, terminal=terminal)
        self._calls[key] = call
        self._announced.add(key)
        meta: acp_types.Meta = UNSET
        if terminal:
            assert isinstance(item, codex.CommandExecutionItem)
            view.content = [acp.Terminal(terminalId=item.id)]
            meta = {"terminal_info": {"terminal_id": item.id, "cwd": item.cwd}}
        call.sent_content = msgspec.json.encode(view.content)
        self.engine.update(session.session_id, view.tool_call(item.id, meta))
        self._read_files(key, call)

    def _on_item_completed(self, raw: Raw) -> None:
        found = self._item(raw, "item/completed")
        if found is None:
            return
        session, item = found
        key = (session.thread_id, item.id)
        if isinstance(item, codex.ContextCompactionItem) and self._compaction_updates():
            self.engine.update(
                session.session_id, acp.CompactionUpdate(compactionId=item.id, status="completed")
            )
            return
        call = self._calls.get(key)
        if call is None:
            # Never seen starting (or already finished): announce or update it, whole.
            call = _Call(session.session_id, item)
        call.item, call.completed = item, True
        view = finished(item, describe(item, cwd=session.cwd, output=call.output, files=call.files))
        if view.status == "in_progress":
            log.info("item/completed of %s says it is still in progress; shown completed", item.id)
            view.status = "completed"
        meta: acp_types.Meta = UNSET
        if call.terminal and isinstance(item, codex.CommandExecutionItem):
            if not call.output and item.aggregatedOutput:
                # Nothing was streamed: the terminal gets the whole output now.
                self._terminal_data(session, item.id, item.aggregatedOutput)
            view.content = [acp.Terminal(terminalId=item.id), *command_notes(item)]
            meta = {"terminal_exit": _terminal_exit(item)}
        call.sent_content = msgspec.json.encode(view.content)
        if key in self._announced:
            self.engine.update(session.session_id, view.update(item.id, meta))
        else:
            self._announced.add(key)
            self.engine.update(session.session_id, view.tool_call(item.id))
        self._calls[key] = call
        self._read_files(key, call)
        self._forget_if_done(key, call)

    def _on_output_delta(self, raw: Raw) -> None:
        delta = _OUTPUT_DELTA.decode(raw)
        self._command_output(delta.threadId, delta.itemId, delta.delta)

    def _on_terminal_interaction(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.TerminalInteraction)
        # What was typed into the command, shown where a terminal would echo it.
        if note.stdin:
            self._command_output(note.threadId, note.itemId, note.stdin)

    def _command_output(self, thread_id: str, item_id: str, text: str) -> None:
        call = self._calls.get((thread_id, item_id))
        if call is None or call.completed or not isinstance(call.item, codex.CommandExecutionItem):
            return
        session = self.engine.sessions.get(thread_id)
        if session is None:
            return
        call.output += text
        if call.terminal:
            self._terminal_data(session, item_id, text)
            return
        view = describe(call.item, cwd=session.cwd, output=call.output)
        call.sent_content = msgspec.json.encode(view.content)
        self.engine.update(
            session.session_id, acp.ToolCallUpdate(toolCallId=item_id, content=view.content)
        )

    def _terminal_data(self, session: Session, item_id: str, data: str) -> None:
        meta = {"terminal_output": {"terminal_id": item_id, "data": data}}
        self.engine.update(session.session_id, acp.ToolCallUpdate(toolCallId=item_id, meta=meta))

    def _on_patch_updated(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.FileChangePatchUpdated)
        key = (note.threadId, note.itemId)
        call = self._calls.get(key)
        session = self.engine.sessions.get(note.threadId)
        if call is None or session is None or not isinstance(call.item, codex.FileChangeItem):
            return
        call.item = msgspec.structs.replace(call.item, changes=note.changes)
        view = describe(call.item, cwd=session.cwd, files=call.files)
        call.sent_content = msgspec.json.encode(view.content)
        self.engine.update(
            session.session_id,
            acp.ToolCallUpdate(
                toolCallId=note.itemId,
                title=view.title,
                content=view.content,
                locations=view.locations,
                rawInput=view.raw_input,
            ),
        )
        self._read_files(key, call)

    def _on_mcp_progress(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.McpToolCallProgress)
        call = self._calls.get((note.threadId, note.itemId))
        session = self.engine.sessions.get(note.threadId)
        if call is None or session is None or call.completed or not note.message:
            return
        content: list[acp.ToolCallContent] = [text_content(note.message)]
        call.sent_content = msgspec.json.encode(content)
        self.engine.update(
            session.session_id, acp.ToolCallUpdate(toolCallId=note.itemId, content=content)
        )

    def _forget_if_done(self, key: tuple[str, str], call: _Call) -> None:
        if call.completed and call.reads_pending == 0 and self._calls.get(key) is call:
            del self._calls[key]

    def _on_session_closed(self, session: Session) -> None:
        for key in [k for k in self._calls if k[0] == session.thread_id]:
            del self._calls[key]
        self._announced = {k for k in self._announced if k[0] != session.thread_id}

    # -- reading changed files through the client -----------------------------------------------------

    def _read_files(self, key: tuple[str, str], call: _Call) -> None:
        """Ask the client for each updated file not asked yet, to show whole files."""
        if not self.engine.client_capabilities.fs.readTextFile:
            return
        if not isinstance(call.item, codex.FileChangeItem):
            return
        for change in call.item.changes:
            if change.kind.type != "update" or change.path in call.asked:
                continue
            call.asked.add(change.path)
            # Before the patch the file is at `path`; after a move, at `move_path`.
            candidates = [change.path]
            if change.kind.move_path:
                candidates.append(change.kind.move_path)
            call.reads_pending += 1
            self._ask(key, call, change.path, candidates)

    def _ask(self, key: tuple[str, str], call: _Call, path: str, candidates: list[str]) -> None:
        def answered(raw: Raw) -> None:
            call.reads_pending -= 1
            try:
                call.files[path] = msgspec.json.decode(raw, type=acp.ReadTextFileResult).content
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                log.warning("fs/read_text_file answer for %s not understood: %s", path, exc)
            else:
                self._refresh(key, call)
            self._forget_if_done(key, call)

        def refused(error: ErrorObject) -> None:
            if len(candidates) > 1:
                self._ask(key, call, path, candidates[1:])
                return
            log.info("the client could not read %s (%s); showing hunks", path, error.message)
            call.reads_pending -= 1
            self._forget_if_done(key, call)

        params = acp.ReadTextFileParams(sessionId=call.session_id, path=candidates[0])
        self.engine.client_request("fs/read_text_file", params, answered, refused)

    def _refresh(self, key: tuple[str, str], call: _Call) -> None:
        """Send a file change's content again, now that a file's text is known."""
        session = self.engine.sessions.get(key[0])
        if session is None or self._calls.get(key) is not call:
            return
        view = describe(call.item, cwd=session.cwd, files=call.files)
        encoded = msgspec.json.encode(view.content)
        if encoded == call.sent_content:
            return
        call.sent_content = encoded
        self.engine.update(
            session.session_id, acp.ToolCallUpdate(toolCallId=key[1], content=view.content)
        )

    # -- plans and names -------------------------------------------------------------------------------

    def _on_plan_updated(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.TurnPlanUpdated)
        session = self.engine.sessions.get(note.threadId)
        if session is not None:
            self.engine.update(session.session_id, plan_update(note))

    def _on_thread_name_updated(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.ThreadNameUpdated)
        session = self.engine.sessions.get(note.threadId)
        if session is not None:
            self.engine.update(session.session_id, acp.SessionInfoUpdate(title=note.threadName))


def plan_update(note: codex.TurnPlanUpdated) -> acp.Plan:
    """Codex's plan as ACP's. Codex has no priorities: every step is ``medium``. Its
    ``explanation`` (why the plan changed) has no ACP field; it rides in ``_meta``."""
    entries = []
    for step in note.plan:
        status = _PLAN_STATUS.get(step.status)
        if status is None:
            log.info("plan step status %r unknown; shown as pending", step.status)
            status = "pending"
        entries.append(acp.PlanEntry(content=step.step, priority="medium", status=status))
    meta: acp_types.Meta = {"explanation": note.explanation} if note.explanation else UNSET
    return acp.Plan(entries=entries, meta=meta)


def _terminal_exit(item: codex.CommandExecutionItem) -> dict[str, Any]:
    # ACP exit codes are unsigned; a negative one (killed) is no exit code.
    code = item.exitCode if item.exitCode is not None and item.exitCode >= 0 else None
    return {"terminal_id": item.id, "exit_code": code, "signal": None}
