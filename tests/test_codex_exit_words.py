"""Why Codex stopped, in its own words: :func:`codex_exit_words` on what Codex really printed.

Each sample is the whole stderr of ``codex app-server`` (codex-cli 0.171.0) exiting at start,
captured as it was, colours included."""

from __future__ import annotations

import pytest

from bridge.shell.codex_process import MAX_EXIT_WORDS, codex_exit_words

#: What Codex prints first when its home is under /tmp (each sample has it, with its own path).
ALIASES = (
    "WARNING: proceeding, even though we could not create PATH aliases: Refusing to create "
    'helper binaries under temporary dir "/tmp" (codex_home: AbsolutePathBuf("/tmp/cy/a"))\n'
)
#: The backtrace Codex's stripped release binary prints after its error.
FRAMES = "\nStack backtrace:\n" + "".join(f"   {n}: <unknown>\n" for n in range(7))

SAMPLES = {
    # approval_policy = "untrusted" in config.toml
    "untrusted policy": (
        ALIASES
        + 'Error: approval_policy = "untrusted" is no longer supported; remove this setting\n'
        + FRAMES,
        'approval_policy = "untrusted" is no longer supported; remove this setting',
    ),
    # the same with RUST_BACKTRACE=0: no backtrace at all
    "without backtrace": (
        ALIASES
        + 'Error: approval_policy = "untrusted" is no longer supported; remove this setting\n',
        'approval_policy = "untrusted" is no longer supported; remove this setting',
    ),
    # -c 'profile="fast"' (in config.toml Codex starts, and refuses each thread instead)
    "legacy profile": (
        ALIASES
        + 'Error: legacy `profile = "fast"` config is no longer supported; use `--profile fast` '
        "with `fast.config.toml` instead\n" + FRAMES,
        'legacy `profile = "fast"` config is no longer supported; use `--profile fast` with '
        "`fast.config.toml` instead",
    ),
    # -c model=3: the message goes on on a line of its own
    "two-line message": (
        ALIASES + "Error: invalid type: integer `3`, expected a string\nin `model`\n\n" + FRAMES,
        "invalid type: integer `3`, expected a string in `model`",
    ),
    # CODEX_HOME=/tmp/cy/nope
    "missing home": (
        "WARNING: proceeding, even though we could not create PATH aliases: CODEX_HOME points "
        'to "/tmp/cy/nope", but that path does not exist\n'
        'Error: CODEX_HOME points to "/tmp/cy/nope", but that path does not exist\n' + FRAMES,
        'CODEX_HOME points to "/tmp/cy/nope", but that path does not exist',
    ),
    # --listen ws://1.2.3.4:1: Codex's log first, an indented paragraph and colours in it
    "after log lines": (
        ALIASES
        + "\x1b[2m2026-12-02T16:36:30.639743Z\x1b[0m \x1b[31mERROR\x1b[0m \x1b[2mcodex_app_server"
        "\x1b[0m\x1b[2m:\x1b[0m Project-local config, hooks, and exec policies are disabled in "
        "the following folders until the project is trusted, but skills still load.\n"
        "    1. /tmp/.codex\n"
        "       To load project-local config, hooks, and exec policies, add /tmp as a trusted "
        "project in /tmp/cy/a/config.toml.\n\n"
        "\x1b[2m2026-12-02T16:36:30.639857Z\x1b[0m \x1b[31mERROR\x1b[0m \x1b[2mcodex_app_server"
        "\x1b[0m\x1b[2m:\x1b[0m Codex could not find bubblewrap on PATH. Install bubblewrap "
        "with your OS package manager. See the sandbox prerequisites: https://developers."
        "openai.com/codex/concepts/sandboxing#prerequisites. Codex will use the bundled "
        "bubblewrap in the meantime.\n"
        "Error: refusing to start non-loopback websocket listener 1.2.3.4:1 without auth; "
        "configure `--ws-auth capability-token` or `--ws-auth signed-bearer-token`\n" + FRAMES,
        "refusing to start non-loopback websocket listener 1.2.3.4:1 without auth; configure "
        "`--ws-auth capability-token` or `--ws-auth signed-bearer-token`",
    ),
    # app-server --bogus: clap's error, then its usage
    "bad argument": (
        ALIASES + "error: unexpected argument '--bogus' found\n\n"
        "Usage: codex app-server [OPTIONS] [COMMAND]\n\n"
        "For more information, try '--help'.\n",
        "unexpected argument '--bogus' found",
    ),
}


@pytest.mark.parametrize("sample", list(SAMPLES))
def test_codex_s_error_is_the_reason_not_its_backtrace(sample: str) -> None:
    text, words = SAMPLES[sample]
    assert codex_exit_words(text.splitlines()) == words


@pytest.mark.parametrize("sample", list(SAMPLES))
def test_the_same_from_lines_read_stripped_and_without_blanks(sample: str) -> None:
    """As :func:`~bridge.shell.codex_transport.spawn_codex` reads them (colours already gone)."""
    text, words = SAMPLES[sample]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    assert codex_exit_words(lines) == words


def test_anyhow_s_causes_are_part_of_the_message() -> None:
    """anyhow's layout for an error with context (not seen from Codex 0.171, whose errors
    carry their causes inline): the causes follow, one line, as ``{:#}`` would print them."""
    text = (
        "Error: failed to start\n\nCaused by:\n    0: cannot open /x/state.sqlite\n"
        "    1: permission denied\n       (os error 13)\n" + FRAMES
    )
    assert codex_exit_words(text.splitlines()) == (
        "failed to start: cannot open /x/state.sqlite: permission denied (os error 13)"
    )
    single = "Error: failed to start\n\nCaused by:\n    permission denied\n" + FRAMES
    assert codex_exit_words(single.splitlines()) == "failed to start: permission denied"


def test_without_an_error_line_the_last_words_before_any_backtrace() -> None:
    # A Codex that dies otherwise (the fake ones of the transport tests say one line).
    assert codex_exit_words(["codex: config is unreadable"]) == "codex: config is unreadable"
    assert codex_exit_words(["boom", *FRAMES.splitlines()]) == "boom"
    assert codex_exit_words(FRAMES.splitlines()) is None
    assert codex_exit_words([]) is None
    assert codex_exit_words(["", "   "]) is None


def test_the_last_error_counts_and_long_words_are_cut() -> None:
    lines = ["Error: old", *FRAMES.splitlines(), "Error: new", *FRAMES.splitlines()]
    assert codex_exit_words(lines) == "new"
    said = codex_exit_words(["Error: " + "x" * 5000])
    assert said is not None and len(said) == MAX_EXIT_WORDS and said.endswith("…")
