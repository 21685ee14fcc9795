"""Feature: Codex's background terminals as AIR's async tasks (``asyncTasks`` declared).

A command the model started with ``exec_command`` can outlive its turn: Codex ends the
turn while the command's item is still in progress, lists it among the thread's
background terminals, and completes its item whenever the process exits. For a client
that declared ``asyncTasks``:

- when a session's turn completes with a command still running, the command's tool call
  is marked ``_meta.jetbrains.air.asyncTasks.backgrounded: true`` and announced as a task
  (``async_task_spawned``: its id and tool call id the item id, ``taskType: "shell"``,
  its command as the name, ``showInTranscript: false``, ``canStop: true``), before the
  prompt's answer;
- when its item completes, ``async_task_state_update`` says ``completed`` or ``failed``
  (``stopped`` when the client stopped it), with its exit code as the summary;
- ``_session/async_task/stop {sessionId, asyncTaskId}`` finds its process in
  ``thread/backgroundTerminals/list`` and ends it (``.../terminate``): ``{stopped: true}``,
  or ``{stopped: false}`` when it had already ended.

A session opened again (``session/load``, ``session/resume``) while Codex still runs
commands of its thread (``thread/backgroundTerminals/list``) shows each as a task, once
the session's answer is out, on its tool call: the one the load's replay showed in
progress, or, after a resume (no history shown), the command's tool call announced then.

ACP v2 gets the two updates as ``_async_task_spawned`` / ``_async_task_state_update``.
"""

from __future__ import annotations

import logging
from typing import Any

from msgspec import UNSET, Raw

from ....acp import air
from ....acp import sessions as acp_sessions
from ....acp import tools as acp_tools
from ....codex import items as codex_items
from ....codex import threads as codex_threads
from ....codex import types as codex_types
from ....codex.messages import ItemNotification
from ....jsonrpc import RequestId, RpcError
from ....jsonrpc.peer import ErrorObject
from ...core import exchanges
from ...core.answers import decode_params
from ...core.codex_asks import ListTerminals
from ...core.exchanges import Ask, Exchange
from ...core.hub import Hub
from ...core.threads import ThreadRecord
from ...views.tool_views import running_command, unwrap_shell

log = logging.getLogger(__name__)

LIST_TERMINALS = "thread/backgroundTerminals/list"
TERMINATE = "thread/backgroundTerminals/terminate"


class AsyncTasks:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: Announced tasks still running: item id → session id.
        self._running: dict[str, str] = {}
        #: Tasks the client asked to stop.
        self._stopping: set[str] = set()

    @property
    def on(self) -> bool:
        return self.hub.declares(air.ASYNC_TASKS)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        """A turn that completed with commands still running: each is a task now."""
        if not self.on or note.turn.status != "completed":
            return
        record = self.hub.threads.session(note.threadId)
        if record is None:
            return
        for item_id, call in record.tools.calls.items():
            item = call.item
            if call.completed or not isinstance(item, codex_items.CommandExecutionItem):
                continue
            self._spawned(record, item_id, unwrap_shell(item.command))

    def session_opened(self, record: ThreadRecord, result: Any) -> None:
        """A session opened again: the commands its thread still runs are tasks."""
        # A load has just read them (to replay each in progress): that answer, not a
        # second read.
        known, record.running_at_load = record.running_at_load, None
        if not self.on or not isinstance(
            result, (acp_sessions.LoadSessionResult, acp_sessions.ResumeSessionResult)
        ):
            return

        if known is not None:
            self._running_at(record, known)
            return
        self.hub.codex.ask(
            record,
            ListTerminals(),
            LIST_TERMINALS,
            codex_threads.BackgroundTerminalsListParams(threadId=record.id),
            codex_threads.BackgroundTerminalsListResult,
            self._terminals_listed,
            _terminals_unlisted,
        )

    def _terminals_listed(
        self,
        record: ThreadRecord,
        _asked: ListTerminals,
        page: codex_threads.BackgroundTerminalsListResult,
    ) -> None:
        self._running_at(record, page.data)

    def _running_at(
        self, record: ThreadRecord, terminals: list[codex_threads.BackgroundTerminal]
    ) -> None:
        """``terminals`` still run on the session opened again: each is a task."""
        for terminal in terminals:
            if terminal.itemId in self._running:
                continue
            if terminal.itemId not in record.tools.announced:
                # A resume shows no history: the command's tool call, as it runs.
                record.tools.announce(terminal.itemId)
                self.hub.client.update(record.id, running_command(terminal, record.cwd))
            self._spawned(record, terminal.itemId, terminal.command)

    def _spawned(self, record: ThreadRecord, item_id: str, name: str) -> None:
        """Announce a running command, whose tool call the client has, as a task."""
        if item_id in self._running:
            return
        self._running[item_id] = record.id
        backgrounded = air.meta({air.ASYNC_TASKS: {"backgrounded": True}})
        self.hub.client.update(
            record.id, acp_tools.ToolCallUpdate(toolCallId=item_id, meta=backgrounded)
        )
        self.hub.client.update(
            record.id,
            air.AsyncTaskSpawned(
                asyncTaskId=item_id,
                name=name,
                taskType="shell",
                showInTranscript=False,
                canStop=True,
                toolCallId=item_id,
            ),
        )

    def item_completed(self, note: ItemNotification) -> None:
        item = note.item
        session_id = self._running.pop(getattr(item, "id", ""), None)
        if session_id is None or not isinstance(item, codex_items.CommandExecutionItem):
            return
        if item.id in self._stopping:
            self._stopping.discard(item.id)
            state = "stopped"
        else:
            state = "completed" if item.status == "completed" else "failed"
        summary = f"exit code {item.exitCode}" if item.exitCode is not None else UNSET
        self.hub.client.update(
            session_id, air.AsyncTaskStateUpdate(asyncTaskId=item.id, state=state, summary=summary)
        )

    def stop(self, rid: RequestId, raw: Raw) -> None:
        """``_session/async_task/stop``."""
        hub = self.hub
        params = decode_params(raw, air.AsyncTaskStopParams, air.ASYNC_TASK_STOP)
        task = params.asyncTaskId
        if self._running.get(task) != params.sessionId:
            raise RpcError.invalid_params(
                f"{air.ASYNC_TASK_STOP}: no running task {task!r} in session {params.sessionId}",
                {"sessionId": params.sessionId, "asyncTaskId": task},
            )

        exchanges.start(hub, self._stop_task(rid, params.sessionId, task))

    def _stop_task(self, rid: RequestId, session_id: str, task: str) -> Exchange:
        """The thread's running commands listed, then the task's one terminated."""
        hub = self.hub
        listed = yield Ask(
            LIST_TERMINALS,
            codex_threads.BackgroundTerminalsListParams(threadId=session_id),
            codex_threads.BackgroundTerminalsListResult,
            refuse=rid,
        )
        found = [t for t in listed.data if t.itemId == task]
        if not found:
            hub.client.answer(rid, air.AsyncTaskStopResult(stopped=False))
            return
        self._stopping.add(task)
        terminate = {"threadId": session_id, "processId": found[0].processId}
        yield Ask(TERMINATE, terminate, refuse=rid)
        hub.client.answer(rid, air.AsyncTaskStopResult(stopped=True))


def _terminals_unlisted(record: ThreadRecord, _asked: ListTerminals, error: ErrorObject) -> None:
    # A Codex without the experimental method: its commands show once done.
    log.info("running commands of %s not listed: %s", record.id, error.message)
