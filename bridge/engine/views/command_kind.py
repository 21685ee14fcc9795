"""The kind of a command, one rule wherever the command is shown: its ``tool_call`` and each
``tool_call_update``, live and in a replayed history (:mod:`.tool_views`), and its permission
request (:mod:`bridge.engine.features.approvals._views`).

Clients may auto-approve what claims to be a ``read`` or a ``search``, or show it as harmless, so
a command claims one only when the whole line surely is one; everything else is ``execute``.
Codex's ``commandActions`` cannot decide it alone: they are a best-effort display parse that drops
pipeline stages (``rg -l x . | xargs rm`` is a "search", ``cat f | tee ../x`` a "read", ``ls |
tee ../y`` a listing). So :func:`command_kind` is ``read`` / ``search`` only when all of these
hold, and ``execute`` otherwise:

- Codex parsed the command, into ``read`` / ``listFiles`` / ``search`` actions only: ``read`` when
  every one reads, ``search`` when each reads, lists or searches;
- it tokenizes (balanced quotes) into **one simple command**: no pipe, redirection or here-doc
  (``|``, ``>``, ``>>``, ``<``, ``2>``, ``&>``, ``<<``), no ``;``, ``&&``, ``||``, ``&``, no
  newline, subshell or group, no command or process substitution (``$(``, a backtick, ``<(``;
  looked for even inside quotes), no ``NAME=value`` prefix;
- its program does not run others or write files (``xargs``, ``tee``, ``env``, ``sudo``,
  ``eval``, ``exec``, a shell, ``awk``, ... see ``_RUNNERS``), nor is given an option that does
  (``find -exec/-execdir/-ok/-delete``, ``fd -x``, ``rg --pre``, ... see ``_RUNNING_OPTIONS``).

A line Codex wrapped as ``SHELL -c SCRIPT`` / ``SHELL -lc SCRIPT`` is judged by its script (once:
a shell inside it is a program like any other). Nothing is looked at closer: when in doubt,
``execute``. A quoted operator in a word is no operator (``rg 'a|b'`` is a search), but one quoted
alone (``rg ';'``) is taken for one: the kind may overstate, never understate.

A permission request knows one thing more than the command's item: whether Codex asks to run the
command beyond the sandbox. Such a request claims ``execute`` whatever the command
(:func:`~bridge.engine.features.approvals._views.permission_kind`); the tool call keeps the command's
kind, which says what the command does, not where it runs.
"""

from __future__ import annotations

import functools
import posixpath
import re

from ...acp import tools as acp_tools
from ...codex import items as codex_items

#: Programs that run other programs, write files or are languages of their own, and shell
#: grammar words: a line that starts with one is never taken for a read.
_RUNNERS = frozenset(
    {
        *("sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh"),
        *("pwsh", "powershell", "cmd"),
        *("env", "sudo", "doas", "su", "eval", "exec", "command", "builtin", "source", "."),
        *("xargs", "nohup", "nice", "ionice", "timeout", "time", "watch", "stdbuf", "setsid"),
        *("chroot", "coproc", "tee", "awk", "gawk", "mawk", "nawk"),
        *("{", "}", "!", "[[", "if", "for", "while", "until", "case", "select", "function"),
    }
)
#: Options with which a program Codex calls a read, list or search runs a program or writes
#: a file. A two-character one also counts inside a cluster (``-Hx``); any other counts as a
#: prefix (``--pre=cmd``, ``-execdir``, ``-fprint0``, ``less '+!cmd'``).
_RUNNING_OPTIONS: dict[str, tuple[str, ...]] = {
    "find": ("-exec", "-ok", "-delete", "-fprint", "-fls"),
    "fd": ("-x", "-X", "--exec"),
    "rg": ("--pre", "--hostname-bin"),
    "rga": ("--pre", "--hostname-bin"),
    "git": ("-O", "--open-files-in-pager"),
    "bat": ("--pager",),
    "batcat": ("--pager",),
    "ag": ("--pager",),
    "ack": ("--pager",),
    "tree": ("-o",),
    "less": ("+", "-o", "-O", "--log-file", "--LOG-FILE"),
}
_OPERATOR_CHARS = "();<>|&\n"
# Compiled at first use (the re module caches it), not at import.
_ASSIGNMENT = r"[A-Za-z_][A-Za-z0-9_]*\+?="


def command_kind(
    command: str | None, actions: list[codex_items.CommandAction]
) -> acp_tools.ToolKind:
    """``read`` or ``search`` when Codex's ``actions`` say so and ``command`` is one simple
    command that does no more (see the module docstring), else ``execute``."""
    types = {action.type for action in actions}
    if not command or not types or not types <= {"read", "listFiles", "search"}:
        return "execute"
    if not _simple(command):
        return "execute"
    return "read" if types == {"read"} else "search"


@functools.lru_cache(maxsize=256)
def _simple(command: str) -> bool:
    """:func:`_one_simple_command` of a whole line, remembered: a command's kind is asked
    again at each piece of its output."""
    return _one_simple_command(command, unwrap=True)


def _one_simple_command(line: str, *, unwrap: bool) -> bool:
    if "$(" in line or "`" in line:
        return False
    import shlex

    lexer = shlex.shlex(line.strip(), posix=True, punctuation_chars=_OPERATOR_CHARS)
    lexer.whitespace = " \t\r"  # a newline separates commands
    lexer.whitespace_split = True
    lexer.commenters = ""  # ``a#;rm b`` is two commands to a shell
    try:
        argv = list(lexer)
    except ValueError:  # an unbalanced quote
        return False
    if not argv or any(word and all(c in _OPERATOR_CHARS for c in word) for word in argv):
        return False
    program = posixpath.basename(argv[0].replace("\\", "/")).lower().removesuffix(".exe")
    if unwrap and program in ("sh", "bash", "zsh", "dash") and argv[1:2] in (["-c"], ["-lc"]):
        return len(argv) == 3 and _one_simple_command(argv[2], unwrap=False)
    if program in _RUNNERS or re.match(_ASSIGNMENT, argv[0]):
        return False
    options = _RUNNING_OPTIONS.get(program, ())
    return not any(_names(word, option) for word in argv[1:] for option in options)


def _names(word: str, option: str) -> bool:
    if len(option) == 2:
        return word.startswith("-") and not word.startswith("--") and option[1] in word[1:]
    return word.startswith(option)
