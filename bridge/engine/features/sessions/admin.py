"""What a client may ask of a session besides work, and Codex can do: its status, its
title, archiving and deleting it, signing out, stopping one running command.

ACP v2 has these methods (``session/status``, ``session/set_title``,
``session/archive`` / ``unarchive`` / ``delete``, ``auth/logout``,
``tool_call/cancel``); its face decodes their params and calls the method here
that does each. Each is one Codex request (``thread/read``, ``thread/name/set``,
``thread/archive`` / ``unarchive`` / ``delete``, ``account/logout``,
``thread/backgroundTerminals/list`` then ``terminate``), answered when Codex
answers; Codex's error is passed on.

A running command can be stopped on its own: Codex lists it among the thread's
terminals (its ``itemId`` is the tool call's id) and terminates its process; the
call then ends ``cancelled`` (the v2 face reads :attr:`ThreadRecord.cancelled_calls`)
and the turn goes on. A Codex without that experimental method says so once;
commands are no longer offered as cancellable (``hub.unknown_to_codex``).
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from msgspec import Raw

from ....acp import subagents as acp_subagents
from ....codex import threads as codex_threads
from ....jsonrpc import RequestId, RpcError
from ....jsonrpc.peer import ErrorObject
from ...core.hub import Hub, from_codex, unknown_method

log = logging.getLogger(__name__)

#: Codex's experimental methods for a thread's running commands (``exec_command`` sessions).
LIST_TERMINALS = codex_threads.LIST_BACKGROUND_TERMINALS
TERMINATE = codex_threads.TERMINATE_BACKGROUND_TERMINAL


class SessionAdmin:
    """The requests of the module docstring."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    @property
    def terminals_supported(self) -> bool:
        """Codex can list a thread's running commands (so one can be stopped alone)."""
        return LIST_TERMINALS not in self.hub.unknown_to_codex

    def status(self, rid: RequestId, session_id: str) -> None:
        """Open here (with the work state the client was last told), or stored, or
        another connection's (open, for a shared Codex), or not found."""
        # Here and in each method below, not at the top: only a v2 client asks these, and
        # its initialize imported v2 already; a v1 client's start never pays for it.
        from ....acp import v2

        hub = self.hub
        record = hub.threads.session(session_id)
        if record is not None:
            state = acp_subagents.WorkState(state=record.shown_state)
            hub.answer_client(rid, v2.SessionStatusResult(status="open", state=state))
            return

        def read(result: codex_threads.ThreadReadResult) -> None:
            # Codex holds a thread another connection opened (a daemon's shared Codex): it
            # is in memory, for any connection, though not open on this one.
            loaded = (result.thread.status or {}).get("type", "notLoaded") != "notLoaded"
            hub.answer_client(rid, v2.SessionStatusResult(status="open" if loaded else "saved"))

        def unknown(error: ErrorObject) -> None:
            hub.refuse_client(
                rid,
                RpcError.not_found(
                    f"session/status: no session {session_id} ({error.message})",
                    {"sessionId": session_id},
                ),
            )

        hub.codex_request(
            "thread/read",
            codex_threads.ThreadReadParams(threadId=session_id),
            codex_threads.ThreadReadResult,
            read,
            unknown,
        )

    def set_title(self, rid: RequestId, session_id: str, title: str) -> None:
        from ....acp import v2

        hub = self.hub
        hub.codex_request(
            "thread/name/set",
            {"threadId": session_id, "name": title},
            None,
            lambda _result: hub.answer_client(rid, v2.SetTitleResult(title=title)),
            hub.pass_error_to(rid),
        )

    def archive(self, rid: RequestId, session_id: str) -> None:
        self._thread_request(rid, "thread/archive", session_id)

    def unarchive(self, rid: RequestId, session_id: str) -> None:
        self._thread_request(rid, "thread/unarchive", session_id)

    def delete(self, rid: RequestId, session_id: str) -> None:
        self._thread_request(rid, "thread/delete", session_id)

    def _thread_request(self, rid: RequestId, codex_method: str, session_id: str) -> None:
        """Answered ``{}`` once Codex has done ``codex_method`` to the thread."""
        from ....acp import v2

        hub = self.hub
        hub.codex_request(
            codex_method,
            {"threadId": session_id},
            None,
            lambda _result: hub.answer_client(rid, v2.Empty()),
            hub.pass_error_to(rid),
        )

    def logout(self, rid: RequestId) -> None:
        from ....acp import v2

        hub = self.hub
        hub.codex_request(
            "account/logout",
            None,
            None,
            lambda _result: hub.answer_client(rid, v2.Empty()),
            hub.pass_error_to(rid),
        )

    def cancel_tool_call(self, rid: RequestId, session_id: str, call_id: str) -> None:
        """Stop one running command. The answer says the cancel was accepted; the call's
        final status (``cancelled``, or ``completed`` / ``failed`` if it finished first)
        confirms it."""
        from ....acp import v2

        hub = self.hub
        record = hub.threads.session(session_id)
        if record is None or call_id not in record.cancellable:
            raise RpcError.invalid_params(
                f"tool_call/cancel: tool call {call_id} does not advertise cancel (unknown, "
                "already final, or no command: Codex stops a command, or a whole turn with "
                "session/cancel)",
                {"toolCallId": call_id},
            )
        record.cancelled_calls.add(call_id)

        def listed(result: Any) -> None:
            found = [t for t in _terminals(result) if t.get("itemId") == call_id]
            if not found:
                hub.answer_client(rid, v2.Empty())  # finished first: its status says how
                return
            hub.codex_request(
                TERMINATE,
                {"threadId": session_id, "processId": found[0].get("processId")},
                None,
                lambda _result: hub.answer_client(rid, v2.Empty()),
                hub.pass_error_to(rid),
            )

        def refused(error: ErrorObject) -> None:
            if not unknown_method(error):
                hub.refuse_client(rid, from_codex(error))
                return
            # An older or newer Codex without the experimental method: commands are no
            # longer offered as cancellable; session/cancel still stops them with the turn.
            if self.terminals_supported:
                log.warning(
                    "Codex has no %s (%s): tool_call/cancel is no longer offered",
                    LIST_TERMINALS,
                    error.message,
                )
            hub.unknown_to_codex.add(LIST_TERMINALS)
            hub.refuse_client(
                rid,
                RpcError.invalid_params(
                    f"tool_call/cancel: this Codex cannot stop one command ({LIST_TERMINALS} "
                    "is unknown to it); session/cancel stops the turn and its commands",
                    {"toolCallId": call_id},
                ),
            )

        hub.codex_request(LIST_TERMINALS, {"threadId": session_id}, None, listed, refused)


def _terminals(result: Any) -> list[dict[str, Any]]:
    """The entries of ``thread/backgroundTerminals/list``'s answer (raw: it is experimental)."""
    decoded = msgspec.json.decode(result) if isinstance(result, bytes | Raw) else result
    data = decoded.get("data") if isinstance(decoded, dict) else None
    return [t for t in data if isinstance(t, dict)] if isinstance(data, list) else []
