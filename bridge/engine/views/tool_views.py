"""What a tool item looks like to an ACP client: ``tool_call`` / ``tool_call_update``, plans.

Every Codex tool item becomes one ACP tool call whose ``toolCallId`` *is* the
item id (approvals name the same id). ``item/started`` announces it
(``tool_call``), the item's own notifications update it while it runs, and
``item/completed`` gives its final status and content (``tool_call_update``).
Its ``name`` is the MCP or dynamic tool's own, else Codex's item kind (:func:`tool_name`).
What each item looks like is decided by :func:`describe`, a pure function of
the item, which the replay of a thread's history (:func:`history_updates`)
shares with the live path (:mod:`bridge.engine.features.tools.tools`, which follows items as
they run). Everything here is a pure function.

==========================  ========  =============================================
Codex item                  kind      content
==========================  ========  =============================================
``commandExecution``        execute,  the output (streamed, then the final
                            read or   ``aggregatedOutput``), or Zed's terminal
                            search    (below); title: the command, unwrapped;
                                      kind: :mod:`~bridge.engine.views.command_kind`
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
from it and the hunks (:mod:`bridge.engine.views.diffs`); the file may be read
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
An ACP v2 client gets v2's own terminals for the same commands (every v2 client:
they need no capability; see "ACP v2's terminals" below). Everyone else gets the
output as text content.
"""

from __future__ import annotations

import binascii
import logging
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec import UNSET

from ...acp import tools as acp_tools
from ...acp import types as acp_types
from ...acp import v2
from ...codex import items as codex_items
from ...codex import threads as codex_threads
from ...codex.messages import ThreadItem
from .change_views import (
    change_content,
    change_locations,
    change_title,
    patch_content,
    path_shown,
    with_kind,
)
from .command_kind import command_kind
from .content import fenced, text_content

log = logging.getLogger(__name__)

#: How much of a running command's output a text-mode update carries: each update
#: replaces the content, so an unbounded one would resend the whole output each time.
LIVE_OUTPUT_CHARS = 32_000

_STATUS: dict[str, acp_tools.ToolCallStatus] = {
    "inProgress": "in_progress",
    "completed": "completed",
    "failed": "failed",
    "declined": "failed",
}
_PLAN_STATUS: dict[str, acp_tools.PlanEntryStatus] = {
    "pending": "pending",
    "inProgress": "in_progress",
    "completed": "completed",
}


# -- what a tool item looks like --------------------------------------------------------------


@dataclass
class ToolView:
    """Everything an ACP client is shown of one tool item at one moment."""

    title: str
    kind: acp_tools.ToolKind
    status: acp_tools.ToolCallStatus
    content: list[acp_tools.ToolCallContent] = field(default_factory=list)
    locations: list[acp_tools.ToolCallLocation] = field(default_factory=list)
    raw_input: Any = UNSET
    raw_output: Any = UNSET
    #: The tool's programmatic name (:func:`tool_name`).
    name: str | msgspec.UnsetType = UNSET

    def tool_call(self, tool_call_id: str, meta: acp_types.Meta = UNSET) -> acp_tools.ToolCall:
        """The ``tool_call`` that announces the item."""
        return acp_tools.ToolCall(**self._fields(tool_call_id, meta))

    def tool_call_update(
        self, tool_call_id: str, meta: acp_types.Meta = UNSET
    ) -> acp_tools.ToolCallUpdate:
        """A ``tool_call_update`` with every field, for the final update: a client that
        missed one catches up."""
        return acp_tools.ToolCallUpdate(**self._fields(tool_call_id, meta))

    def _fields(self, tool_call_id: str, meta: acp_types.Meta) -> dict[str, Any]:
        return {
            "toolCallId": tool_call_id,
            "title": self.title,
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "content": self.content,
            "locations": self.locations,
            "rawInput": self.raw_input,
            "rawOutput": self.raw_output,
            "meta": meta,
        }


def running_command(terminal: codex_threads.BackgroundTerminal, cwd: str) -> msgspec.Struct:
    """The tool call of a command Codex still runs for the thread (a background terminal),
    shown in progress as the live session showed it: its ``item/completed`` updates it."""
    item = codex_items.CommandExecutionItem(
        id=terminal.itemId,
        command=terminal.command,
        cwd=terminal.cwd,
        processId=terminal.processId,
    )
    return describe(item, cwd=cwd).tool_call(item.id)


def describe(
    item: codex_items.ToolItem,
    *,
    cwd: str = "",
    output: str = "",
    files: Mapping[str, str] | None = None,
    patch: bool = False,
) -> ToolView:
    """The ACP view of ``item``.

    ``cwd`` (the session's) shortens paths in titles; ``output`` is what a running
    command has printed so far; ``files`` maps a changed file's path to its text as
    the client read it; ``patch``: a changed file is one Git patch (AIR's ``diffPatch``).
    """
    match item:
        case codex_items.CommandExecutionItem():
            view = _command(item, output)
        case codex_items.FileChangeItem():
            view = _file_change(item, cwd, files or {}, patch)
        case codex_items.McpToolCallItem():
            view = _mcp(item)
        case codex_items.DynamicToolCallItem():
            view = _dynamic(item)
        case codex_items.WebSearchItem():
            view = _web_search(item)
        case codex_items.ImageViewItem():
            view = _image_view(item, cwd)
        case codex_items.ContextCompactionItem():
            view = ToolView(title="Compact the conversation", kind="other", status="in_progress")
    view.name = tool_name(item)
    return view


def tool_name(item: codex_items.ToolItem) -> str:
    """A tool call's ``name``: an MCP or dynamic tool's own name; for Codex's built-in
    tools, the kind of item Codex made of the call (``commandExecution``, ``fileChange``,
    ``webSearch``, ``imageView``, ``contextCompaction``), which names what ran whichever of
    Codex's tools the model called."""
    if isinstance(item, codex_items.McpToolCallItem | codex_items.DynamicToolCallItem):
        return item.tool
    tag = type(item).__struct_config__.tag
    return tag if isinstance(tag, str) else type(item).__name__


_WITHOUT_STATUS = (
    codex_items.WebSearchItem,
    codex_items.ImageViewItem,
    codex_items.ContextCompactionItem,
)


def finished(item: codex_items.ToolItem, view: ToolView) -> ToolView:
    """``view`` of an item that is over: items without a status of their own (web
    search, image view, compaction) are done once Codex says they are."""
    if isinstance(item, codex_items.ContextCompactionItem):
        view.content = [text_content("The conversation so far was compacted.")]
    if isinstance(item, _WITHOUT_STATUS) and view.status == "in_progress":
        view.status = "completed"
    return view


def cut_short(view: ToolView, turn_status: str) -> ToolView:
    """``view`` of an item still running when its turn ended ``interrupted`` or ``failed``:
    ``failed``, saying why. The turn is over, the model never sees the result; Codex's own
    ``item/completed``, when it comes, comes after the prompt's answer (a command the
    cancel stops ends later), too late for the client."""
    cause = "was cancelled" if turn_status == "interrupted" else "failed"
    view.status = "failed"
    view.content = [*view.content, text_content(f"The turn {cause} before this finished.")]
    return view


def history_updates(
    item: ThreadItem, *, cwd: str = "", terminals: bool = False
) -> list[msgspec.Struct]:
    """The updates that show a finished tool item in a replayed history (``session/load``).

    Empty for items that are not tools (messages, reasoning, user input) and for
    a tool item this bridge cannot read (logged). One ``tool_call`` with the
    item's final status and content; ``cwd``, the session's, shortens the paths
    in titles. A command's output is text here (never Zed's terminal), and a
    changed file's diff is made of hunks (there is no file to read back).
    With ``terminals`` (ACP v2), a command of kind ``execute`` is shown as live: a
    terminal, whose one ``terminal_update`` after the call carries the output Codex
    kept (a snapshot: replayed twice, it is still shown once) and the exit.
    """
    if not isinstance(item, codex_items.ToolItem):
        return []  # not a tool, or one not understood (logged where it was decoded)
    tool = item
    view = finished(tool, describe(tool, cwd=cwd))
    if view.status == "in_progress":
        # Still running in a stored thread: its turn was cut short, it will never end.
        view.status = "failed"
    if terminals and isinstance(tool, codex_items.CommandExecutionItem) and view.kind == "execute":
        view.content = [acp_tools.Terminal(terminalId=tool.id), *command_notes(tool)]
        terminal = terminal_opened(tool)
        if tool.aggregatedOutput:
            terminal.output = v2.TerminalOutput(data=_base64(tool.aggregatedOutput))
        terminal.exitStatus = terminal_exit_status(tool)
        return [view.tool_call(tool.id), terminal]
    return [view.tool_call(tool.id)]


# -- commands -------------------------------------------------------------------------------------

_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})
_POWERSHELLS = frozenset({"pwsh", "powershell", "pwsh.exe", "powershell.exe"})


def unwrap_shell(command: str) -> str:
    """The script of a ``SHELL -lc 'SCRIPT'`` line (``bash``, ``zsh``, ``sh`` ...,
    ``pwsh -Command``, ``cmd /c``); any other command unchanged."""
    # Here, not at the top: the engine's start shows no command, so need not import shlex.
    import shlex

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


def command_locations(
    actions: list[codex_items.CommandAction], cwd: str
) -> list[acp_tools.ToolCallLocation]:
    """The files and folders the command's parts name, as absolute paths."""
    seen: list[str] = []
    for action in actions:
        if action.path is None or action.type not in ("read", "listFiles", "search"):
            continue
        path = _absolute(action.path, cwd)
        if path is not None and path not in seen:
            seen.append(path)
    return [acp_tools.ToolCallLocation(path=path) for path in seen]


def _absolute(path: str, cwd: str) -> str | None:
    if path.startswith("/"):
        return posixpath.normpath(path)
    if cwd.startswith("/"):
        return posixpath.normpath(posixpath.join(cwd, path))
    return None  # ACP locations are absolute; a relative path without a base is dropped


def _command(item: codex_items.CommandExecutionItem, output: str) -> ToolView:
    kind = command_kind(item.command, item.commandActions)
    status = _STATUS.get(item.status, "failed")
    text = item.aggregatedOutput if item.aggregatedOutput is not None else output
    if status == "in_progress":
        text = _tail(text)
    info = ""
    reads = [a for a in item.commandActions if a.type == "read"]
    if kind == "read" and len(reads) == 1:
        info = _extension(reads[0].name or reads[0].path or "")
    content: list[acp_tools.ToolCallContent] = [text_content(fenced(text, info))] if text else []
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


def command_notes(item: codex_items.CommandExecutionItem) -> list[acp_tools.ToolCallContent]:
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


def _file_change(
    item: codex_items.FileChangeItem, cwd: str, files: Mapping[str, str], patch: bool = False
) -> ToolView:
    content: list[acp_tools.ToolCallContent] = []
    locations: list[acp_tools.ToolCallLocation] = []
    for change in item.changes:
        patched = patch_content(change) if patch else None
        plain = change_content(change, files.get(change.path)) if patched is None else []
        content += patched or (with_kind(plain, change.kind.type) if patch else plain)
        locations += change_locations(change)
    if item.status == "declined":
        content.append(text_content("Declined: the change was not applied."))
    return ToolView(
        title=change_title(item.changes, cwd),
        kind="edit",
        status=_STATUS.get(item.status, "failed"),
        content=content,
        locations=locations,
        raw_input={"changes": item.changes},
        raw_output=UNSET if item.status == "inProgress" else {"status": item.status},
    )


# -- MCP, dynamic tools, web search, images ---------------------------------------------------------


def _mcp(item: codex_items.McpToolCallItem) -> ToolView:
    content: list[acp_tools.ToolCallContent] = []
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


def _mcp_block(block: Any) -> acp_tools.ToolCallContent:
    """An MCP content block is an ACP one (ACP borrowed MCP's shapes); anything else is shown
    as its JSON."""
    encoded = msgspec.json.encode(block)
    try:
        decoded = acp_types.decode_content_block(encoded)
    except (msgspec.ValidationError, msgspec.DecodeError):
        decoded = None
    if decoded is None or isinstance(decoded, acp_types.UnknownContent):
        return text_content(fenced(msgspec.json.format(encoded).decode(), "json"))
    return acp_tools.Content(content=decoded)


def _dynamic(item: codex_items.DynamicToolCallItem) -> ToolView:
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


# Compiled at first use (the re module caches it), not at import.
_DATA_URL = r"(?s)data:([\w.+-]+/[\w.+-]+);base64,(.*)"


def _dynamic_block(entry: dict[str, Any]) -> acp_tools.ToolCallContent:
    kind = entry.get("type")
    if kind == "inputText":
        return text_content(str(entry.get("text", "")))
    url = entry.get("imageUrl") if kind == "inputImage" else entry.get("audioUrl")
    if isinstance(url, str):
        data = re.fullmatch(_DATA_URL, url)
        if data is not None and kind == "inputImage":
            return acp_tools.Content(
                content=acp_types.ImageContent(data=data.group(2), mimeType=data.group(1))
            )
        if data is not None:
            return acp_tools.Content(
                content=acp_types.AudioContent(data=data.group(2), mimeType=data.group(1))
            )
        return acp_tools.Content(
            content=acp_types.ResourceLink(uri=url, name=posixpath.basename(url))
        )
    return text_content(fenced(msgspec.json.encode(entry).decode(), "json"))


def _web_search(item: codex_items.WebSearchItem) -> ToolView:
    action = item.action
    kind: acp_tools.ToolKind = "search"
    content: list[acp_tools.ToolCallContent] = []
    if action is not None and action.type == "openPage" and action.url:
        kind, title = "fetch", f"Open {action.url}"
        content = [
            acp_tools.Content(content=acp_types.ResourceLink(uri=action.url, name=action.url))
        ]
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


def _image_view(item: codex_items.ImageViewItem, cwd: str) -> ToolView:
    # Here, not at the top: urllib.parse pulls in ipaddress; few turns view an image.
    from urllib.parse import quote

    mime = _IMAGE_TYPES.get(_extension(item.path).lower())
    link = acp_types.ResourceLink(
        uri="file://" + quote(item.path),
        name=posixpath.basename(item.path) or item.path,
        mimeType=mime if mime is not None else UNSET,
    )
    path = _absolute(item.path, cwd)
    return ToolView(
        title=f"View image {path_shown(item.path, cwd)}",
        kind="read",
        status="in_progress",
        content=[acp_tools.Content(content=link)],
        locations=[acp_tools.ToolCallLocation(path=path)] if path is not None else [],
        raw_input={"path": item.path},
    )


def plan_update(note: codex_items.TurnPlanUpdated) -> acp_tools.Plan:
    """Codex's plan as ACP's. Codex has no priorities: every step is ``medium``. Its
    ``explanation`` (why the plan changed) has no ACP field; it rides in ``_meta``."""
    entries = []
    for step in note.plan:
        status = _PLAN_STATUS.get(step.status)
        if status is None:
            log.info("plan step status %r unknown; shown as pending", step.status)
            status = "pending"
        entries.append(acp_tools.PlanEntry(content=step.step, priority="medium", status=status))
    meta: acp_types.Meta = {"explanation": note.explanation} if note.explanation else UNSET
    return acp_tools.Plan(entries=entries, meta=meta)


# -- ACP v2's terminals ------------------------------------------------------------------------------
# A v2 client is shown a command of kind ``execute`` as a terminal of the agent's (display
# only): the tool call's content names it (``terminal``, its id the item's), and updates of
# their own carry it. ``terminal_update`` says what runs where, then its exit (and, when Codex
# kept more than was streamed, its whole output as a snapshot that replaces the streamed);
# ``terminal_output_chunk`` each piece of output as it comes. Bytes go base64-encoded, each
# chunk on its own.


def terminal_opened(item: codex_items.CommandExecutionItem) -> v2.TerminalUpdate:
    """The terminal of a command that starts: the command (unwrapped, as its title) and
    its folder (absolute only, as v2 asks)."""
    cwd = item.cwd
    absolute = cwd.startswith(("/", "\\\\")) or re.match(r"[A-Za-z]:[\\/]", cwd) is not None
    return v2.TerminalUpdate(
        terminalId=item.id, command=unwrap_shell(item.command), cwd=cwd if absolute else UNSET
    )


def terminal_chunk(item_id: str, text: str) -> v2.TerminalOutputChunk:
    """A piece of a command's output, appended to its terminal."""
    return v2.TerminalOutputChunk(terminalId=item_id, data=_base64(text))


def terminal_closed(
    item: codex_items.CommandExecutionItem, whole_output: str | None = None
) -> v2.TerminalUpdate:
    """The end of a command's terminal: its exit, and ``whole_output`` (when given) as the
    terminal's whole output, replacing what was streamed."""
    update = v2.TerminalUpdate(terminalId=item.id, exitStatus=terminal_exit_status(item))
    if whole_output:
        update.output = v2.TerminalOutput(data=_base64(whole_output))
    return update


def terminal_cut_short(item_id: str) -> v2.TerminalUpdate:
    """The terminal of a command its turn's end cut short: exited, how not known."""
    return v2.TerminalUpdate(terminalId=item_id, exitStatus=v2.TerminalExitStatus())


def terminal_exit_status(item: codex_items.CommandExecutionItem) -> v2.TerminalExitStatus:
    """A command's exit as v2 has it: the code Codex reports (none for one that never ran
    or did not say)."""
    if item.exitCode is None:
        return v2.TerminalExitStatus()
    return v2.TerminalExitStatus(exitCode=item.exitCode)


def _base64(text: str) -> str:
    return binascii.b2a_base64(text.encode(), newline=False).decode("ascii")


def terminal_exit(item: codex_items.CommandExecutionItem) -> dict[str, Any]:
    # ACP exit codes are unsigned; a negative one (killed) is no exit code.
    code = item.exitCode if item.exitCode is not None and item.exitCode >= 0 else None
    return {"terminal_id": item.id, "exit_code": code, "signal": None}
