"""The slash commands answered without a turn.

:mod:`.palette` is the feature; ``_rewind`` (``/rewind``) and its pure plan ``_rewind_plan``
are its private parts.
"""
