"""``codex-acp-bridge demo``: one whole conversation, offline, as a person would see it.

Everything is real except the model: a scripted Responses-API server on
127.0.0.1 stands in for OpenAI, a real ``codex app-server`` talks to it from a
throwaway ``CODEX_HOME``, the bridge serves ACP in front of Codex, and a small
built-in ACP client sends one prompt and prints what comes back.
"""

from __future__ import annotations

import os
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import trio

from .acp_client import AcpClient, open_agent
from .jsonrpc import RpcError
from .scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from .shell.codex_transport import ENV_CODEX_BIN, CodexUnavailable, find_codex

DEFAULT_PROMPT = (
    "@@ think The user asks what I am. I should explain the path this answer takes.\n"
    "@@ say Hello from Codex, speaking the Agent Client Protocol through codex-acp-bridge. "
    "This answer streamed from a real codex app-server, which asked a scripted model on "
    "127.0.0.1: no network and no API key were involved.\n"
    "What are you, and how did this message reach me?"
)

_DIM, _BOLD, _RESET = "\x1b[2m", "\x1b[1m", "\x1b[0m"


class ConversationPrinter:
    """Prints session updates as they stream: thoughts dimmed, the answer plain."""

    def __init__(self, out: TextIO, *, color: bool) -> None:
        self.out = out
        self.color = color
        self.current: str | None = None
        self.usage: tuple[int, int] | None = None

    def style(self, code: str) -> str:
        return code if self.color else ""

    def on_notification(self, method: str, params: Any) -> None:
        if method != "session/update":
            return
        update = params["update"]
        kind = update["sessionUpdate"]
        if kind in ("agent_thought_chunk", "agent_message_chunk"):
            if kind != self.current:
                self._switch_to(kind)
            self.out.write(update["content"].get("text", ""))
            self.out.flush()
        elif kind == "usage_update":
            self.usage = (update["used"], update["size"])

    def _switch_to(self, kind: str) -> None:
        if self.current is not None:
            self.out.write(self.style(_RESET) + "\n\n")
        label = "thinking" if kind == "agent_thought_chunk" else "codex"
        style = _DIM if kind == "agent_thought_chunk" else ""
        self.out.write(f"{self.style(_BOLD)}{label}:{self.style(_RESET)} {self.style(style)}")
        self.current = kind

    def finish(self) -> None:
        if self.current is not None:
            self.out.write(self.style(_RESET) + "\n")
        self.current = None


async def demo(prompt: str, codex_bin: str, out: TextIO, *, color: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="codex-acp-bridge-demo-") as tmp:
        root = Path(tmp)
        home, workspace = root / "codex-home", root / "workspace"
        home.mkdir()
        workspace.mkdir()
        log_path = root / "bridge.log"
        async with trio.open_nursery() as nursery:
            model: ScriptedModel = await nursery.start(serve_scripted_model)
            write_codex_home(home, model.base_url)
            env = {**os.environ, "CODEX_HOME": str(home), ENV_CODEX_BIN: codex_bin}
            env.pop("OPENAI_API_KEY", None)
            printer = ConversationPrinter(out, color=color)
            # --no-daemon: a daemon the user runs would bring their own Codex and model.
            argv = [sys.executable, "-m", "bridge", "serve", "--no-daemon", "--log-level", "info"]
            status = 1
            with log_path.open("wb") as log:
                try:
                    with trio.fail_after(120):
                        async with open_agent(
                            argv,
                            env=env,
                            stderr=log.fileno(),
                            on_notification=printer.on_notification,
                        ) as (client, _process):
                            status = await _converse(
                                client, prompt, codex_bin, workspace, printer, out
                            )
                except trio.TooSlowError:
                    out.write("\n[the demo took more than 120 s; see the bridge log below]\n")
            if status != 0:
                sys.stderr.write(log_path.read_text(errors="replace")[-4000:])
            nursery.cancel_scope.cancel()
    return status


async def _converse(
    client: AcpClient,
    prompt: str,
    codex_bin: str,
    workspace: Path,
    printer: ConversationPrinter,
    out: TextIO,
) -> int:
    """initialize, session/new, one prompt; returns the exit status."""
    try:
        init = await client.initialize()
        info = init.get("agentInfo") or {}
        out.write(
            f"Connected to {info.get('name', '?')} {info.get('version', '')} "
            f"(ACP v{init['protocolVersion']}) in front of {codex_bin}\n"
        )
        session_id = await client.new_session(str(workspace))
        out.write(f"Session {session_id}\n\n")
        shown = "\n".join(line for line in prompt.splitlines() if not line.startswith("@@"))
        out.write(f"{printer.style(_BOLD)}you:{printer.style(_RESET)} {shown or prompt}\n\n")
        result = await client.prompt(session_id, prompt)
    except RpcError as exc:
        printer.finish()
        out.write(f"\n[error {exc.code}: {exc.message}]\n")
        return 1
    printer.finish()
    usage = f", context {printer.usage[0]}/{printer.usage[1]} tokens" if printer.usage else ""
    out.write(f"\n[stop reason: {result['stopReason']}{usage}]\n")
    return 0 if result["stopReason"] == "end_turn" else 1


def run_demo(*, prompt: str | None, codex_bin: str | None) -> int:
    try:
        binary = find_codex(codex_bin)
    except CodexUnavailable as exc:
        print(f"codex-acp-bridge: {exc}", file=sys.stderr)
        return 2
    color = sys.stdout.isatty() and os.environ.get("NO_COLOR") is None
    return trio.run(partial(demo, prompt or DEFAULT_PROMPT, binary, sys.stdout, color=color))
