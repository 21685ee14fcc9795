"""codex-acp-bridge: OpenAI Codex's app-server behind the Agent Client Protocol.

The package is laid out as the architecture is:

- :mod:`bridge.jsonrpc` — one sans-I/O JSON-RPC 2.0 peer, used for both sides.
- :mod:`bridge.acp` and :mod:`bridge.codex` — typed wire messages (msgspec Structs).
- :mod:`bridge.engine` — the pure translation engine: messages in, messages out.
- :mod:`bridge.shell` — the thin trio layer: processes, pipes, WebSockets.
- :mod:`bridge.daemon` — one supervised Codex per user, built on the shell.
- :mod:`bridge.serve` — the ``serve`` command, above the shell and the daemon.
- :mod:`bridge.cli` — the ``codex-acp-bridge`` command.
"""

__version__ = "0.1.0"
