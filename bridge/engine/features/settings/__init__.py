"""A session's settings: mode, model, reasoning effort, profile, the machine it acts on.

Features: :mod:`.settings` (the selectors) and :mod:`.machines` (the machines a session may
act on). Private parts of :mod:`.settings`: ``_views`` (modes and config options as the
client sees them) and ``_air_settings`` (AIR's keys on them).
"""
