"""The ``codex-acp-bridge`` command's entry point, before anything else is imported.

It does one thing before handing over to :mod:`bridge.cli`: where Python will not write
bytecode (``PYTHONDONTWRITEBYTECODE``, set in some shells and images) and the package was
installed without any (``uv`` and ``uvx`` do not compile what they install), every start
would compile the whole bridge from source: about a third of a second before an editor's
``initialize`` could be answered, at every new thread. Bytecode then goes to a cache of
the bridge's own instead (``sys.pycache_prefix``: beside nothing, so no source tree is
written into), under ``$XDG_CACHE_HOME/codex-acp-bridge`` (else ``~/.cache``);
``CODEX_ACP_BRIDGE_BYTECODE=never`` turns that off. A package that has its bytecode (pip
and pipx compile at install, the project's setup does) is left alone.
"""

from __future__ import annotations

import os
import sys

#: ``never``: compile from source at every start rather than cache bytecode.
ENV_BYTECODE = "CODEX_ACP_BRIDGE_BYTECODE"


def bytecode_cache(env: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """Where this process's bytecode goes, if the bridge's own cache is needed (``None``:
    Python's usual place, or none at all)."""
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return None
    if env.get(ENV_BYTECODE) == "never":
        return None
    package = os.path.dirname(os.path.abspath(__file__))
    compiled = os.path.join(package, "__pycache__", f"cli.{sys.implementation.cache_tag}.pyc")
    if sys.implementation.cache_tag is None or os.path.exists(compiled):
        return None
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "codex-acp-bridge", "bytecode")


def use_bytecode_cache() -> None:
    """From now on, this process's bytecode goes to :func:`bytecode_cache`, if needed."""
    cache = bytecode_cache()
    if cache is not None:
        sys.pycache_prefix = cache
        sys.dont_write_bytecode = False


def main() -> None:
    use_bytecode_cache()
    from .cli import main as cli_main

    cli_main()
