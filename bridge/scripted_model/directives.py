"""The scripted model's brain: a decoded Responses-API request in, its reply's events out. No I/O.

Three questions decide a reply (the package docstring teaches the directive language itself):

1. Is the request Codex's own (a thread title, the approval reviewer, a compaction)? Those quote
   the user's prompt and must never run its script: ``codex_internal_purpose`` reads the metadata.
2. Which message is the user's? ``find_user_turn`` skips what Codex injects as role ``user``
   (``<environment_context>``, AGENTS.md, ``<subagent_notification>``, ...) and counts the tool
   results that came back since.
3. Which step of the script answers it? ``step_index``: the first one whose calls are unanswered.

The prompt's script is parsed in :mod:`.script`, the reply's events are built in :mod:`.reply`,
the request is read in :mod:`.request`; here are the directives and the answer to a request.

To add a directive, write ``def _name(reply: ReplyBuilder, args: Args) -> None`` that calls the
builder (or raises ``DirectiveError``), decorate it with ``@directive("name", usage, calls=N)``,
``N`` being the number of tool calls it makes, and document it in the package docstring.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .reply import (
    ReplyBuilder,
    SseEvent,
    encode_sse,
    few_chunks,
    reasoning_words,
    word_chunks,
    words_text,
)
from .request import (
    UserTurn,
    codex_internal_purpose,
    find_user_turn,
    plain_reply,
    token_estimate,
    tool_output_objects,
    turn_metadata,
)
from .script import (
    MAX_COUNT,
    Args,
    Directive,
    DirectiveError,
    Script,
    non_negative_int,
    parse_directives,
)

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
    "answer_request",
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


_encoder = msgspec.json.Encoder()

#: The reply to a message without directives, and to a request after the script's last step.
DEFAULT_TEXT = "ok"
#: The reply to Codex's own requests (thread title, compaction, ...); inside JSON if asked for.
INTERNAL_TEXT = "Scripted reply"


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
    reply.message(word_chunks(words_text(args.count(0))), args.delay())


@directive("reason", "@@ reason N [delay_ms=D]")
def _reason(reply: ReplyBuilder, args: Args) -> None:
    args.expect(positional=1, options=["delay_ms"])
    reply.reasoning(word_chunks(reasoning_words(args.count(0))), args.delay())


@directive("say", '@@ say TEXT | @@ say "JSON string"')
def _say(reply: ReplyBuilder, args: Args) -> None:
    text = args.rest
    if text.startswith('"'):
        # A JSON string holds what one line cannot: line breaks, leading or trailing spaces.
        try:
            text = str(json.loads(text))
        except json.JSONDecodeError as exc:
            raise DirectiveError(f"bad JSON string: {exc}") from None
    reply.message(few_chunks(text))


_PHASES = ("commentary", "final_answer")


@directive("phase", "@@ phase commentary|final_answer")
def _phase(reply: ReplyBuilder, args: Args) -> None:
    args.expect(positional=1)
    if args.positional[0] not in _PHASES:
        raise DirectiveError(f"PHASE is one of {', '.join(_PHASES)}")
    reply.phase = args.positional[0]


@directive("think", "@@ think TEXT")
def _think(reply: ReplyBuilder, args: Args) -> None:
    # Readable reasoning for demos; one delta per word, like `reason`.
    if not args.rest:
        raise DirectiveError("think needs the text of the thought")
    reply.reasoning(word_chunks(args.rest), 0.03)


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
    reply.sleep(non_negative_int(args.positional[0], "MS") / 1000)


@directive("limits", "@@ limits USED_PERCENT [window_minutes=M] [resets_in=S]")
def _limits(reply: ReplyBuilder, args: Args) -> None:
    args.expect(positional=1, options=["window_minutes", "resets_in"])
    try:
        used = float(args.positional[0])
    except ValueError:
        raise DirectiveError(f"USED_PERCENT must be a number, not {args.positional[0]!r}") from None
    window = non_negative_int(args.options.get("window_minutes", "300"), "window_minutes")
    resets_in = non_negative_int(args.options.get("resets_in", "3600"), "resets_in")
    reply.rate_limits(used, window, int(time.time()) + resets_in)


@directive("usage_limit", "@@ usage_limit [resets_in=S]")
def _usage_limit(reply: ReplyBuilder, args: Args) -> None:
    # OpenAI's answer once the account's usage limit is reached: HTTP 429, not retried by Codex.
    args.expect(positional=0, options=["resets_in"])
    resets_in = non_negative_int(args.options.get("resets_in", "3600"), "resets_in")
    resets_at = int(time.time()) + resets_in
    reply.rate_limits(100, 300, resets_at)
    error = {
        "type": "usage_limit_reached",
        "message": "The usage limit has been reached",
        "plan_type": "plus",
        "resets_at": resets_at,
        "resets_in_seconds": resets_in,
    }
    reply.refuse(429, {"error": error})


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
    return answer_request(body, headers, response_id=response_id).events()


def answer_request(
    body: Mapping[str, Any],
    headers: Mapping[str, str] | None = None,
    *,
    response_id: str | None = None,
) -> ReplyBuilder:
    """The whole answer to one request (:func:`reply_for_request`): its events, its extra
    headers, or the HTTP error it is refused with."""
    if response_id is None:
        response_id = "resp_" + hashlib.sha256(_encoder.encode(body)).hexdigest()[:16]
    input_tokens, cached_tokens = token_estimate(body)
    reply = ReplyBuilder(response_id, input_tokens, cached_tokens)
    if codex_internal_purpose(body, headers) is not None:
        reply.message([plain_reply(body, INTERNAL_TEXT)])
        return reply
    turn = find_user_turn(body)
    script = parse_directives(turn.text) if turn is not None else Script()
    index = step_index(script, turn.tool_outputs) if turn is not None else 0
    if index >= len(script.steps) or not script.steps[index]:
        reply.message([plain_reply(body, DEFAULT_TEXT)])
        return reply
    try:
        run_step(script.steps[index], reply, tool_output_objects(body))
    except DirectiveError as exc:
        reply = ReplyBuilder(response_id, input_tokens, cached_tokens)
        reply.message(few_chunks(f"scripted model: {exc}"))
    return reply
