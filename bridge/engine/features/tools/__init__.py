"""Tool items as the client follows them, and the commands cancelled work leaves running.

Features: :mod:`.tools` (``item/*`` of tools, plans, names) and :mod:`.terminals`.
"""
