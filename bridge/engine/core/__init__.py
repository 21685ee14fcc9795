"""The core: the engine's wiring, the hub every feature shares, the thread records, work state and output queues."""

#: The agent's name, as Codex (``clientInfo``) and clients (``agentInfo``) are told it.
AGENT_NAME = "codex-acp-bridge"
