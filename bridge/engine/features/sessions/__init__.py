"""A session's life besides its prompts: opened, listed, loaded, forked, closed, recovered.

Features: :mod:`.lifecycle` (``session/load|resume|list|close|fork``), :mod:`.admin` (status,
title, archive, delete, sign out), :mod:`.index` (the session index), :mod:`.recovery` (after
Codex comes back), :mod:`.auth` (``authenticate`` and the sign-in methods). Private parts of
:mod:`.lifecycle`: ``_page_ahead``, ``_fork_point``, ``_thread_config``.
"""
