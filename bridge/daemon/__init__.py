"""The daemon beside Codex: one supervised app-server per user that editors attach to."""
