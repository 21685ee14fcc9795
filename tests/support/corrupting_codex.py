"""A fake ``codex`` for end-to-end tests: the real Codex behind a relay that corrupts chosen lines.

The bridge runs ``BIN app-server [-c KEY=VALUE ...]``; point ``BIN`` at a wrapper made by
:func:`write_wrapper`. The relay then runs ``$CORRUPT_CODEX_BIN`` with the same arguments and
environment, passes every line both ways unchanged, and rewrites Codex→bridge traffic as the
rules file ``$CORRUPT_RULES`` says. It logs what it did to ``$CORRUPT_LOG`` (JSON lines).

Standard library only, and no import of ``bridge``: it must work whatever state the code under
test is in.

Rules file: ``{"rules": [RULE, ...]}`` (or a bare list). Every rule has

``action``
    ``replace_result``, ``drop_fields`` or ``inject``;
``method``
    a Codex notification or request with this method, or Codex's response to the bridge's
    request with this method (the relay remembers the ids of the bridge's requests);
``skip`` (default 0)
    let this many matches through first;
``times`` (default 1)
    act on this many matches after that; ``null`` for every one.

Per action:

``replace_result``: ``result`` (any JSON) replaces the response's ``result``, or ``error``
    (``{"code", "message"}``) turns it into an error response.
``drop_fields``: ``fields``, dotted paths inside ``params`` (``result`` for a response) to
    delete, e.g. ``["delta"]`` or ``["turn.id"]``.
``inject``: ``position`` ``"before"`` or ``"after"`` (default) the matched message, and
    ``lines``, each one of
    ``{"raw": "text"}`` (written as it is: not JSON, half an object, ...),
    ``{"json": VALUE}`` (VALUE encoded on one line: a bogus notification, ``[1, 2]``, ``"x"``),
    ``{"truncated": true}`` (the first half of the matched line),
    ``{"request": {"method": M, "params": P}, "id": ID?}`` (a server request from "Codex":
    the relay gives it an id, default from 1000000 up, and swallows the bridge's answer to it
    instead of passing it to Codex, logging it as an ``answer`` event).

In ``json`` values and request params, a string that is exactly ``"{{params.threadId}}"``
(any dotted path into the matched message) is replaced by that value of the matched message,
so a bogus message can name the real thread or turn.

Log events (one JSON object a line, key ``event``): ``start``, ``fired`` (``rule``,
``action``, ``method``, ``message``: the matched message before the change), ``injected``
(``id``, ``method``: a request the relay sent the bridge), ``answer`` (``id``, ``method``,
``message``: the bridge's answer), ``exit`` (``code``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ENV_RULES = "CORRUPT_RULES"
ENV_LOG = "CORRUPT_LOG"
ENV_REAL_CODEX = "CORRUPT_CODEX_BIN"
#: First id of an injected request: far above Codex's own server request ids (0, 1, ...).
FIRST_INJECTED_ID = 1_000_000

_MISSING = object()


# -- helpers for the tests ------------------------------------------------------------------------


def write_wrapper(directory: Path, python: str | None = None) -> Path:
    """An executable ``codex`` in ``directory`` that runs this relay with ``python``.

    A shell wrapper, because the bridge executes the path it is given and needs no
    knowledge of Python or of this file.
    """
    path = directory / "corrupting-codex"
    python = python or sys.executable
    path.write_text(
        f'#!/bin/sh\nexec {shlex.quote(python)} {shlex.quote(str(Path(__file__).resolve()))} "$@"\n'
    )
    path.chmod(0o755)
    return path


def relay_env(real_codex: str, rules: list[dict[str, Any]], directory: Path) -> dict[str, str]:
    """The environment variables telling the relay what to run and do; writes the rules file."""
    rules_path = directory / "corrupt-rules.json"
    rules_path.write_text(json.dumps({"rules": rules}, indent=1))
    log_path = directory / "corrupt-log.jsonl"
    log_path.touch()
    return {ENV_REAL_CODEX: real_codex, ENV_RULES: str(rules_path), ENV_LOG: str(log_path)}


def read_log(path: Path | str) -> list[dict[str, Any]]:
    """The relay's log so far (a line still being written is left for next time)."""
    events = []
    for line in Path(path).read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return events


# -- the relay ------------------------------------------------------------------------------------


class _Log:
    """JSON lines to ``$CORRUPT_LOG`` (both relay threads write, hence the lock)."""

    def __init__(self, path: str | None) -> None:
        self._file = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self._lock = threading.Lock()

    def event(self, name: str, **fields: Any) -> None:
        if self._file is None:
            return
        with self._lock:
            self._file.write(json.dumps({"event": name, **fields}) + "\n")
            self._file.flush()


def _lines(fd: int) -> Iterator[bytes]:
    """Complete lines read from a file descriptor (no newline), then a last partial one.

    Plain ``os.read``: a daemon thread blocked inside a buffered ``sys.stdin`` can abort
    the interpreter at exit ("could not acquire lock"), a raw read cannot.
    """
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            if pending:
                yield pending
            return
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from complete


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _get(value: Any, path: str) -> Any:
    for key in path.split("."):
        if isinstance(value, dict) and key in value:
            value = value[key]
        else:
            return _MISSING
    return value


def _fill(template: Any, message: dict[str, Any]) -> Any:
    """Replace each ``"{{path}}"`` string in ``template`` with that value of ``message``."""
    if isinstance(template, str) and template.startswith("{{") and template.endswith("}}"):
        value = _get(message, template[2:-2].strip())
        return template if value is _MISSING else value
    if isinstance(template, dict):
        return {key: _fill(value, message) for key, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, message) for value in template]
    return template


def _encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class Relay:
    def __init__(self, rules: list[dict[str, Any]], log: _Log) -> None:
        self.rules = rules
        self.log = log
        self.matches = [0] * len(rules)
        #: The bridge's requests to Codex still unanswered: id → method.
        self.bridge_requests: dict[Any, str] = {}
        #: Requests the relay made up: id → method. Their answers stop here.
        self.injected: dict[Any, str] = {}
        self.next_id = FIRST_INJECTED_ID

    # bridge → Codex
    def from_bridge(self, line: bytes) -> bytes | None:
        """The line to pass to Codex, or ``None`` to swallow it."""
        message = _decode(line)
        if message is None:
            return line
        rid = message.get("id")
        if "method" in message:
            if rid is not None:
                # Remembered before Codex can see it, so its answer always finds the method.
                self.bridge_requests[_key(rid)] = str(message["method"])
            return line
        if rid is not None and _key(rid) in self.injected:
            self.log.event("answer", id=rid, method=self.injected[_key(rid)], message=message)
            return None
        return line

    # Codex → bridge
    def from_codex(self, line: bytes) -> list[bytes]:
        """The lines to pass to the bridge in place of ``line``."""
        message = _decode(line)
        if message is None:
            return [line]
        method, is_response = self._method_of(message)
        if method is None:
            return [line]
        before: list[bytes] = []
        after: list[bytes] = []
        changed = message
        for index, rule in enumerate(self.rules):
            if rule.get("method") != method or not self._fires(index, rule):
                continue
            action = rule.get("action")
            self.log.event("fired", rule=index, action=action, method=method, message=message)
            if action == "replace_result" and is_response:
                changed = copy.deepcopy(changed) if changed is message else changed
                if "error" in rule:
                    changed.pop("result", None)
                    changed["error"] = rule["error"]
                else:
                    changed.pop("error", None)
                    changed["result"] = rule.get("result")
            elif action == "drop_fields":
                changed = copy.deepcopy(changed) if changed is message else changed
                root = changed.get("result" if is_response else "params")
                for path in rule.get("fields", []):
                    *parents, leaf = path.split(".")
                    holder = _get(root, ".".join(parents)) if parents else root
                    if isinstance(holder, dict):
                        holder.pop(leaf, None)
            elif action == "inject":
                made = [self._made_line(entry, line, message) for entry in rule.get("lines", [])]
                (before if rule.get("position") == "before" else after).extend(made)
            else:
                raise ValueError(f"rule {index}: cannot {action!r} a message of {method}")
        middle = line if changed is message else _encode(changed)
        return [*before, middle, *after]

    def _method_of(self, message: dict[str, Any]) -> tuple[str | None, bool]:
        """The method a Codex message is about, and whether it is a response."""
        if "method" in message:
            return str(message["method"]), False
        rid = message.get("id")
        if rid is None:
            return None, False
        return self.bridge_requests.pop(_key(rid), None), True

    def _fires(self, index: int, rule: dict[str, Any]) -> bool:
        self.matches[index] += 1
        seen = self.matches[index] - int(rule.get("skip", 0))
        times = rule.get("times", 1)
        return seen >= 1 and (times is None or seen <= int(times))

    def _made_line(self, entry: dict[str, Any], line: bytes, message: dict[str, Any]) -> bytes:
        if "raw" in entry:
            return str(entry["raw"]).encode()
        if "json" in entry:
            return _encode(_fill(entry["json"], message))
        if entry.get("truncated"):
            return line[: max(1, len(line) // 2)]
        if "request" in entry:
            request = entry["request"]
            rid = entry.get("id")
            if rid is None:
                rid, self.next_id = self.next_id, self.next_id + 1
            self.injected[_key(rid)] = str(request["method"])
            self.log.event("injected", id=rid, method=request["method"])
            out: dict[str, Any] = {"id": rid, "method": request["method"]}
            if "params" in request:
                out["params"] = _fill(request["params"], message)
            return _encode(out)
        raise ValueError(f"unknown inject line {entry!r}")


def _decode(line: bytes) -> dict[str, Any] | None:
    """A line's JSON object, or ``None`` for anything else (passed on untouched)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _key(rid: Any) -> str:
    # 7 and "7" are different JSON-RPC ids; a typed key keeps them apart.
    return json.dumps(rid)


def _load_rules(path: str | None) -> list[dict[str, Any]]:
    if not path:
        return []
    loaded = json.loads(Path(path).read_text())
    rules = loaded["rules"] if isinstance(loaded, dict) else loaded
    return [dict(rule) for rule in rules]


def main() -> int:
    log = _Log(os.environ.get(ENV_LOG))
    relay = Relay(_load_rules(os.environ.get(ENV_RULES)), log)
    real = os.environ.get(ENV_REAL_CODEX)
    if not real:
        print(f"corrupting_codex: set {ENV_REAL_CODEX} to the real codex binary", file=sys.stderr)
        return 2
    argv = [real, *sys.argv[1:]]
    log.event("start", argv=argv, pid=os.getpid())
    # Codex's stderr is ours: the bridge logs it as Codex's.
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    child_in, child_out = child.stdin.fileno(), child.stdout.fileno()
    # A polite stop of the relay is a polite stop of Codex; its exit then ends the relay.
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    signal.signal(signal.SIGINT, lambda *_: child.terminate())

    def upstream() -> None:
        try:
            for line in _lines(sys.stdin.fileno()):
                out = relay.from_bridge(line)
                if out is not None:
                    _write_all(child_in, out + b"\n")
        except OSError:
            pass  # Codex is gone; the downstream side sees it and exits
        finally:
            # The bridge closed our stdin: ask Codex to exit the same way.
            with contextlib.suppress(OSError):
                child.stdin.close()  # type: ignore[union-attr]

    threading.Thread(target=upstream, daemon=True, name="bridge-to-codex").start()
    try:
        for line in _lines(child_out):
            for out in relay.from_codex(line):
                _write_all(sys.stdout.fileno(), out + b"\n")
    except OSError:
        child.terminate()  # the bridge stopped reading: nobody needs Codex now
    code = child.wait()
    log.event("exit", code=code)
    sys.stdout.flush()
    # os._exit: the upstream thread may still be blocked reading stdin.
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    sys.exit(main())
