"""Registry: interchangeable parts (drivers, mappings, laws, limits) looked up by name.

A part is one class registered under a name. Parts with heavy optional dependencies (MuJoCo,
Cyclone DDS, ur_rtde) are registered lazily as ``"module:Class"`` so that listing the names —
for settings, the API schema, the CLI and the dashboard — never imports them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownName(ValueError):
    """A name that is not registered (the message lists the registered ones)."""


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, type[T] | str] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: ``@DRIVERS.register("mujoco")``."""
        def deco(cls: type[T]) -> type[T]:
            self._entries[name] = cls
            cls.registered_name = name  # type: ignore[attr-defined]
            return cls
        return deco

    def register_lazy(self, name: str, target: str) -> None:
        """Register ``"package.module:Class"`` without importing it."""
        self._entries[name] = target

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def ordered(self, preferred: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The names, ``preferred`` ones first in that order, then the rest as registered."""
        return (*(n for n in preferred if n in self._entries), *(n for n in self._entries if n not in preferred))

    def describe(self, name: str) -> str:
        """First line of the class docstring; a lazy entry's ``"module:Class"`` (listing never imports)."""
        entry = self._entries[name]
        if isinstance(entry, str):
            return entry
        return (entry.__doc__ or "").strip().split("\n", 1)[0]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def get(self, name: str) -> type[T]:
        if name not in self._entries:
            raise UnknownName(f"unknown {self.kind} {name!r}; expected one of {', '.join(self._entries)}")
        entry = self._entries[name]
        if isinstance(entry, str):
            module, _, attr = entry.partition(":")
            try:
                cls = getattr(importlib.import_module(module), attr)
            except ImportError as exc:
                raise UnknownName(f"{self.kind} {name!r} needs an optional dependency that is not "
                                  f"installed: {exc}") from exc
            self._entries[name] = cls
            cls.registered_name = name
            return cls
        return entry

    def create(self, name: str, *args: Any, **kwargs: Any) -> T:
        return self.get(name)(*args, **kwargs)  # type: ignore[call-arg]
