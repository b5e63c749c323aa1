"""Registry: interchangeable parts (drivers, mappings, laws, limits, integrators) looked up by name.

A part is one class registered under a name. Parts with heavy optional dependencies (MuJoCo,
Cyclone DDS, ur_rtde) are registered lazily as ``"module:Class"`` so that listing the names —
for settings, the API schema, the CLI and the dashboard — never imports them.

Plugins: an installed distribution adds parts without touching fdcontrol by declaring an entry
point in the group ``fdcontrol.plugins`` whose module registers its classes on import, e.g. in
``pyproject.toml``::

    [project.entry-points."fdcontrol.plugins"]
    my_parts = "my_package.fdcontrol_parts"

:func:`load_plugins` imports them once, the first time any registry is read: every list of
names derived from the registries (the service settings and so the API schema, the CLI parser,
the loop state's choices) includes the plugins' parts. Plugins come only from the installed environment at startup: no
request can name code to import.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from fdcontrol.extras import MissingExtra

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

    @property
    def entries(self) -> dict[str, type[T] | str]:
        """Every registered part, the installed plugins' included (:func:`load_plugins` runs first)."""
        load_plugins()
        return self._entries

    def names(self) -> tuple[str, ...]:
        return tuple(self.entries)

    def ordered(self, preferred: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The names, ``preferred`` ones first in that order, then the rest as registered."""
        entries = self.entries
        return (*(n for n in preferred if n in entries), *(n for n in entries if n not in preferred))

    def describe(self, name: str) -> str:
        """First line of the class docstring; a lazy entry's ``"module:Class"`` (listing never imports)."""
        entry = self.entries[name]
        if isinstance(entry, str):
            return entry
        return (entry.__doc__ or "").strip().split("\n", 1)[0]

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def get(self, name: str) -> type[T]:
        entries = self.entries
        if name not in entries:
            raise UnknownName(f"unknown {self.kind} {name!r}; expected one of {', '.join(entries)}")
        entry = entries[name]
        if isinstance(entry, str):
            module, _, attr = entry.partition(":")
            try:
                cls = getattr(importlib.import_module(module), attr)
            except MissingExtra as exc:  # one line naming the extra to install
                raise UnknownName(f"{self.kind} {name!r}: {exc}") from exc
            except ImportError as exc:
                raise UnknownName(f"{self.kind} {name!r} needs an optional dependency that is not "
                                  f"installed: {exc}") from exc
            self._entries[name] = cls
            cls.registered_name = name
            return cls
        return entry

    def create(self, name: str, *args: Any, **kwargs: Any) -> T:
        return self.get(name)(*args, **kwargs)  # type: ignore[call-arg]


PLUGIN_GROUP = "fdcontrol.plugins"
_plugins: dict[str, str] | None = None  # entry-point name → "loaded" or why it failed


def load_plugins() -> dict[str, str]:
    """Import every module of the entry-point group ``fdcontrol.plugins``, once per process.

    Returns entry-point name → ``"loaded"`` or the error. A plugin that fails to import is
    reported with a RuntimeWarning and skipped: its names stay unknown, so a setting that uses
    them is rejected with the list of registered names, while the rest of the service starts.
    """
    global _plugins
    if _plugins is not None:
        return _plugins
    _plugins = {}  # set first: a plugin that lists a registry while importing must not recurse
    for ep in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        try:
            ep.load()
        except Exception as exc:  # any error of third-party code at import
            _plugins[ep.name] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"fdcontrol plugin {ep.name!r} ({ep.value}) failed to load: {_plugins[ep.name]}",
                          RuntimeWarning, stacklevel=2)
        else:
            _plugins[ep.name] = "loaded"
    return _plugins
