"""Codex app-server (protocol v2, Codex 0.169) wire messages, as msgspec Structs."""
