"""What the wiring hands the features: objects, never a callable of the engine's.

A feature that needs the engine to react says what happened (``hub.happened``,
:mod:`bridge.engine.core.news`) and returns; the engine decides what follows. So no
object the engine builds holds a bound method, a lambda or a partial: this walks every
one of them, from the engine's attributes down through theirs, and lists what does.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from bridge.engine.core.hub import Hub
from bridge.engine.engine import Engine


def _is_handed_callable(value: Any) -> bool:
    if isinstance(value, types.MethodType | functools.partial):
        return True
    return isinstance(value, types.FunctionType) and (
        value.__name__ == "<lambda>" or "<locals>" in value.__qualname__
    )


def _fields(obj: Any) -> dict[str, Any]:
    found = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name):
                found.setdefault(name, getattr(obj, name))
    return found


def handed_callables(root: Any, *, skip: tuple[type, ...] = (Hub,)) -> list[str]:
    """``path`` of each callable held by an object of the engine's reached from ``root``
    (its attributes, theirs, and so on; the hub, every feature's port, not entered)."""
    seen: set[int] = set()
    found: list[str] = []

    def walk(obj: Any, path: str) -> None:
        for name, value in _fields(obj).items():
            where = f"{path}.{name}" if path else name
            if _is_handed_callable(value):
                if path:  # the root's own shortcuts are nobody's to be handed
                    found.append(where)
            elif (
                type(value).__module__.startswith("bridge.engine")
                and not isinstance(value, skip)
                and id(value) not in seen
            ):
                seen.add(id(value))
                walk(value, where)

    seen.add(id(root))
    walk(root, "")
    return sorted(found)


def test_the_engine_hands_no_feature_a_callable() -> None:
    held = handed_callables(Engine(thread_config=None))
    assert held == [], f"handed a callable; say what happened with hub.happened instead: {held}"


def test_the_walk_finds_each_kind_of_handed_callable() -> None:
    class Engineish:
        def react(self) -> None: ...

    engine = Engineish()

    class Feature:
        __module__ = "bridge.engine.features.fake"

        def __init__(self) -> None:
            self.bound = engine.react
            self.late = lambda: None
            self.partial = functools.partial(print, "x")
            self.plain = len  # a builtin: nothing the engine made

    class Part:
        __module__ = "bridge.engine.features._fake_part"
        __slots__ = ("nested",)

        def __init__(self) -> None:
            self.nested = engine.react

    class Root:
        def shortcut(self) -> None: ...

        def __init__(self) -> None:
            self.own = self.shortcut
            self.feature = Feature()
            self.part = Part()

    assert handed_callables(Root()) == [
        "feature.bound",
        "feature.late",
        "feature.partial",
        "part.nested",
    ]


def test_what_features_say_is_followed_in_order_each_items_consequences_first() -> None:
    """The order the calls had when features called up: an item's own consequences (what
    following it made others say) come before the next item's."""
    engine = Engine(thread_config=None)
    followed: list[str] = []
    says = {"a": ["a1", "a2"], "a1": ["a1x"], "b": ["b1"]}

    def react(said: Any) -> None:
        followed.append(said)
        for consequence in says.get(said, []):
            engine.hub.happened(consequence)  # type: ignore[arg-type]

    engine._react = react  # type: ignore[method-assign]
    engine.hub.happened("a")  # type: ignore[arg-type]
    engine.hub.happened("b")  # type: ignore[arg-type]
    engine._follow()
    assert followed == ["a", "a1", "a1x", "a2", "b", "b1"]
    assert engine.hub.news == []
