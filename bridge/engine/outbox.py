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
:mod:`bridge.shell.serve`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET

from ..acp import tools as acp_tools
from ..acp import types as acp_types
from .effects import Effect, Merge, ToClient

#: Bytes waiting for the client above which the shell stops reading Codex.
CLIENT_CEILING: Final = 8 * 1024 * 1024
#: The same for Codex (what the client sends it is small: prompts, answers).
CODEX_CEILING: Final = 8 * 1024 * 1024

# ``session/update`` is most of what the client is sent: its envelope is written once.
_UPDATE_HEAD: Final = b'{"jsonrpc":"2.0","method":"session/update","params":'
_encode = msgspec.json.Encoder().encode

#: Merged pieces are joined once this many are pending, so a long run holds one string.
_JOIN_EVERY: Final = 512


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


def _plan(session_id: str, update: acp_tools.Plan) -> Merge | None:
    return Merge(session_id, ("plan", ""), update, None)


_MERGEABLE: Final[dict[type, Callable[[str, Any], Merge | None]]] = {
    acp_types.AgentMessageChunk: _message_chunk,
    acp_types.AgentThoughtChunk: _message_chunk,
    acp_tools.ToolCallUpdate: _tool_call_update,
    acp_tools.Plan: _plan,
}


def update_effect(session_id: str, update: msgspec.Struct) -> ToClient:
    """The effect that sends ``update``, marked with how it may merge (if it may)."""
    data = encode_update(session_id, update)
    mergeable = _MERGEABLE.get(type(update))
    merge = mergeable(session_id, update) if mergeable is not None else None
    return ToClient(data, session_id, merge)


def _with_text(update: Any, text: str) -> msgspec.Struct:
    """``update`` (a mergeable one that appends) carrying ``text`` instead of its own."""
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
    """One queued message: its bytes (or the run it became), its size, how it may merge."""

    __slots__ = ("data", "merge", "size")

    def __init__(self, data: bytes | _Run, size: int, merge: Merge | None) -> None:
        self.data = data
        self.size = size
        self.merge = merge


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
        #: Per session, its last queued message while it is mergeable.
        self._open: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, effect: Effect) -> None:
        """Queue one message (a :class:`ToClient` may join the one before it; see above)."""
        if type(effect) is not ToClient or effect.session_id is None:
            # A response, a request, anything for Codex: it keeps its place against all.
            if self._open:
                self._open.clear()
            self._append(effect.data, None)
            return
        merge, open_ = effect.merge, self._open
        if merge is None:
            if open_:
                open_.pop(effect.session_id, None)
            self._append(effect.data, None)
            return
        last = open_.get(merge.session_id)
        if last is not None and self.behind and last.merge.stream == merge.stream:  # type: ignore[union-attr]
            self._join(last, merge, effect.data)
        else:
            open_[merge.session_id] = self._append(effect.data, merge)

    def _append(self, data: bytes, merge: Merge | None) -> _Entry:
        entry = _Entry(data, len(data), merge)
        self._queue.append(entry)
        self.size += entry.size
        return entry

    def _join(self, entry: _Entry, merge: Merge, data: bytes) -> None:
        self.merged += 1
        if merge.text is None:  # the newer whole stands for both
            self.size += len(data) - entry.size
            entry.data, entry.size, entry.merge = data, len(data), merge
            return
        run = entry.data
        if type(run) is bytes:
            run = entry.data = _Run(entry.merge)  # type: ignore[arg-type]
        run.append(merge.text)  # type: ignore[union-attr]
        entry.size += len(merge.text)
        self.size += len(merge.text)

    def clear(self) -> None:
        """Forget everything waiting (the peer is gone)."""
        self._queue.clear()
        self._open.clear()
        self.size = 0

    def take(self, limit: int) -> list[bytes]:
        """The next messages to write, in order: at least one, then up to ``limit`` bytes.

        Taken messages are out of the queue: nothing joins them any more.
        """
        batch: list[bytes] = []
        queue, open_, taken = self._queue, self._open, 0
        while queue and (not batch or taken < limit):
            entry = queue.popleft()
            merge = entry.merge
            if merge is not None and open_.get(merge.session_id) is entry:
                del open_[merge.session_id]
            data = entry.data
            batch.append(data if type(data) is bytes else data.data())  # type: ignore[union-attr]
            taken += entry.size
            self.size -= entry.size
        return batch
