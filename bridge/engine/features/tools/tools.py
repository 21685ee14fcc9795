"""Following tool items as they run: ``item/started`` announces a tool call, the
item's own notifications update it, ``item/completed`` finishes it; plans and
thread names too. What each looks like is :mod:`bridge.engine.views.tool_views`.

Two rules keep what the client sees honest and in order:

- A hidden sub-agent's tool call that a permission request introduced on the
  session it asked on (``ThreadRecord.tools.shown_on``) is updated there by the item's
  own notifications (its output, its final status and exit code), with the
  agent's name before its title, as the command would be on its own session.
- ACP's prompt turn ends with its answer: no update of the turn may follow it.
  Codex reports a command cut short by an interrupt (its ``item/completed``,
  ``failed``) only after the turn's ``turn/completed``, when the command has
  died; and some items (a sub-agent ``wait``) it never completes at all. So when
  a turn ends ``interrupted`` or ``failed``, every tool call still open on the
  thread ends here, ``failed`` with the reason, before the prompt is answered;
  Codex's late completion of it is dropped (``ThreadRecord.tools.ended``).
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from msgspec import UNSET, Raw

from ....acp import tools as acp_tools
from ....acp import types as acp_types
from ....codex import items as codex_items
from ....codex import types as codex_types
from ....codex.messages import ItemNotification, MalformedItem
from ....jsonrpc.peer import ErrorObject
from ...core.hub import Hub
from ...core.machines import LOCAL, workspace
from ...core.record_parts import ToolCall
from ...core.threads import ThreadRecord
from ...views.content import text_content
from ...views.tool_views import (
    ToolView,
    command_notes,
    cut_short,
    describe,
    finished,
    plan_update,
    terminal_chunk,
    terminal_closed,
    terminal_cut_short,
    terminal_exit,
    terminal_opened,
)

log = logging.getLogger(__name__)


# -- the feature: following live items ------------------------------------------------------------------


class Tools:
    """Follows tool items, plans and thread names, and shows them to the client.

    A thread's calls in progress are in its record (``tool_calls``, ``announced_tools``).
    """

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    # -- capabilities -----------------------------------------------------------------------------

    def _machine(self, record: ThreadRecord) -> str:
        """The machine ``record``'s work acts on: its own, or its root session's (a
        sub-agent works where its parent does)."""
        if not self.hub.machines:
            return LOCAL
        for each in (record, *self.hub.threads.ancestors(record)):
            if each.settings is not None:
                return each.settings.machine
        return LOCAL

    def _view(self, record: ThreadRecord, item: codex_items.ToolItem, **how: Any) -> ToolView:
        """``item`` as the client sees it, named with its machine when that is not this one
        (paths as that machine has them)."""
        machine = self._machine(record)
        if machine == LOCAL:
            return self._describe(item, cwd=record.cwd, **how)
        offer = self.hub.machines[machine].offer if machine in self.hub.machines else None
        view = self._describe(item, cwd=workspace(offer, record.cwd), **how)
        view.title = f"{view.title} (on {machine})"
        return view

    def _machine_lost(self, record: ThreadRecord) -> str | None:
        """Why a tool call failed when the machine it ran on is down: the link's reason,
        which Codex does not know (it only saw its connection end)."""
        machine = self._machine(record)
        link = self.hub.machines.get(machine)
        if link is None or not link.lost:
            return None
        return f"The link to machine {machine} was lost: {link.lost}"

    def _describe(self, item: codex_items.ToolItem, **how: Any) -> ToolView:
        """``describe``, with a file change as Git patches for a client that declared
        AIR's ``diffPatch``."""
        return describe(item, patch=self.hub.declares("diffPatch"), **how)

    def _terminal_output(self) -> bool:
        """Whether a command's output goes to a terminal: ACP v2's own (every v2 client),
        or Zed's ``_meta`` form (a v1 client that declared it)."""
        if self._v2_terminals():
            return True
        meta = self.hub.handshake.client_capabilities.meta
        return isinstance(meta, dict) and meta.get("terminal_output") is True

    def _v2_terminals(self) -> bool:
        return self.hub.client.face.version == 2

    def _compaction_shown(
        self, record: ThreadRecord, item: codex_items.ToolItem, status: acp_tools.CompactionStatus
    ) -> bool:
        """A context compaction, to a client that declared ``session.compaction``, is a
        ``compaction_update`` of its own (sent here), not a tool call."""
        session = self.hub.handshake.client_capabilities.session
        declared = isinstance(session, dict) and isinstance(session.get("compaction"), dict)
        if not declared or not isinstance(item, codex_items.ContextCompactionItem):
            return False
        self.hub.client.update(
            record.id, acp_tools.CompactionUpdate(compactionId=item.id, status=status)
        )
        return True

    # -- items ------------------------------------------------------------------------------------

    def _item(
        self, note: ItemNotification, *, completed: bool
    ) -> tuple[ThreadRecord, codex_items.ToolItem] | None:
        """The session and the tool item ``note`` tells of (its ``item/started``, or with
        ``completed`` its ``item/completed``), to show as a tool call; ``None`` when it is
        none (a malformed one is ended here), a context compaction shown in its own update,
        or news the client already has."""
        record = self.hub.threads.session(note.threadId)
        if record is None:
            return None
        item = note.item
        if isinstance(item, MalformedItem) and item.type in codex_items.TOOL_ITEM_TYPES:
            self._malformed(record, item)
            return None
        if not isinstance(item, codex_items.ToolItem):
            return None
        if self._compaction_shown(record, item, "completed" if completed else "in_progress"):
            return None
        if not completed and item.id in record.tools.announced:
            log.info("item/started again for %s; ignored", item.id)
            return None
        if completed and item.id in record.tools.ended:
            record.tools.ended.discard(item.id)
            log.info(
                "item/completed of %s (%s) after its turn ended; the client was told then",
                item.id,
                getattr(item, "status", "?"),
            )
            return None
        return record, item

    def _malformed(self, record: ThreadRecord, item: MalformedItem) -> None:
        # Never leave an announced call spinning: it ends, saying why it shows nothing.
        if item.id not in record.tools.announced and item.id not in record.tools.shown_on:
            return
        record.tools.calls.pop(item.id, None)
        note = "Codex reported this tool's result in a form the bridge does not understand."
        self._send(
            record,
            item.id,
            acp_tools.ToolCallUpdate(
                toolCallId=item.id, status="failed", content=[text_content(note)]
            ),
        )
        record.tools.shown_on.pop(item.id, None)

    def _send(self, record: ThreadRecord, item_id: str, update: msgspec.Struct) -> None:
        """Send an update of ``item_id``'s tool call where the client is shown it: on the
        thread's session, or (a hidden sub-agent's) where a permission request introduced
        it, titled with the agent's name as the request was."""
        shown = record.tools.shown_on.get(item_id)
        if shown is None:
            self.hub.client.update(record.id, update)
            return
        session_id, agent = shown
        title = getattr(update, "title", UNSET)
        if isinstance(title, str):
            update = msgspec.structs.replace(update, title=f"{agent}: {title}")
        self.hub.client.update(session_id, update)

    @staticmethod
    def _as_terminal(record: ThreadRecord, call: ToolCall) -> bool:
        # A call shown on another session was introduced without Zed's terminal: text there.
        return call.terminal and call.item.id not in record.tools.shown_on

    def item_started(self, note: ItemNotification) -> None:
        found = self._item(note, completed=False)
        if found is None:
            return
        record, item = found
        view = self._view(record, item)
        if any(
            p.tool_call is not None and p.tool_call[1] == item.id for p in record.questions.values()
        ):
            view.status = "pending"  # started while its permission request waits on the user
        if item.id in record.tools.shown_on:
            # Introduced by its permission request before it started: an update, in text.
            record.tools.calls[item.id] = call = ToolCall(item)
            record.tools.announced.add(item.id)
            call.sent_content = msgspec.json.encode(view.content)
            self._send(record, item.id, view.tool_call_update(item.id))
            return
        terminal = self._terminal_output() and view.kind == "execute"
        call = ToolCall(item, terminal=terminal)
        record.tools.calls[item.id] = call
        record.tools.announced.add(item.id)
        meta: acp_types.Meta = UNSET
        if terminal:
            assert isinstance(item, codex_items.CommandExecutionItem)
            view.content = [acp_tools.Terminal(terminalId=item.id)]
            if not self._v2_terminals():
                meta = {"terminal_info": {"terminal_id": item.id, "cwd": item.cwd}}
        call.sent_content = msgspec.json.encode(view.content)
        self.hub.client.update(record.id, view.tool_call(item.id, meta))
        if terminal and self._v2_terminals():
            assert isinstance(item, codex_items.CommandExecutionItem)
            self.hub.client.update(record.id, terminal_opened(item))
        self._read_files(record, call)

    def item_completed(self, note: ItemNotification) -> None:
        found = self._item(note, completed=True)
        if found is None:
            return
        record, item = found
        call = record.tools.calls.get(item.id)
        if call is None:
            # Never seen starting (or already finished): announce or update it, whole.
            call = ToolCall(item)
        call.item, call.completed = item, True
        view = finished(item, self._view(record, item, output=call.output, files=call.files))
        if view.status == "in_progress":
            log.info("item/completed of %s says it is still in progress; shown completed", item.id)
            view.status = "completed"
        if view.status == "failed":
            lost = self._machine_lost(record)
            if lost is not None:
                view.content = [*view.content, text_content(lost)]
        meta: acp_types.Meta = UNSET
        if self._as_terminal(record, call) and isinstance(item, codex_items.CommandExecutionItem):
            view.content = [acp_tools.Terminal(terminalId=item.id), *command_notes(item)]
            whole = item.aggregatedOutput or ""
            if self._v2_terminals():
                # v2's snapshot replaces what was streamed: sent when Codex's whole output
                # holds more (nothing streamed, or a piece Codex never sent as a delta).
                fuller = whole if len(whole) > len(call.output) else None
                self.hub.client.update(record.id, terminal_closed(item, fuller))
            else:
                if whole and not call.output:
                    # Nothing was streamed: the terminal gets the whole output now.
                    self._terminal_data(record, item.id, whole)
                meta = {"terminal_exit": terminal_exit(item)}
        call.sent_content = msgspec.json.encode(view.content)
        if item.id in record.tools.announced or item.id in record.tools.shown_on:
            self._send(record, item.id, view.tool_call_update(item.id, meta))
        else:
            record.tools.announced.add(item.id)
            self.hub.client.update(record.id, view.tool_call(item.id))
        record.tools.shown_on.pop(item.id, None)
        record.tools.calls[item.id] = call
        self._read_files(record, call)
        self._forget_if_done(record, call)

    def output_delta(self, delta: codex_items.CommandExecutionOutputDelta) -> None:
        self._command_output(delta.threadId, delta.itemId, delta.delta)

    def terminal_interaction(self, note: codex_items.TerminalInteraction) -> None:
        # What was typed into the command, shown where a terminal would echo it.
        if note.stdin:
            self._command_output(note.threadId, note.itemId, note.stdin)

    def _command_output(self, thread_id: str, item_id: str, text: str) -> None:
        record = self.hub.threads.session(thread_id)
        call = record.tools.calls.get(item_id) if record is not None else None
        if record is None or call is None or call.completed:
            return
        if not isinstance(call.item, codex_items.CommandExecutionItem):
            return
        call.output += text
        if self._as_terminal(record, call):
            self._terminal_data(record, item_id, text)
            return
        view = self._view(record, call.item, output=call.output)
        call.sent_content = msgspec.json.encode(view.content)
        self._send(
            record, item_id, acp_tools.ToolCallUpdate(toolCallId=item_id, content=view.content)
        )

    def _terminal_data(self, record: ThreadRecord, item_id: str, data: str) -> None:
        if self._v2_terminals():
            self.hub.client.update(record.id, terminal_chunk(item_id, data))
            return
        meta = {"terminal_output": {"terminal_id": item_id, "data": data}}
        self.hub.client.update(record.id, acp_tools.ToolCallUpdate(toolCallId=item_id, meta=meta))

    def patch_updated(self, note: codex_items.FileChangePatchUpdated) -> None:
        record = self.hub.threads.session(note.threadId)
        call = record.tools.calls.get(note.itemId) if record is not None else None
        if record is None or call is None or not isinstance(call.item, codex_items.FileChangeItem):
            return
        call.item = msgspec.structs.replace(call.item, changes=note.changes)
        view = self._view(record, call.item, files=call.files)
        call.sent_content = msgspec.json.encode(view.content)
        self._send(
            record,
            note.itemId,
            acp_tools.ToolCallUpdate(
                toolCallId=note.itemId,
                title=view.title,
                content=view.content,
                locations=view.locations,
                rawInput=view.raw_input,
            ),
        )
        self._read_files(record, call)

    def mcp_progress(self, note: codex_items.McpToolCallProgress) -> None:
        record = self.hub.threads.session(note.threadId)
        call = record.tools.calls.get(note.itemId) if record is not None else None
        if record is None or call is None or call.completed or not note.message:
            return
        content: list[acp_tools.ToolCallContent] = [text_content(note.message)]
        call.sent_content = msgspec.json.encode(content)
        self._send(
            record, note.itemId, acp_tools.ToolCallUpdate(toolCallId=note.itemId, content=content)
        )

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        """A turn that ended unfinished ends its tool calls still open (module docstring)."""
        status = note.turn.status
        record = self.hub.threads.session(note.threadId)
        if record is None:
            return
        for item_id in [i for i in record.tools.shown_on if i not in record.tools.calls]:
            # Introduced by its permission request and never started: it did not run.
            why = text_content("It did not run: its turn ended first.")
            update = acp_tools.ToolCallUpdate(toolCallId=item_id, status="failed", content=[why])
            self._send(record, item_id, update)
            del record.tools.shown_on[item_id]
        if status not in ("interrupted", "failed"):
            return
        ended: set[str] = set()
        for item_id, call in list(record.tools.calls.items()):
            if call.completed:
                continue
            del record.tools.calls[item_id]
            ended.add(item_id)
            item = call.item
            view = cut_short(self._view(record, item, output=call.output, files=call.files), status)
            meta: acp_types.Meta = UNSET
            if self._as_terminal(record, call):
                view.content = [acp_tools.Terminal(terminalId=item_id), *view.content[-1:]]
                if self._v2_terminals():
                    self.hub.client.update(record.id, terminal_cut_short(item_id))
                else:
                    meta = {
                        "terminal_exit": {"terminal_id": item_id, "exit_code": None, "signal": None}
                    }
            self._send(record, item_id, view.tool_call_update(item_id, meta))
            record.tools.shown_on.pop(item_id, None)
        if ended:
            record.tools.ended = ended

    def _forget_if_done(self, record: ThreadRecord, call: ToolCall) -> None:
        item_id = call.item.id
        if call.completed and call.reads_pending == 0 and record.tools.calls.get(item_id) is call:
            del record.tools.calls[item_id]

    # -- reading changed files through the client -----------------------------------------------------

    def _read_files(self, record: ThreadRecord, call: ToolCall) -> None:
        """Ask the client for each updated file not asked yet, to show whole files."""
        if not self.hub.handshake.client_capabilities.fs.readTextFile:
            return
        if not isinstance(call.item, codex_items.FileChangeItem):
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
            self._ask(record, call, change.path, candidates)

    def _ask(self, record: ThreadRecord, call: ToolCall, path: str, candidates: list[str]) -> None:
        def answered(raw: Raw) -> None:
            call.reads_pending -= 1
            try:
                call.files[path] = msgspec.json.decode(
                    raw, type=acp_tools.ReadTextFileResult
                ).content
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                log.warning("fs/read_text_file answer for %s not understood: %s", path, exc)
            else:
                self._refresh(record, call)
            self._forget_if_done(record, call)

        def refused(error: ErrorObject) -> None:
            if len(candidates) > 1:
                self._ask(record, call, path, candidates[1:])
                return
            log.info("the client could not read %s (%s); showing hunks", path, error.message)
            call.reads_pending -= 1
            self._forget_if_done(record, call)

        params = acp_tools.ReadTextFileParams(sessionId=record.id, path=candidates[0])
        self.hub.client.request("fs/read_text_file", params, answered, refused)

    def _refresh(self, record: ThreadRecord, call: ToolCall) -> None:
        """Send a file change's content again, now that a file's text is known."""
        item_id = call.item.id
        if (
            self.hub.threads.session(record.id) is not record
            or record.tools.calls.get(item_id) is not call
        ):
            return
        view = self._view(record, call.item, files=call.files)
        encoded = msgspec.json.encode(view.content)
        if encoded == call.sent_content:
            return
        call.sent_content = encoded
        self._send(
            record, item_id, acp_tools.ToolCallUpdate(toolCallId=item_id, content=view.content)
        )

    # -- plans and names -------------------------------------------------------------------------------

    def plan_updated(self, note: codex_items.TurnPlanUpdated) -> None:
        if self.hub.threads.session(note.threadId) is not None:
            self.hub.client.update(note.threadId, plan_update(note))

    def thread_name_updated(self, note: codex_items.ThreadNameUpdated) -> None:
        if self.hub.threads.session(note.threadId) is not None:
            self.hub.client.update(
                note.threadId, acp_tools.SessionInfoUpdate(title=note.threadName)
            )
