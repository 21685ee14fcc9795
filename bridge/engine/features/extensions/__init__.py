"""What the bridge offers at ``initialize`` beyond ACP's own surface.

:mod:`.extensions` is the feature; each extension it offers is a private part of it:
``_async_tasks`` (AIR's async tasks), ``_providers`` (``providers/*``), ``_quotas`` (the
quotas proposal), ``_usage_limits`` (usage limits and AIR's failure records).
"""
