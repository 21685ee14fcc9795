"""The one base of every wire Struct, ACP's and Codex's alike.

Fields carry the protocol's names and are passed by keyword; a field at its default
(``UNSET``, mostly) is left out of what is sent; members a Struct does not name are
ignored when it is decoded (msgspec's default), so a newer peer's additions do no harm.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import msgspec


class WireStruct(msgspec.Struct, omit_defaults=True, kw_only=True):
    pass


_lazy_decoders: list[Callable[[], msgspec.json.Decoder[Any]]] = []


def lazy_decoder(kind: Any) -> Callable[[], msgspec.json.Decoder[Any]]:
    """A JSON decoder of ``kind``, built at its first call rather than at import: msgspec's
    first decoder of a union of Structs costs 0.1 to 0.6 ms, which the engine's start (and
    its answer to ``initialize``) need not wait for. :func:`prepare_lazy_decoders` builds
    those not built yet (``Engine.prepare``)."""
    decoder: msgspec.json.Decoder[Any] | None = None

    def get() -> msgspec.json.Decoder[Any]:
        nonlocal decoder
        if decoder is None:
            decoder = msgspec.json.Decoder(kind)
        return decoder

    _lazy_decoders.append(get)
    return get


def prepare_lazy_decoders() -> None:
    """Build every :func:`lazy_decoder` of the modules imported so far."""
    for get in _lazy_decoders:
        get()


def modules_of(package: ModuleType) -> list[ModuleType]:
    """The modules of a package that are imported (every one the bridge uses is)."""
    prefix = package.__name__ + "."
    return [module for name, module in list(sys.modules.items()) if name.startswith(prefix)]


def declared(modules: Iterable[ModuleType], suffix: str) -> list[type[msgspec.Struct]]:
    """The Structs these modules declare (not import) whose names end in ``suffix``:
    ``"Params"``, ``"Result"``, by the protocols' own naming."""
    return [
        kind
        for module in modules
        for name, kind in vars(module).items()
        if name.endswith(suffix)
        and isinstance(kind, type)
        and issubclass(kind, msgspec.Struct)
        and kind.__module__ == module.__name__
    ]
