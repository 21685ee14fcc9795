"""The views: pure functions from Codex items to the content ACP clients are shown."""
