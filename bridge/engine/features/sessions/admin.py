"""What a client may ask of a session besides work, and Codex can do: its status, its
title, archiving and deleting it, signing out, stopping one running command.

ACP v2 has these methods (``session/status``, ``session/set_title``,
``session/archive`` / ``unarchive`` / ``delete``, ``auth/logout``,
``tool_call/cancel``); its face decodes their params and calls the method here
that does each. ACP v1 has all but the last: ``session/delete`` and ``logout`` in its
stable schema, the other four in its unstable one (advertised as
``sessionCapabilities.status`` / ``title`` / ``archive`` to a client of that schema,
:meth:`advertise`, and done for any v1 client that asks); the ``session_*`` methods
decode v1's params and call the same methods. Each is one Codex request
(``thread/read``, ``thread/name/set``, ``thread/archive`` / ``unarchive`` /
``delete``, ``account/logout``, ``thread/backgroundTerminals/list`` then
``terminate``), answered when Codex answers. A thread Codex does not know is not found
(-32002 naming the session); Codex lost is said as it is.

A running command can be stopped on its own: Codex lists it among the thread's
terminals (its ``itemId`` is the tool call's id) and terminates its process; the
call then ends ``cancelled`` (the v2 face reads :attr:`ThreadRecord.shown.cancelled_calls`)
and the turn goes on. A Codex without that experimental method says so once;
commands are no longer offered as cancellable (``hub.codex.unknown``).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import msgspec
from msgspec import UNSET, Raw

from ....acp import auth as acp_auth
from ....acp import sessions as acp_sessions
from ....acp import subagents as acp_subagents
from ....acp import types as acp_types
from ....codex import threads as codex_threads
from ....jsonrpc import RequestId, RpcError
from ....jsonrpc.peer import ErrorObject
from ...core import exchanges, facts
from ...core.answers import decode_params, from_codex, malformed, unknown_method
from ...core.exchanges import Ask, Exchange, Refused
from ...core.hub import Hub

log = logging.getLogger(__name__)

#: Codex's experimental methods for a thread's running commands (``exec_command`` sessions).
LIST_TERMINALS = codex_threads.LIST_BACKGROUND_TERMINALS
TERMINATE = codex_threads.TERMINATE_BACKGROUND_TERMINAL


class Sessions(Protocol):
    """The sessions open here (:class:`bridge.engine.features.sessions.lifecycle.Lifecycle`)."""

    def thread_gone(self, note: codex_threads.ThreadGone) -> None:
        """Codex unloaded the thread for good (deleted or archived): its session closes."""


class SessionAdmin:
    """The requests of the module docstring."""

    def __init__(self, hub: Hub, *, sessions: Sessions) -> None:
        self.hub = hub
        self._sessions = sessions

    def advertise(self, result: acp_types.InitializeResult) -> None:
        """``sessionCapabilities.status``, ``.title`` and ``.archive`` are unstable ACP:
        advertised to a client of the unstable schema (:attr:`Hub.speaks_unstable`), as
        the other unstable capabilities are; the requests are done for any client."""
        if self.hub.speaks_unstable:
            result.agentCapabilities.sessionCapabilities.update(status={}, title={}, archive={})

    @property
    def terminals_supported(self) -> bool:
        """Codex can list a thread's running commands (so one can be stopped alone)."""
        return LIST_TERMINALS not in self.hub.codex.unknown

    # -- ACP v1's: its params decoded, then the methods below (v2's face calls those) ----

    def session_status(self, rid: RequestId, raw: Raw) -> None:
        """ACP v1's unstable ``session/status`` (its answer has no work state)."""
        params = decode_params(raw, acp_sessions.SessionParams, "session/status")
        self.status(rid, params.sessionId, report_state=False)

    def session_set_title(self, rid: RequestId, raw: Raw) -> None:
        """ACP v1's unstable ``session/set_title``."""
        params = decode_params(raw, acp_sessions.SetSessionTitleParams, "session/set_title")
        self.set_title(rid, params.sessionId, params.title)

    def session_archive(self, rid: RequestId, raw: Raw) -> None:
        """ACP v1's unstable ``session/archive``."""
        self.archive(
            rid, decode_params(raw, acp_sessions.SessionParams, "session/archive").sessionId
        )

    def session_unarchive(self, rid: RequestId, raw: Raw) -> None:
        """ACP v1's unstable ``session/unarchive``."""
        params = decode_params(raw, acp_sessions.SessionParams, "session/unarchive")
        self.unarchive(rid, params.sessionId)

    def session_delete(self, rid: RequestId, raw: Raw) -> None:
        """ACP v1's ``session/delete``."""
        params = decode_params(raw, acp_sessions.DeleteSessionParams, "session/delete")
        self.delete(rid, params.sessionId)

    def session_logout(self, rid: RequestId, _raw: Raw) -> None:
        """ACP v1's ``logout``."""
        self.logout(rid)

    # -- the requests, v1 and v2 -------------------------------------------------------------

    def status(self, rid: RequestId, session_id: str, *, report_state: bool = True) -> None:
        """Open here (with the work state the client was last told, where its version
        has one: ``report_state``), or stored, or another connection's (open, for a
        shared Codex), or not found."""
        hub = self.hub
        record = hub.threads.session(session_id)
        if record is not None:
            state = acp_subagents.WorkState(state=record.shown.state) if report_state else UNSET
            hub.client.answer(rid, acp_sessions.SessionStatusResult(status="open", state=state))
            return
        exchanges.start(hub, self._stored_status(rid, session_id))

    def _stored_status(self, rid: RequestId, session_id: str) -> Exchange:
        read = Ask(
            "thread/read",
            codex_threads.ThreadReadParams(threadId=session_id),
            codex_threads.ThreadReadResult,
        )
        try:
            result: codex_threads.ThreadReadResult = yield read
        except Refused as refused:
            self.hub.client.refuse(rid, self._unknown("session/status", session_id, refused.error))
            return
        # Codex holds a thread another connection opened (a daemon's shared Codex): it is in
        # memory, for any connection, though not open on this one.
        loaded = (result.thread.status or {}).get("type", "notLoaded") != "notLoaded"
        status = acp_sessions.SessionStatusResult(status="open" if loaded else "saved")
        self.hub.client.answer(rid, status)

    def set_title(self, rid: RequestId, session_id: str, title: str) -> None:
        """``thread/name/set``; Codex's ``thread/name/updated`` follows (the session's
        ``session_info_update``). A title of nothing but spaces is refused, as ACP asks."""
        if not title.strip():
            raise RpcError.invalid_params(
                "session/set_title: the title is empty; give the session a name",
                {"sessionId": session_id},
            )
        exchanges.start(
            self.hub,
            self._thread_request(
                rid,
                "session/set_title",
                Ask("thread/name/set", {"threadId": session_id, "name": title}),
                acp_sessions.SetSessionTitleResult(title=title),
            ),
        )

    def archive(self, rid: RequestId, session_id: str) -> None:
        """``thread/archive``: Codex stops the thread's turn (its prompt is answered
        ``cancelled``) and unloads it, as ACP has archiving close an active session. A
        session open on it here is closed before the answer (Codex's ``thread/archived``
        follows its answer); in another window of a shared Codex, with that notification
        (:meth:`Lifecycle.thread_gone`)."""
        exchanges.start(
            self.hub,
            self._thread_request(
                rid,
                "session/archive",
                Ask("thread/archive", {"threadId": session_id}),
                acp_sessions.ArchiveSessionResult(),
                closes=True,
            ),
        )

    def unarchive(self, rid: RequestId, session_id: str) -> None:
        exchanges.start(
            self.hub,
            self._thread_request(
                rid,
                "session/unarchive",
                Ask("thread/unarchive", {"threadId": session_id}),
                acp_sessions.ArchiveSessionResult(),
            ),
        )

    def delete(self, rid: RequestId, session_id: str) -> None:
        """``session/delete`` (v1 and v2): Codex stops the thread's turn (the prompt is
        answered ``cancelled``), unloads it and deletes it, then answers; what this
        connection (and any other on a shared Codex) had open of it goes with Codex's
        ``thread/deleted`` (:meth:`Lifecycle.thread_gone`). A thread Codex neither holds
        nor stored is not found."""
        exchanges.start(
            self.hub,
            self._thread_request(
                rid,
                "session/delete",
                Ask("thread/delete", {"threadId": session_id}),
                acp_sessions.DeleteSessionResult(),
            ),
        )

    def _thread_request(
        self,
        rid: RequestId,
        method: str,
        ask: Ask,
        answer: msgspec.Struct,
        *,
        closes: bool = False,
    ) -> Exchange:
        """``answer`` once Codex has done ``ask`` to the thread (and, ``closes``, the session
        open on it here closed first). A thread Codex neither holds nor stored is not found
        (-32002 naming the session, Codex's words in ``data.codex``); Codex lost, or an
        answer that does not fit, is passed on."""
        session_id = ask.params["threadId"]
        try:
            yield ask
        except Refused as refused:
            self.hub.client.refuse(rid, self._unknown(method, session_id, refused.error))
            return
        if closes:
            self._sessions.thread_gone(codex_threads.ThreadGone(threadId=session_id))
        self.hub.client.answer(rid, answer)

    def _unknown(self, method: str, session_id: str, error: ErrorObject) -> RpcError:
        """Codex's refusal of a request about a thread: the session is not found (-32002
        naming it, Codex's words in ``data.codex``), unless Codex is lost or its answer
        does not fit, which is said as it is."""
        if self.hub.codex.lost_reason is not None or malformed(error):
            return from_codex(error)
        # Codex: -32600 "no rollout found for thread id ...", "invalid thread id: ...".
        return RpcError.not_found(
            f"{method}: no session {session_id} ({error.message})",
            {"sessionId": session_id, "codex": error.message},
        )

    def logout(self, rid: RequestId) -> None:
        """``logout`` (v1) and ``auth/logout`` (v2): Codex forgets its credentials; its
        ``account/updated`` then tells every connection (:mod:`.auth`)."""
        exchanges.start(self.hub, self._logout(rid))

    def _logout(self, rid: RequestId) -> Exchange:
        yield Ask("account/logout", refuse=rid)
        self.hub.client.answer(rid, acp_auth.LogoutResult())

    def cancel_tool_call(self, rid: RequestId, session_id: str, call_id: str) -> None:
        """Stop one running command. The answer says the cancel was accepted; the call's
        final status (``cancelled``, or ``completed`` / ``failed`` if it finished first)
        confirms it."""

        hub = self.hub
        record = hub.threads.session(session_id)
        if record is None or call_id not in record.shown.cancellable:
            raise RpcError.invalid_params(
                f"tool_call/cancel: tool call {call_id} does not advertise cancel (unknown, "
                "already final, or no command: Codex stops a command, or a whole turn with "
                "session/cancel)",
                {"toolCallId": call_id},
            )
        hub.client.state(facts.ToolCallCancelled(record, call_id))
        exchanges.start(hub, self._stop_command(rid, session_id, call_id))

    def _stop_command(self, rid: RequestId, session_id: str, call_id: str) -> Exchange:
        """The thread's running commands listed, then the call's one terminated."""
        from ....acp import v2

        hub = self.hub
        try:
            listed = yield Ask(LIST_TERMINALS, {"threadId": session_id})
        except Refused as refused:
            hub.client.refuse(rid, self._no_terminals(refused.error, call_id))
            return
        found = [t for t in _terminals(listed) if t.get("itemId") == call_id]
        if found:
            process = {"threadId": session_id, "processId": found[0].get("processId")}
            yield Ask(TERMINATE, process, refuse=rid)
        # Without one, it finished first: its status says how.
        hub.client.answer(rid, v2.Empty())

    def _no_terminals(self, error: ErrorObject, call_id: str) -> RpcError:
        """Codex's refusal to list a thread's commands, for ``tool_call/cancel``."""
        if not unknown_method(error):
            return from_codex(error)
        # An older or newer Codex without the experimental method: commands are no longer
        # offered as cancellable; session/cancel still stops them with the turn.
        if self.terminals_supported:
            log.warning(
                "Codex has no %s (%s): tool_call/cancel is no longer offered",
                LIST_TERMINALS,
                error.message,
            )
        self.hub.codex.unknown.add(LIST_TERMINALS)
        return RpcError.invalid_params(
            f"tool_call/cancel: this Codex cannot stop one command ({LIST_TERMINALS} is "
            "unknown to it); session/cancel stops the turn and its commands",
            {"toolCallId": call_id},
        )


def _terminals(result: Any) -> list[dict[str, Any]]:
    """The entries of ``thread/backgroundTerminals/list``'s answer (raw: it is experimental)."""
    decoded = msgspec.json.decode(result) if isinstance(result, bytes | Raw) else result
    data = decoded.get("data") if isinstance(decoded, dict) else None
    return [t for t in data if isinstance(t, dict)] if isinstance(data, list) else []
