"""Codex app-server (protocol v2, Codex 0.169 to 0.171) wire messages, as msgspec Structs."""
