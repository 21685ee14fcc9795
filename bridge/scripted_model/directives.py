"""The scripted model's brain: a decoded Responses-API request in, its reply's events out. No I/O.

Three questions decide a reply (the package docstring teaches the directive language itself):

1. Is the request Codex's own (a thread title, the approval reviewer, a compaction)? Those quote
   the user's prompt and must never run its script: ``codex_internal_purpose`` reads the metadata.
2. Which message is the user's? ``find_user_turn`` skips what Codex injects as role ``user``
   (``<environment_context>``, AGENTS.md, ``<subagent_notification>``, ...) and counts the tool
   results that came back since.
3. Which step of the script answers it? ``step_index``: the first one whose calls are unanswered.

To add a directive, write ``def _name(reply: ReplyBuilder, args: Args) -> None`` that calls the
builder (or raises ``DirectiveError``), decorate it with ``@directive("name", usage, calls=N)``,
``N`` being the number of tool calls it makes, and document it in the package docstring.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

__all__ = [
    "DEFAULT_TEXT",
    "DIRECTIVES",
    "INTERNAL_TEXT",
    "MAX_COUNT",
    "Args",
    "Directive",
    "DirectiveError",
    "ReplyBuilder",
    "Script",
    "SseEvent",
    "UserTurn",
    "codex_internal_purpose",
    "directive",
    "encode_sse",
    "find_user_turn",
    "parse_directives",
    "reasoning_words",
    "reply_for_request",
    "step_index",
    "turn_metadata",
    "words_text",
]

#: The reply to a message without directives, and to a request after the script's last step.
DEFAULT_TEXT = "ok"
#: The reply to Codex's own requests (thread title, compaction, ...); inside JSON if asked for.
INTERNAL_TEXT = "Scripted reply"

_PREFIX = "@@"
#: The most words a directive streams: a bigger count is surely a typo, and would eat memory.
MAX_COUNT = 1_000_000


# -------------------------------------------------------------------------------------------------
# Parsing


@dataclass(frozen=True, slots=True)
class Directive:
    """One ``@@ NAME ARGS`` line: ``name`` lower-cased, ``args`` the rest of the line, stripped."""

    name: str
    args: str

    def __str__(self) -> str:
        return f"{_PREFIX} {self.name} {self.args}".rstrip()


@dataclass(frozen=True, slots=True)
class Script:
    """The steps of a script; step ``k`` answers the ``k``-th model request of a user turn."""

    steps: tuple[tuple[Directive, ...], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.steps)


def _is_directive_line(line: str) -> bool:
    rest = line[len(_PREFIX) :]
    return line.startswith(_PREFIX) and (not rest or rest[0].isspace())


def parse_directives(text: str) -> Script:
    """Parse the directive block at the start of ``text``; never raises.

    The block is the run of lines starting with ``@@`` and a space at the very start of the text
    (blank lines inside it are skipped); it ends at the first other line, and what follows is prose
    the model ignores. A text that does not start with ``@@`` has no script. Unknown names are kept:
    running one replies with an error message, so a typo shows in the output of its test.
    """
    if not _is_directive_line(text):
        return Script()
    steps: list[tuple[Directive, ...]] = []
    current: list[Directive] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if not _is_directive_line(line):
            break
        name, _, args = line[len(_PREFIX) :].strip().partition(" ")
        if name.lower() == "then":
            steps.append(tuple(current))
            current = []
        else:
            current.append(Directive(name.lower(), args.strip()))
    steps.append(tuple(current))
    return Script(tuple(steps))


class DirectiveError(ValueError):
    """A directive cannot run; the reply becomes this message, so the test output shows it."""


@dataclass(frozen=True, slots=True)
class Args:
    """A directive's arguments: ``rest`` is the raw text, split into plain words and ``key=value``s.

    ``outputs``: the request's tool results that are JSON objects, newest first (``{{field}}``).
    """

    rest: str
    positional: tuple[str, ...]
    options: Mapping[str, str]
    outputs: Sequence[Mapping[str, Any]] = ()

    @classmethod
    def parse(cls, rest: str, outputs: Sequence[Mapping[str, Any]] = ()) -> Args:
        positional: list[str] = []
        options: dict[str, str] = {}
        for word in rest.split():
            key, eq, value = word.partition("=")
            if eq and key.isidentifier():
                options[key] = value
            else:
                positional.append(word)
        return cls(rest, tuple(positional), options, outputs)

    def expect(self, *, positional: int, options: Iterable[str] = ()) -> None:
        """Fail unless there are ``positional`` plain words and no option outside ``options``."""
        unknown = sorted(set(self.options) - set(options))
        if unknown:
            raise DirectiveError(f"unknown option {unknown[0]}=")
        if len(self.positional) != positional:
            raise DirectiveError(f"expected {positional} argument(s), got {len(self.positional)}")

    def count(self, index: int) -> int:
        count = _non_negative_int(self.positional[index], "count")
        if count > MAX_COUNT:
            raise DirectiveError(f"count {count} is over {MAX_COUNT}")
        return count

    def delay(self) -> float:
        """The ``delay_ms=D`` option in seconds (0 when absent)."""
        text = self.options.get("delay_ms")
        return 0.0 if text is None else _non_negative_int(text, "delay_ms") / 1000


def _non_negative_int(text: str, what: str) -> int:
    if not text.isdigit():
        raise DirectiveError(f"{what} must be a non-negative integer, got {text!r}")
    return int(text)


# -------------------------------------------------------------------------------------------------
# Server-sent events and the reply builder


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


def _word_chunks(text: str) -> list[str]:
    """``"a b c"`` → ``["a ", "b ", "c"]``: one delta per word, with the spaces after it."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def _few_chunks(text: str, at_most: int = 4) -> list[str]:
    """Split ``text`` at word boundaries into at most ``at_most`` deltas of similar size."""
    words = _word_chunks(text)
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


# -------------------------------------------------------------------------------------------------
# The directives. Each appends to the reply; ``calls`` counts the tool calls it makes, which is how
# ``@@ then`` knows the step a request is at.


DirectiveFunction = Callable[[ReplyBuilder, Args], None]


@dataclass(frozen=True, slots=True)
class DirectiveSpec:
    run: DirectiveFunction
    usage: str
    calls: int


#: Directive name → how to run it. ``@directive`` adds entries.
DIRECTIVES: dict[str, DirectiveSpec] = {}


def directive(
    name: str, usage: str, *, calls: int = 0
) -> Callable[[DirectiveFunction], DirectiveFunction]:
    """Register the decorated function as directive ``name``, which makes ``calls`` tool calls."""

    def register(run: DirectiveFunction) -> DirectiveFunction:
        DIRECTIVES[name] = DirectiveSpec(run, usage, calls)
        return run

    return register


@directive("words", "@@ words N [delay_ms=D]")
def _words(reply: ReplyBuilder, args: Args) -> None:
    args.expect(positional=1, options=["delay_ms"])
    reply.message(_word_chunks(words_text(args.count(0))), args.delay())


@directive("reason", "@@ reason N [delay_ms=D]")
def _reason(reply: ReplyBuilder, args: Args) -> None:
    args.expect(positional=1, options=["delay_ms"])
    reply.reasoning(_word_chunks(reasoning_words(args.count(0))), args.delay())


@directive("say", '@@ say TEXT | @@ say "JSON string"')
def _say(reply: ReplyBuilder, args: Args) -> None:
    text = args.rest
    if text.startswith('"'):
        # A JSON string holds what one line cannot: line breaks, leading or trailing spaces.
        try:
            text = str(json.loads(text))
        except json.JSONDecodeError as exc:
            raise DirectiveError(f"bad JSON string: {exc}") from None
    reply.message(_few_chunks(text))


@directive("think", "@@ think TEXT")
def _think(reply: ReplyBuilder, args: Args) -> None:
    # Readable reasoning for demos; one delta per word, like `reason`.
    if not args.rest:
        raise DirectiveError("think needs the text of the thought")
    reply.reasoning(_word_chunks(args.rest), 0.03)


_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w-]*)\s*(?:#\s*([1-9][0-9]*)\s*)?\}\}")


def _fill_placeholders(text: str, outputs: Sequence[Mapping[str, Any]]) -> str:
    """Replace ``{{field}}`` by ``field`` of the newest tool result (a JSON object) that has it,
    and ``{{field#N}}`` by that of the N-th newest (``#1`` is the newest): after three spawns in
    one step, ``{{agent_id#3}}`` is the first agent's id."""

    def value(match: re.Match[str]) -> str:
        name, nth = match.group(1), int(match.group(2) or 1)
        holding = [output[name] for output in outputs if name in output]
        if not holding:
            raise DirectiveError(f"no tool result so far has a field {name!r}")
        if len(holding) < nth:
            raise DirectiveError(f"only {len(holding)} tool result(s) so far have a field {name!r}")
        found = holding[nth - 1]
        text = found if isinstance(found, str) else json.dumps(found)
        # Placeholders stand inside JSON strings: escape the value for that place.
        return json.dumps(text)[1:-1]

    return _PLACEHOLDER.sub(value, text)


@directive("call", "@@ call [NAMESPACE/]NAME [JSON_OBJECT]", calls=1)
def _call(reply: ReplyBuilder, args: Args) -> None:
    target, _, arguments = args.rest.partition(" ")
    arguments = _fill_placeholders(arguments.strip() or "{}", args.outputs)
    try:
        decoded = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise DirectiveError(f"arguments are not JSON: {exc}") from None
    if not isinstance(decoded, dict):
        raise DirectiveError("arguments must be a JSON object")
    namespace, slash, name = target.rpartition("/")
    if not name or (slash and not namespace):
        raise DirectiveError("missing tool name")
    reply.function_call(name, arguments, namespace if slash else None)


@directive("web_search", "@@ web_search QUERY")
def _web_search(reply: ReplyBuilder, args: Args) -> None:
    # A hosted tool: the step goes on (no tool result comes back to wait for).
    if not args.rest:
        raise DirectiveError("web_search needs a query")
    reply.web_search_call(args.rest)


@directive("sleep", "@@ sleep MS")
def _sleep(reply: ReplyBuilder, args: Args) -> None:
    args.expect(positional=1)
    reply.sleep(_non_negative_int(args.positional[0], "MS") / 1000)


@directive("fail", "@@ fail")
def _fail(reply: ReplyBuilder, args: Args) -> None:
    args.expect(positional=0)
    reply.fail()


def _calls_in(step: Sequence[Directive]) -> int:
    # An unknown directive makes no call: its step replies with an error message, ending the turn.
    return sum(spec.calls for d in step if (spec := DIRECTIVES.get(d.name)) is not None)


def run_step(
    step: Sequence[Directive], reply: ReplyBuilder, outputs: Sequence[Mapping[str, Any]] = ()
) -> None:
    """Run ``step``'s directives in order, up to a ``fail``; a bad one raises ``DirectiveError``."""
    for d in step:
        spec = DIRECTIVES.get(d.name)
        try:
            if spec is None:
                known = ", ".join(sorted([*DIRECTIVES, "then"]))
                raise DirectiveError(f"unknown directive (known: {known})")
            spec.run(reply, Args.parse(d.args, outputs))
        except DirectiveError as exc:
            usage = f" (usage: {spec.usage})" if spec is not None else ""
            raise DirectiveError(f"bad directive `{d}`: {exc}{usage}") from None
        if not reply.completes:
            return


# -------------------------------------------------------------------------------------------------
# Reading the request


#: Messages that Codex adds as role ``user`` and that are not wrapped in one XML-like element.
_INJECTED_PREFIXES = (
    "# AGENTS.md instructions",
    # The summary that stands for the history after a compaction.
    "Another language model started to solve this problem",
)
# `<environment_context>...</environment_context>`, `<subagent_notification>`, `<turn_aborted>`, ...
_XML_WRAPPED = re.compile(r"\A\s*<([A-Za-z_][\w-]*)[\s>].*</\1>\s*\Z", re.DOTALL)


def _message_text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    # One line break between text parts, so a directive line never runs into the next part.
    return "\n".join(
        str(part.get("text", ""))
        for part in content
        if isinstance(part, dict) and part.get("type") == "input_text"
    )


def _is_injected(text: str) -> bool:
    return text.startswith(_INJECTED_PREFIXES) or _XML_WRAPPED.match(text) is not None


@dataclass(frozen=True, slots=True)
class UserTurn:
    """The latest real user message of a request, and the tool results that came back since."""

    text: str
    tool_outputs: int


def find_user_turn(body: Mapping[str, Any]) -> UserTurn | None:
    """The latest user message in ``body["input"]`` that a person (or a spawning agent) wrote.

    Messages that Codex injects as role ``user`` are skipped. ``tool_outputs`` counts the
    ``*_call_output`` items after it: one per answered tool call.
    """
    items = body.get("input")
    if not isinstance(items, list):
        return None
    outputs = 0
    for item in reversed(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if isinstance(kind, str) and kind.endswith("_call_output"):
            outputs += 1
        elif kind == "message" and item.get("role") == "user":
            text = _message_text(item)
            if not _is_injected(text):
                return UserTurn(text, outputs)
    return None


def _tool_output_objects(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The tool results of the request that are JSON objects, newest first."""
    found: list[Mapping[str, Any]] = []
    items = body.get("input")
    for item in reversed(items if isinstance(items, list) else []):
        if isinstance(item, dict) and str(item.get("type", "")).endswith("_call_output"):
            output = item.get("output")
            try:
                decoded = json.loads(output) if isinstance(output, str) else output
            except json.JSONDecodeError:
                continue
            if isinstance(decoded, dict):
                found.append(decoded)
    return found


# What the turn metadata says of a request that runs a person's (or a spawned agent's) turn. Codex's
# own requests say otherwise: a thread title (thread_source "thread_title", sent by the TUI), the
# automatic approval reviewer (sub-agent "guardian"), a compaction (request_kind "compaction").
_SCRIPTED_REQUEST_KINDS = frozenset({"turn"})
_SCRIPTED_THREAD_SOURCES = frozenset({"user", "subagent"})
_SCRIPTED_SUBAGENT_KINDS = frozenset({"thread_spawn", "collab_spawn"})


def turn_metadata(
    body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The ``x-codex-turn-metadata`` JSON, sent as a header and inside ``client_metadata``."""
    raw = (headers or {}).get("x-codex-turn-metadata")
    if raw is None:
        client_metadata = body.get("client_metadata")
        if isinstance(client_metadata, dict):
            raw = client_metadata.get("x-codex-turn-metadata")
    try:
        decoded = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        decoded = None
    return decoded if isinstance(decoded, dict) else {}


def codex_internal_purpose(
    body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> str | None:
    """Why Codex sent this request for itself (e.g. ``"thread_title"``); ``None`` for a user turn.

    Codex's own requests quote the user's prompt, so they must never run its script. The turn
    metadata tells them apart, by allow-list: a request is scripted only if its ``request_kind``
    is ``turn``, its ``thread_source`` is absent (app-server ``thread/start``), ``user`` or
    ``subagent``, and its sub-agent kind (also header ``x-openai-subagent``) is absent or a spawned
    agent's. An unknown purpose thus gets the plain reply, never a tool call.
    """
    meta = turn_metadata(body, headers)
    kind = meta.get("request_kind", "turn")
    if kind not in _SCRIPTED_REQUEST_KINDS:
        return str(kind)
    source = meta.get("thread_source")
    if source is not None and source not in _SCRIPTED_THREAD_SOURCES:
        return str(source)
    subagent = meta.get("subagent_kind") or (headers or {}).get("x-openai-subagent")
    if subagent is not None and subagent not in _SCRIPTED_SUBAGENT_KINDS:
        return str(subagent)
    return None


def _schema_instance(schema: object, text: str) -> object:
    """A value valid for a simple JSON schema: the first enum value, ``text`` for a string, ..."""
    if not isinstance(schema, dict):
        return text
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return {}
        return {name: _schema_instance(sub, text) for name, sub in properties.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    max_length = schema.get("maxLength")
    return text[:max_length] if isinstance(max_length, int) else text


def _plain_reply(body: Mapping[str, Any], text: str) -> str:
    """``text``; or, when the request wants JSON (``text.format`` json_schema), JSON built from it.

    The thread-title request wants ``{"title"}``; the approval reviewer wants ``{"outcome", ...}``,
    whose first enum value is ``allow``: the scripted reviewer approves every action.
    """
    options = body.get("text")
    fmt = options.get("format") if isinstance(options, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return _encoder.encode(_schema_instance(fmt.get("schema"), text)).decode()
    return text


def step_index(script: Script, tool_outputs: int) -> int:
    """The step for a request carrying ``tool_outputs`` tool results since the user's message.

    It is the first step whose calls are not all answered. A step without calls ends the turn, so
    the requests of that turn never go past it. ``len(script.steps)`` means "past the last step".
    """
    remaining = tool_outputs
    for index, step in enumerate(script.steps):
        calls = _calls_in(step)
        if calls == 0 or remaining < calls:
            return index
        remaining -= calls
    return len(script.steps)


def _token_estimate(body: Mapping[str, Any]) -> tuple[int, int]:
    """Plausible (input, cached) tokens: ~4 bytes a token; all but the newest input item cached."""
    prefix = len(_encoder.encode(body.get("instructions")))
    prefix += len(_encoder.encode(body.get("tools", [])))
    items = body.get("input")
    sizes = [len(_encoder.encode(item)) for item in items] if isinstance(items, list) else []
    total = prefix + sum(sizes)
    return max(1, total // 4), (total - (sizes[-1] if sizes else 0)) // 4


def reply_for_request(
    body: Mapping[str, Any],
    headers: Mapping[str, str] | None = None,
    *,
    response_id: str | None = None,
) -> list[SseEvent]:
    """The events answering one ``POST /responses`` with the decoded JSON ``body``; never raises.

    ``headers`` (lower-case names) are optional: the body carries the same turn metadata.
    ``response_id`` names the response and prefixes its item ids; by default it is derived from the
    body, so the same request gets the same reply, and each later request of a thread fresh ids.
    """
    if response_id is None:
        response_id = "resp_" + hashlib.sha256(_encoder.encode(body)).hexdigest()[:16]
    input_tokens, cached_tokens = _token_estimate(body)
    reply = ReplyBuilder(response_id, input_tokens, cached_tokens)
    if codex_internal_purpose(body, headers) is not None:
        reply.message([_plain_reply(body, INTERNAL_TEXT)])
        return reply.events()
    turn = find_user_turn(body)
    script = parse_directives(turn.text) if turn is not None else Script()
    index = step_index(script, turn.tool_outputs) if turn is not None else 0
    if index >= len(script.steps) or not script.steps[index]:
        reply.message([_plain_reply(body, DEFAULT_TEXT)])
        return reply.events()
    try:
        run_step(script.steps[index], reply, _tool_output_objects(body))
    except DirectiveError as exc:
        reply = ReplyBuilder(response_id, input_tokens, cached_tokens)
        reply.message(_few_chunks(f"scripted model: {exc}"))
    return reply.events()
