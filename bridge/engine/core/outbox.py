"""What waits to be written to one peer: a byte-counted queue that merges deltas
while its reader is behind.

The engine decides *what* goes out and in which order; the :class:`Outbox`
holds it until the shell can write it. For Codex it is a plain queue. For the
ACP client it also coalesces: an editor that reads slowly (busy rendering, a
remote link, a laptop waking up) should not make the bridge stop reading Codex,
and should not have to swallow one message per word when it catches up.

So while the shell says the client is behind (:attr:`Outbox.behind`), a
*mergeable* update joins the one queued just before it for the same session and
the same stream, instead of queueing a message of its own:

- ``agent_message_chunk`` and ``agent_thought_chunk`` of one message: texts are
  appended;
- a ``tool_call_update`` carrying only a terminal's output
  (``_meta.terminal_output``): its data is appended;
- ACP v2's ``terminal_output_chunk`` of one terminal: its bytes are appended (each
  chunk is base64 on its own: decoded, joined, encoded again);
- a ``tool_call_update`` carrying only ``content`` (a command's output so far, a
  patch's diff), and a ``plan``: each replaces the whole, so the newer one
  stands for both.

Rules that keep the stream what the engine meant:

- only the *last* message queued for a session can take more: anything else for
  that session (a tool call starting, a state change) closes it, and a message
  for no session in particular (a response, a request) closes every session's;
- per session, the client sees the engine's order; nothing is lost or
  repeated, only runs of consecutive deltas become one message;
- a client that keeps up sees the engine's stream message for message (nothing
  merges unless the shell has said the client is behind).

:attr:`Outbox.size` counts the bytes waiting (merged text included); the shell
stops reading the other side above :attr:`Outbox.ceiling`, so a client that never
reads holds at most about that much here, and Codex is back-pressured beyond it.

Pure: no I/O and no clock; the shell sets :attr:`Outbox.behind` (see
:mod:`bridge.shell.run_bridge`).
"""

from __future__ import annotations

import binascii
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from msgspec import UNSET

from ...acp import tools as acp_tools
from ...acp import types as acp_types
from ...acp import v2
from .effects import ToClient, ToCodex

#: Bytes waiting for the client above which the shell stops reading Codex.
CLIENT_CEILING: Final = 8 * 1024 * 1024
#: The same for Codex (what the client sends it is small: prompts, answers).
CODEX_CEILING: Final = 8 * 1024 * 1024

# ``session/update`` is most of what the client is sent: its envelope is written once.
_UPDATE_HEAD: Final = b'{"jsonrpc":"2.0","method":"session/update","params":'
_encode = msgspec.json.Encoder().encode

#: Merged pieces are joined once this many are pending, so a long run holds one string.
_JOIN_EVERY: Final = 512


@dataclass(frozen=True, slots=True)
class Merge:
    """How a ``session/update`` may merge with the one before it."""

    session_id: str
    #: The stream it belongs to: its update kind and the message or tool call it is of.
    stream: tuple[str, str]
    #: The update itself, to build the merged message from.
    update: Any
    #: The text it appends to its stream; ``None``: it replaces the stream's last one.
    text: str | None


def encode_update(session_id: str, update: msgspec.Struct) -> bytes:
    """One ``session/update`` notification, as sent to the client."""
    params = _encode(acp_types.SessionNotification(sessionId=session_id, update=update))
    return _UPDATE_HEAD + params + b"}"


# -- which updates merge ---------------------------------------------------------------------


def _message_chunk(session_id: str, update: Any) -> Merge | None:
    content = update.content
    if type(content) is not acp_types.TextContent or content.annotations is not UNSET:
        return None
    stream = (update.__struct_config__.tag, update.messageId or "")
    return Merge(session_id, stream, update, content.text)


def _tool_call_update(session_id: str, update: acp_tools.ToolCallUpdate) -> Merge | None:
    if (
        update.title is not UNSET
        or update.kind is not UNSET
        or update.status is not UNSET
        or update.locations is not UNSET
        or update.rawInput is not UNSET
        or update.rawOutput is not UNSET
    ):
        return None
    meta = update.meta
    if update.content is not UNSET:
        if meta is not UNSET:
            return None
        return Merge(session_id, ("content", update.toolCallId), update, None)
    if isinstance(meta, dict) and len(meta) == 1:
        output = meta.get("terminal_output")
        if isinstance(output, dict) and isinstance(output.get("data"), str):
            return Merge(session_id, ("terminal_output", update.toolCallId), update, output["data"])
    return None


def _terminal_chunk(session_id: str, update: v2.TerminalOutputChunk) -> Merge | None:
    if update.meta is not UNSET:
        return None
    try:
        data = binascii.a2b_base64(update.data)
    except binascii.Error:
        return None
    # Bytes as a str of the same length (latin-1 maps each byte to one character).
    return Merge(session_id, ("terminal", update.terminalId), update, data.decode("latin-1"))


def _plan(session_id: str, update: acp_tools.Plan) -> Merge | None:
    return Merge(session_id, ("plan", ""), update, None)


_MERGEABLE: Final[dict[type, Callable[[str, Any], Merge | None]]] = {
    acp_types.AgentMessageChunk: _message_chunk,
    acp_types.AgentThoughtChunk: _message_chunk,
    acp_tools.ToolCallUpdate: _tool_call_update,
    acp_tools.Plan: _plan,
    v2.TerminalOutputChunk: _terminal_chunk,
}


def update_effect(session_id: str, update: msgspec.Struct) -> ToClient:
    """The effect that sends ``update`` (carrying it, should it merge later)."""
    return ToClient(encode_update(session_id, update), session_id, update)


def merge_of(session_id: str, update: Any) -> Merge | None:
    """How ``update`` merges with the update before it, or ``None`` if it does not.

    Asked only while the client is behind: a client that keeps up never pays for it.
    """
    mergeable = _MERGEABLE.get(type(update))
    return mergeable(session_id, update) if mergeable is not None else None


def _with_text(update: Any, text: str) -> msgspec.Struct:
    """``update`` (a mergeable one that appends) carrying ``text`` instead of its own."""
    if isinstance(update, v2.TerminalOutputChunk):
        data = binascii.b2a_base64(text.encode("latin-1"), newline=False).decode("ascii")
        return msgspec.structs.replace(update, data=data)
    if isinstance(update, acp_tools.ToolCallUpdate):
        meta: Any = update.meta
        output = dict(meta["terminal_output"])
        output["data"] = text
        return msgspec.structs.replace(update, meta={"terminal_output": output})
    content = msgspec.structs.replace(update.content, text=text)
    return msgspec.structs.replace(update, content=content)  # type: ignore[no-any-return]


# -- the queue -------------------------------------------------------------------------------


class _Run:
    """Appended texts of one stream, built into a message when taken."""

    __slots__ = ("merge", "pieces")

    def __init__(self, merge: Merge) -> None:
        self.merge = merge
        self.pieces = [merge.text or ""]

    def append(self, text: str) -> None:
        pieces = self.pieces
        pieces.append(text)
        if len(pieces) >= _JOIN_EVERY:
            pieces[:] = ["".join(pieces)]

    def data(self) -> bytes:
        merge = self.merge
        return encode_update(merge.session_id, _with_text(merge.update, "".join(self.pieces)))


class _Entry:
    """One queued message: its bytes (or the run it became), its size, and for a
    ``session/update`` its session and update (how it merges is worked out when asked)."""

    __slots__ = ("_merge", "data", "session_id", "size", "update")

    def __init__(self, data: bytes, session_id: str | None = None, update: Any = None) -> None:
        self.data: bytes | _Run = data
        self.size = len(data)
        self.session_id = session_id
        self.update = update
        self._merge: Merge | None | bool = False  # False: not worked out yet

    def merge(self) -> Merge | None:
        merge = self._merge
        if merge is False:
            merge = self._merge = merge_of(self.session_id, self.update)  # type: ignore[arg-type]
        return merge  # type: ignore[return-value]


class Outbox:
    """Messages for one peer, in order, with their size in bytes; see the module docstring.

    :meth:`put` each effect as the engine produces it; :meth:`take` what to write next.
    """

    def __init__(self, *, ceiling: int = CLIENT_CEILING) -> None:
        self.ceiling = ceiling
        #: Set by the shell while the reader is not taking what is written to it.
        self.behind = False
        #: Bytes waiting (merged texts counted as they grow).
        self.size = 0
        #: Updates that joined one queued before them, since the start.
        self.merged = 0
        self._queue: deque[_Entry] = deque()
        #: Per session, its last queued message (what a delta may join).
        self._last: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, effect: ToClient | ToCodex) -> None:
        """Queue one message (a :class:`ToClient` may join the one before it; see above)."""
        session_id = effect.session_id if type(effect) is ToClient else None
        last = self._last
        if session_id is None:
            # A response, a request, anything for Codex: it keeps its place against all.
            if last:
                for closed in last.values():
                    closed.update = None  # nothing joins it now: let its update go
                last.clear()
            entry = _Entry(effect.data)
        else:
            if self.behind and self._joined(session_id, effect):  # type: ignore[arg-type]
                return
            previous = last.get(session_id)
            if previous is not None:
                previous.update = None
            entry = last[session_id] = _Entry(effect.data, session_id, effect.update)  # type: ignore[union-attr]
        self._queue.append(entry)
        self.size += entry.size

    def _joined(self, session_id: str, effect: ToClient) -> bool:
        """Whether ``effect`` joined its session's last queued message."""
        last = self._last.get(session_id)
        if last is None:
            return False
        merge = merge_of(session_id, effect.update)
        if merge is None:
            return False
        last_merge = last.merge()
        if last_merge is None or last_merge.stream != merge.stream:
            return False
        self.merged += 1
        if merge.text is None:  # the newer whole stands for both
            size = len(effect.data)
            self.size += size - last.size
            last.data, last.size, last._merge = effect.data, size, merge
            return True
        run = last.data
        if type(run) is bytes:
            run = last.data = _Run(last_merge)
        run.append(merge.text)  # type: ignore[union-attr]
        last.size += len(merge.text)
        self.size += len(merge.text)
        return True

    def clear(self) -> None:
        """Forget everything waiting (the peer is gone)."""
        self._queue.clear()
        self._last.clear()
        self.size = 0

    def take(self, limit: int) -> list[bytes]:
        """The next messages to write, in order: at least one, then up to ``limit`` bytes.

        Taken messages are out of the queue: nothing joins them any more.
        """
        batch: list[bytes] = []
        queue, last, taken = self._queue, self._last, 0
        while queue and (not batch or taken < limit):
            entry = queue.popleft()
            session_id = entry.session_id
            if session_id is not None and last.get(session_id) is entry:
                del last[session_id]
            data = entry.data
            batch.append(data if type(data) is bytes else data.data())  # type: ignore[union-attr]
            taken += entry.size
            self.size -= entry.size
        return batch
