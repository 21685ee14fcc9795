"""A scripted Responses-API model on loopback, so that tests and demos run the real Codex offline.

Start it, point Codex at it, and write the model's behaviour into the prompt::

    model = await nursery.start(serve_scripted_model)         # ScriptedModel: .base_url, .requests
    write_codex_home(tmp / "codex-home", model.base_url)      # then run Codex with CODEX_HOME set
    # turn/start {input: [{type: "text", text: "@@ reason 3\\n@@ words 5"}]}

The directive language
----------------------
The model reads the latest *real* user message of each request (not the messages Codex injects, such
as ``<environment_context>`` or AGENTS.md). If that message starts with ``@@``, its leading lines of
the form ``@@ NAME ARGS`` are a script; the first other line ends it and the rest is ignored.
Directives run in order, each adding output to the reply:

``@@ words N [delay_ms=D]``
    An assistant message ``word1 word2 ... wordN``, one delta per word (``"word1 "``, ...,
    ``"wordN"``), waiting D ms between deltas (so a test can interrupt mid-stream).
``@@ reason N [delay_ms=D]``
    A reasoning item whose summary ``thought1 ... thoughtN`` streams one word per delta.
``@@ think TEXT``
    A reasoning item whose summary is exactly TEXT, one word per delta, 30 ms apart (for demos).
``@@ say TEXT``
    An assistant message of exactly TEXT (the rest of the line) in up to four deltas;
    ``@@ say "JSON string"`` for text with line breaks or edge spaces.
``@@ phase commentary|final_answer``
    The messages that follow in the step say their phase (the message item's ``phase``, as
    OpenAI's models mark progress notes and the final answer); without it, none.
``@@ call [NAMESPACE/]NAME [JSON_OBJECT]``
    A function call, e.g. ``@@ call exec_command {"cmd": "echo hi"}`` or
    ``@@ call multi_agent_v1/spawn_agent {"message": "@@ words 3"}`` (the spawned agent runs the
    script in its message). ``{{field}}`` inside the JSON is replaced by that field of the newest
    tool result that is a JSON object holding it, e.g. ``{"targets": ["{{agent_id}}"]}`` after a
    spawn; ``{{field#N}}`` by that of the N-th newest (after three spawns, ``{{agent_id#3}}`` is
    the first one's). Arguments default to ``{}``.
``@@ web_search QUERY``
    A finished hosted web search (a ``web_search_call`` item; Codex shows a ``webSearch`` item).
    No tool result comes back for it, so the step goes on with the next directive.
``@@ sleep MS``
    Wait before the next event (or before the end of the stream).
``@@ limits USED_PERCENT [window_minutes=M] [resets_in=S]``
    Report the account's primary usage window in the response's headers
    (``x-codex-primary-used-percent``, ``-window-minutes``, ``-reset-at``), as OpenAI does;
    Codex reads them as its rate limits (defaults: a 300-minute window resetting in 3600 s).
``@@ usage_limit [resets_in=S]``
    Refuse the request as OpenAI does once the usage limit is reached: HTTP 429,
    ``{"error": {"type": "usage_limit_reached", "resets_at", ...}}``, the window at 100%.
``@@ fail``
    End the stream here, without ``response.completed``: Codex fails the turn (after showing
    whatever streamed before). Later directives of the step are not run.
``@@ then``
    Split the script into steps. Codex asks the model again after running tool calls; the request
    that carries the results of every call of steps 0..k-1 gets step k. A step without calls ends
    the turn. After the last step the reply is ``ok``.

Without a script the reply is ``ok``. A bad or unknown directive makes the reply a message that
names it (``scripted model: bad directive ...``), so a typo shows in the test output. Every reply
that completes reports plausible token usage (about four bytes of request per input token).

Codex's own requests (the TUI's thread title, the automatic approval reviewer, compaction) quote
the user's prompt; they are recognised by their turn metadata and answered with a plain reply (JSON
when they ask for a JSON schema: the scripted reviewer allows every action).
"""

from .codex_home import write_codex_home
from .directives import parse_directives, reply_for_request
from .server import ScriptedModel, serve_scripted_model

__all__ = [
    "ScriptedModel",
    "parse_directives",
    "reply_for_request",
    "serve_scripted_model",
    "write_codex_home",
]
