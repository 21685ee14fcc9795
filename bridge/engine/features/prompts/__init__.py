"""A prompt's life: a session's prompt sent as a Codex turn, steered, streamed, retried, ended.

Features (the wiring builds them): :mod:`.prompts` (``session/new``, ``session/prompt``,
``session/cancel``), :mod:`.streaming` (the answer as it streams), :mod:`.retries` (a model
Codex cannot reach), :mod:`.turn_ends` (a cancel waits for the sub-agent turns it stopped),
:mod:`.file_reports` (AIR's report of the files a prompt changed). Private parts of
:mod:`.prompts`: ``_steering`` (input added to a running turn), ``_input`` (prompt blocks →
turn input), ``_turn_errors`` (what a failed turn says).
"""
