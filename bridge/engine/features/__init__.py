"""The features: each one reacts to the Codex messages and client requests of one concern."""
