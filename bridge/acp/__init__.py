"""Agent Client Protocol (v1) wire messages, as msgspec Structs."""
