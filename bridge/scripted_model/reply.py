"""A reply as server-sent events: the Responses-API stream that directives build with
:class:`ReplyBuilder`, and the words they stream."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One server-sent event; ``data`` holds ``"type"`` too. The server waits ``delay`` s first.

    An event whose ``type`` is empty is sent as an SSE comment line.
    """

    type: str
    data: dict[str, Any]
    delay: float = 0.0


_encoder = msgspec.json.Encoder()


def encode_sse(events: Iterable[SseEvent]) -> bytes:
    """The wire form of ``events`` (``event: TYPE`` / ``data: JSON`` / blank line); no delays."""
    parts: list[bytes] = []
    for event in events:
        if not event.type:
            # An event without a type is a comment: it only carries its delay.
            parts.append(b":\n\n")
            continue
        parts += (
            b"event: ",
            event.type.encode(),
            b"\ndata: ",
            _encoder.encode(event.data),
            b"\n\n",
        )
    return b"".join(parts)


def words_text(count: int) -> str:
    """The message ``@@ words N`` streams: ``word1 word2 ... wordN``."""
    return " ".join(f"word{i}" for i in range(1, count + 1))


def reasoning_words(count: int) -> str:
    """The reasoning summary ``@@ reason N`` streams: ``thought1 thought2 ... thoughtN``."""
    return " ".join(f"thought{i}" for i in range(1, count + 1))


def word_chunks(text: str) -> list[str]:
    """``"a b c"`` → ``["a ", "b ", "c"]``: one delta per word, with the spaces after it."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def few_chunks(text: str, at_most: int = 4) -> list[str]:
    """Split ``text`` at word boundaries into at most ``at_most`` deltas of similar size."""
    words = word_chunks(text)
    size = max(1, -(-len(words) // at_most))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


@dataclass(slots=True)
class ReplyBuilder:
    """Collects the output items of one model response as the SSE events Codex accepts.

    Directives call ``message``, ``reasoning``, ``function_call``, ``sleep`` and ``fail``;
    ``events()`` wraps the items in ``response.created`` ... ``response.completed`` (with usage).
    """

    response_id: str
    input_tokens: int = 0
    cached_tokens: int = 0
    completes: bool = True
    output_tokens: int = 0
    reasoning_tokens: int = 0
    #: Response headers beyond the stream's own (``@@ limits``: Codex's rate-limit headers).
    headers: dict[str, str] = field(default_factory=dict)
    #: An HTTP error answered instead of the stream: (status, JSON body) (``@@ usage_limit``).
    refusal: tuple[int, dict[str, Any]] | None = None
    #: The phase of the messages that follow (``@@ phase``): ``commentary``, ``final_answer``.
    phase: str | None = None
    _events: list[SseEvent] = field(default_factory=list)
    _output: list[dict[str, Any]] = field(default_factory=list)
    _pending_delay: float = 0.0

    def _emit(self, type_: str, data: dict[str, Any], delay: float = 0.0) -> None:
        data["type"] = type_
        self._events.append(SseEvent(type_, data, delay + self._pending_delay))
        self._pending_delay = 0.0

    def _item_id(self, kind: str) -> str:
        # Codex uses these ids as its item ids (and a call id as the command item's id): keep them
        # unique by deriving them from the response id.
        return f"{kind}_{self.response_id}_{len(self._output)}"

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` before the next event (or before the end of the stream)."""
        self._pending_delay += seconds

    def message(self, chunks: Sequence[str], delay: float = 0.0) -> None:
        """An assistant message streamed as ``chunks``, ``delay`` s before each but the first."""
        index, item_id = len(self._output), self._item_id("msg")
        item: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "id": item_id,
            "content": [],
        }
        if self.phase is not None:
            item["phase"] = self.phase
        self._emit("response.output_item.added", {"output_index": index, "item": item})
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        for n, chunk in enumerate(chunks):
            self._emit("response.output_text.delta", {**where, "delta": chunk}, delay if n else 0.0)
        text = "".join(chunks)
        done = {**item, "content": [{"type": "output_text", "text": text, "annotations": []}]}
        self._emit("response.output_item.done", {"output_index": index, "item": done})
        self._output.append(done)
        self.output_tokens += len(chunks)

    def reasoning(self, chunks: Sequence[str], delay: float = 0.0) -> None:
        """A reasoning item whose one summary part is streamed as ``chunks``."""
        index, item_id = len(self._output), self._item_id("rs")
        item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": []}
        self._emit("response.output_item.added", {"output_index": index, "item": item})
        where = {"item_id": item_id, "output_index": index, "summary_index": 0}
        part = {"type": "summary_text", "text": ""}
        self._emit("response.reasoning_summary_part.added", {**where, "part": part})
        for n, chunk in enumerate(chunks):
            delta = {**where, "delta": chunk}
            self._emit("response.reasoning_summary_text.delta", delta, delay if n else 0.0)
        text = "".join(chunks)
        self._emit("response.reasoning_summary_text.done", {**where, "text": text})
        done = {**item, "summary": [{"type": "summary_text", "text": text}]}
        self._emit("response.output_item.done", {"output_index": index, "item": done})
        self._output.append(done)
        self.reasoning_tokens += len(chunks)
        self.output_tokens += len(chunks)

    def function_call(self, name: str, arguments: str, namespace: str | None = None) -> None:
        """A call of tool ``name`` (in ``namespace``, if any) with JSON text ``arguments``."""
        index = len(self._output)
        item: dict[str, Any] = {
            "type": "function_call",
            "id": self._item_id("fc"),
            "call_id": self._item_id("call"),
            "name": name,
            "arguments": arguments,
        }
        if namespace is not None:
            item["namespace"] = namespace
        added = {"output_index": index, "item": {**item, "arguments": ""}}
        self._emit("response.output_item.added", added)
        self._emit("response.output_item.done", {"output_index": index, "item": item})
        self._output.append(item)
        self.output_tokens += 1 + len(arguments) // 4

    def web_search_call(self, query: str) -> None:
        """A finished web search for ``query``: the provider's own tool, so Codex runs nothing
        and sends no tool result back."""
        index = len(self._output)
        item: dict[str, Any] = {
            "type": "web_search_call",
            "id": self._item_id("ws"),
            "status": "completed",
            "action": {"type": "search", "query": query},
        }
        added = {**item, "status": "in_progress", "action": {"type": "search"}}
        self._emit("response.output_item.added", {"output_index": index, "item": added})
        self._emit("response.output_item.done", {"output_index": index, "item": item})
        self._output.append(item)

    def rate_limits(self, used_percent: float, window_minutes: int, resets_at: int) -> None:
        """Report the account's primary usage window in the response's headers, as OpenAI does."""
        self.headers.update(
            {
                "x-codex-primary-used-percent": f"{used_percent:g}",
                "x-codex-primary-window-minutes": str(window_minutes),
                "x-codex-primary-reset-at": str(resets_at),
            }
        )

    def refuse(self, status: int, body: dict[str, Any]) -> None:
        """Answer the request with HTTP ``status`` and the JSON ``body`` instead of a stream."""
        self.refusal = (status, body)

    def fail(self) -> None:
        """End the stream after the items so far without ``response.completed``: the turn fails."""
        self.completes = False

    def events(self) -> list[SseEvent]:
        """The stream: ``response.created``, the items, ``response.completed`` unless failed."""
        created = {"id": self.response_id, "status": "in_progress"}
        events = [SseEvent("response.created", {"type": "response.created", "response": created})]
        events += self._events
        if self.completes:
            usage = {
                "input_tokens": self.input_tokens,
                "input_tokens_details": {"cached_tokens": self.cached_tokens},
                "output_tokens": self.output_tokens,
                "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
                "total_tokens": self.input_tokens + self.output_tokens,
            }
            response = {
                "id": self.response_id,
                "status": "completed",
                "output": self._output,
                "usage": usage,
            }
            data = {"type": "response.completed", "response": response}
            events.append(SseEvent("response.completed", data, self._pending_delay))
        elif self._pending_delay:
            # A `@@ sleep` just before `@@ fail` still delays the end of the stream: an event
            # without a type goes out as an SSE comment, which carries the delay and says nothing.
            events.append(SseEvent("", {}, self._pending_delay))
        return events
