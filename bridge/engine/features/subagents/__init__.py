"""Codex's sub-agents as ACP subagent sessions (the Subagent Sessions RFD).

Features: :mod:`.subagents` (the live rules), :mod:`.history` (a root's history and its
sub-agents on ``session/load``), :mod:`.rejoin` (a reopened root's sub-agents Codex still
holds). Private parts: ``_placement`` (hold, then announce), ``_work`` (a sub-agent's work
state and cancel), ``_collab_views`` (what a collab item looks like), ``_history_pages`` (a
stored thread read a page at a time).
"""
