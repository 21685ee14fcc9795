"""The Subagent Sessions RFD's invariants that a transcript alone can show.

:class:`TranscriptChecker` follows one ACP conversation, message by message,
and raises :class:`Violation` at the first message that breaks a rule, with
the transcript line and why. The replay runs it on every fixture; the
end-to-end tests run it on live conversations. The rules:

1. **Announcement before traffic.** A session id may appear on an agent
   message (``params.sessionId`` of a notification or request) only once it is
   known: a root (from ``session/new``, ``session/load``, ``session/resume``,
   ``session/fork``) or a child announced by a ``subagent_update`` on its
   parent's stream. A live ``session_message`` naming a sender or recipient
   names known sessions. An announcement cannot reparent a child, make a
   session its own child, or come from an unknown parent.
2. **Capability.** A v1 client that did not declare ``clientCapabilities.subagents``
   never receives ``subagent_update``, ``session_message`` or ``session_message_chunk``.
3. **One answer per request.** Every agent-to-client request is answered by the
   client at most once (a second answer is the client's fault, and still a
   broken conversation worth reporting); a response to a request never made is
   reported too.
4. **Freshness boundary.** While a ``session/load`` is replaying history (between
   the request and its response), no ``subagent_update`` grants a capability
   (``cancel``) or reports a current work ``state``: those are current facts,
   sent after the response. After the response, no history for that session
   arrives: no ``user_message_chunk`` of a message the load replayed, nor one
   without a ``messageId`` (a live one, steered input, names its new message).
5. **Tool calls before references.** A ``tool_call_update``, and the ``toolCall``
   of a ``session/request_permission``, name a tool call the session was told
   of by a ``tool_call`` update first: a client never meets a tool call id it
   cannot place. (v1 only: in v2 every ``tool_call_update`` is an upsert.)

ACP v2 (the ``initialize`` answer says ``protocolVersion: 2``) changes three
things: sub-agents need no capability (rule 2 does not apply); the replay is
``session/resume`` with ``replayFrom`` (rule 4 applies to it, and to the
``user_message`` of a replayed message); and a resume sends the session's
current ``state_update`` before its response (6: checked at the response),
while a sub-agent's ``state_update`` waits for that response (rule 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SUBAGENT_UPDATES = frozenset({"subagent_update", "session_message", "session_message_chunk"})
_ROOT_METHODS = frozenset({"session/new", "session/load", "session/resume", "session/fork"})


class Violation(Exception):
    """A rule broken at transcript ``line`` (1-based, counting agent messages)."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line, self.why = line, why


@dataclass
class TranscriptChecker:
    subagents: bool
    #: The protocol version ``initialize`` settled on (1 until one is seen).
    version: int = 1
    #: session id → parent id (``None`` for a root).
    parents: dict[str, str | None] = field(default_factory=dict)
    _client_requests: dict[Any, tuple[str, Any]] = field(default_factory=dict)
    _agent_requests: set[Any] = field(default_factory=set)
    _answered: set[Any] = field(default_factory=set)
    #: session ids being loaded (request sent, response not yet) → request id.
    _loading: dict[str, Any] = field(default_factory=dict)
    _loaded: set[str] = field(default_factory=set)
    #: (session, messageId) of the user messages a load replayed.
    _replayed_messages: set[tuple[Any, Any]] = field(default_factory=set)
    #: Sessions known only from a load/resume request still unanswered.
    _provisional: set[str] = field(default_factory=set)
    #: session id → the tool call ids announced on it (``tool_call``).
    _tool_calls: dict[Any, set[Any]] = field(default_factory=dict)
    #: v2 resumes under way: session id → whether its ``state_update`` was sent yet.
    _resuming: dict[str, bool] = field(default_factory=dict)

    # -- the client's side -----------------------------------------------------------

    def client(self, message: dict[str, Any], line: int) -> None:
        """A message the client sent; ``line`` is the transcript line it follows."""
        if "method" in message:
            if "id" in message:
                params = message.get("params") or {}
                self._client_requests[message["id"]] = (message["method"], params)
                named = params.get("sessionId")
                if (
                    message["method"] in ("session/load", "session/resume")
                    and isinstance(named, str)
                    and named not in self.parents
                ):
                    # The client names the session: history for it may precede the
                    # response. Until that response succeeds the session is provisional.
                    self.parents[named] = None
                    self._provisional.add(named)
                if isinstance(named, str) and self._replays(message["method"], params):
                    self._loading[named] = message["id"]
                    self._loaded.discard(named)
                if (
                    (self.version >= 2 or "replayFrom" in params)
                    and message["method"] == "session/resume"
                    and isinstance(named, str)
                ):
                    self._resuming[named] = False
            return
        rid = message.get("id")
        if rid not in self._agent_requests:
            raise Violation(
                line, f"the client answered request {rid!r}, which the agent never sent"
            )
        if rid in self._answered:
            raise Violation(line, f"request {rid!r} was answered more than once")
        self._answered.add(rid)

    # -- the agent's side ------------------------------------------------------------------

    def agent(self, message: dict[str, Any], line: int) -> None:
        """A message the agent sent, at transcript ``line``."""
        if "method" in message:
            if "id" in message:
                self._agent_requests.add(message["id"])
            self._agent_call(message, line)
            return
        rid = message.get("id")
        request = self._client_requests.pop(rid, None)
        if request is None or "result" not in message:
            if request is not None and request[0] in ("session/load", "session/resume"):
                session = str(request[1].get("sessionId"))
                if self._opening_again(session):
                    return  # another open of it (sent after, a cancelled one's retry) goes on
                self._loading.pop(session, None)
                if session in self._provisional:
                    # A failed load establishes nothing: its session is unknown again.
                    self._provisional.discard(session)
                    self.parents.pop(session, None)
            return
        method, params = request
        result = message["result"] or {}
        if method == "initialize" and isinstance(result.get("protocolVersion"), int):
            self.version = result["protocolVersion"]
        if method == "session/resume" and str(params.get("sessionId")) in self._resuming:
            session = str(params.get("sessionId"))
            if not self._resuming.pop(session, True):
                raise Violation(
                    line,
                    f"session/resume of {session!r} answered before its current state_update",
                )
        if method in _ROOT_METHODS:
            session = result.get("sessionId") or params.get("sessionId")
            if isinstance(session, str):
                self.parents.setdefault(session, None)
                self._provisional.discard(session)
        if self._replays(method, params):
            session = str(params.get("sessionId"))
            self._loading.pop(session, None)
            self._loaded.add(session)

    def _opening_again(self, session: str) -> bool:
        """Whether a load or resume of ``session`` is still unanswered."""
        return any(
            method in ("session/load", "session/resume") and params.get("sessionId") == session
            for method, params in self._client_requests.values()
        )

    def _replays(self, method: str, params: dict[str, Any]) -> bool:
        """Whether request ``method`` replays history: v1's load, v2's resume with replayFrom."""
        # v1's resume has no replayFrom: a resume with one is v2's, whatever was seen of
        # initialize yet (a caller may feed the client's requests ahead of the answers).
        if method == "session/resume":
            return params.get("replayFrom") is not None
        return method == "session/load" and self.version < 2

    def _agent_call(self, message: dict[str, Any], line: int) -> None:
        params = message.get("params") or {}
        session = params.get("sessionId")
        if session is not None and session not in self.parents:
            raise Violation(
                line,
                f"{message['method']} for session {session!r} before any announcement of it "
                "(not a root, and no subagent_update on its parent's stream)",
            )
        if message["method"] == "session/request_permission" and self.version < 2:
            tool_call = params.get("toolCall") or {}
            self._tool_call_known(session, tool_call.get("toolCallId"), message["method"], line)
        update = params.get("update") if message["method"] == "session/update" else None
        if not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        if kind == "state_update" and session in self._resuming:
            self._resuming[session] = True
        if (
            kind == "state_update"
            and isinstance(session, str)
            and self.parents.get(session) is not None
            and self._replaying(session)
        ):
            raise Violation(line, f"a current work state for {session!r} while history is replayed")
        if self.version >= 2:
            if kind in ("tool_call", "tool_call_update"):
                self._tool_calls.setdefault(session, set()).add(update.get("toolCallId"))
        elif kind == "tool_call":
            self._tool_calls.setdefault(session, set()).add(update.get("toolCallId"))
        elif kind == "tool_call_update":
            self._tool_call_known(session, update.get("toolCallId"), kind, line)
        if kind in SUBAGENT_UPDATES and not self.subagents and self.version < 2:
            raise Violation(line, f"{kind} sent to a client that did not declare subagents")
        if kind == "subagent_update":
            self._announce(session, update, line)
        elif kind in ("session_message", "session_message_chunk") and not self._replaying(session):
            for role in ("senderSessionId", "recipientSessionId"):
                other = update.get(role)
                if other is not None and other not in self.parents:
                    raise Violation(
                        line, f"{kind} names {role} {other!r}, a session never announced"
                    )
        elif kind in ("user_message_chunk", "user_message"):
            message_id = update.get("messageId")
            if self._replaying(session):
                self._replayed_messages.add((session, message_id))
            elif self._root_of(session) in self._loaded and (
                message_id is None or (session, message_id) in self._replayed_messages
            ):
                raise Violation(
                    line,
                    f"history ({kind}) for {session!r} after the "
                    f"{'session/resume' if self.version >= 2 else 'session/load'} response",
                )

    def _tool_call_known(self, session: Any, tool_call_id: Any, what: str, line: int) -> None:
        if tool_call_id not in self._tool_calls.get(session, ()):
            raise Violation(
                line,
                f"{what} names tool call {tool_call_id!r}, which session {session!r} was "
                "never told of (no tool_call update)",
            )

    def _announce(self, parent: Any, update: dict[str, Any], line: int) -> None:
        child = update.get("sessionId")
        if not isinstance(child, str):
            raise Violation(line, "subagent_update without a child sessionId")
        if child == parent:
            raise Violation(line, f"session {child!r} announced as its own child")
        known = self.parents.get(child, "<unknown>")
        if known != "<unknown>" and known != parent:
            raise Violation(line, f"session {child!r} reparented from {known!r} to {parent!r}")
        ancestor: Any = parent
        while ancestor is not None:
            if ancestor == child:
                raise Violation(line, f"announcing {child!r} under {parent!r} makes a cycle")
            ancestor = self.parents.get(ancestor)
        if self._replaying(parent):
            capabilities = update.get("capabilities")
            if isinstance(capabilities, dict) and capabilities.get("cancel") is not None:
                raise Violation(
                    line, f"a cancel capability for {child!r} while history is replayed"
                )
            if update.get("state") is not None:
                raise Violation(
                    line, f"a current work state for {child!r} while history is replayed"
                )
        self.parents[child] = parent

    def _root_of(self, session: Any) -> Any:
        seen = 0
        while self.parents.get(session) is not None and seen < 10_000:
            session = self.parents[session]
            seen += 1
        return session

    def _replaying(self, session: Any) -> bool:
        return bool(self._loading) and self._root_of(session) in self._loading
