"""What a page may ask the daemon over its WebSocket, decoded once and typed (pure).

Three actions, tagged by ``type``: answer a request waiting on a person, cancel a
thread's running turn, watch a thread's transcript tail. :func:`read_action` turns one
message into one of them, or into :class:`Refused` saying why it is none: not JSON,
nested deeper than any JSON-RPC message may be (:data:`~bridge.jsonrpc.peer.MAX_DEPTH`,
refused before it is decoded, as the JSON-RPC peer does), or members of the wrong type
(an id that is a list, an answer that is not a list of strings). Members an action does
not name are ignored. Whether what is well formed may be done (a request still waits, a
turn runs) is the board's to say.
"""

from __future__ import annotations

import msgspec

from ...jsonrpc.peer import MAX_DEPTH, too_deep
from ...wire import WireStruct


class Refused(msgspec.Struct, frozen=True):
    reason: str


class AnswerAction(WireStruct, tag="answer", tag_field="type"):
    """Answer Codex's request ``requestId``: an approval with ``decision``, a question
    with ``answers`` (for each question's id, the answers chosen)."""

    requestId: int | str
    decision: str | None = None
    answers: dict[str, list[str]] | None = None


class CancelAction(WireStruct, tag="cancel", tag_field="type"):
    """Cancel ``threadId``'s running turn."""

    threadId: str


class WatchAction(WireStruct, tag="watch", tag_field="type"):
    """Show ``threadId``'s transcript tail (``None``: none)."""

    threadId: str | None = None


Action = AnswerAction | CancelAction | WatchAction

_ACTION = msgspec.json.Decoder(Action)


def read_action(data: str | bytes) -> Action | Refused:
    """One message of a page's, as the action it asks; never raises."""
    if isinstance(data, str):
        # Lone surrogates become invalid UTF-8 (a decode error), not an exception.
        data = data.encode("utf-8", "surrogatepass")
    # Valid JSON nests at most half its length deep: short messages skip the scan.
    if len(data) > 2 * MAX_DEPTH and too_deep(data):
        return Refused(f"not an action: nested deeper than {MAX_DEPTH} levels")
    try:
        return _ACTION.decode(data)
    except msgspec.ValidationError as exc:
        return Refused(f"not an action: {exc}")
    except msgspec.DecodeError:
        return Refused("not an action: malformed JSON")
