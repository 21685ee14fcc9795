"""The features: each one reacts to the Codex messages and client requests of one concern.

They live in rooms, one subpackage per family (prompts, subagents, sessions, settings,
approvals, tools, palette, extensions). A room's public modules are its features, which the
wiring (:mod:`bridge.engine.engine`) alone imports; its private modules (``_name``) are parts
of one feature there, imported only from inside the room (``tests/test_architecture.py``).
"""
