"""One registry for every kind of plug-in: stages, input formats, measures, encoder records,
encoder families, export formats, facts classes and the dry run's clock.

A plug-in is registered by one call next to its definition, ``REGISTRY.register(item)``
(the registry knows the name it is filed under: a stage's ``name``, a measure's ``kind``,
...). A registry refuses a second item under a taken name, answers an unknown name with a
one-line error that lists the valid ones, and checks what its kind requires (``check``).

**One discovery rule.** The modules that register plug-ins are named by the entry points of
the registry's group (``mdcr.stages``, ``mdcr.measures``, ...; mdcr's own in its
``pyproject.toml``, another package's in its own), and imported the first time the
registry is read (sorted by the entry points' names), so importing a registry stays cheap
and the kernel names no module of the domain.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from mdcr.core.errors import ConfigError, MdcrError, first_line

T = TypeVar("T")


@functools.cache
def plugin_modules(group: str) -> tuple[str, ...]:
    """The modules the entry points of ``group`` name, sorted by the entry points' names
    (mdcr's stages are named ``010-synth``, ``020-prefilter``, ...: the pipeline order);
    read once per process."""
    found = sorted(importlib.metadata.entry_points(group=group), key=lambda ep: ep.name)
    return tuple(dict.fromkeys(ep.module for ep in found))


class Registry(Generic[T]):
    """Named plug-ins of one kind (``kind``: how errors name them, e.g. "stage").

    ``key``: the name (or names) an item is filed under; ``group``: the entry-point group
    whose modules register the plug-ins (None: nothing to discover); ``check``: refuses an
    item its kind does not allow (a one-line error), before it is filed; ``error``: the
    error type for an unknown name (a config value by default).
    """

    def __init__(
        self,
        kind: str,
        *,
        key: Callable[[T], str | Sequence[str]],
        group: str | None = None,
        check: Callable[[T], None] | None = None,
        error: type[MdcrError] = ConfigError,
    ) -> None:
        self.kind = kind
        self.group = group
        self.error = error
        self._key = key
        self._check = check
        self._items: dict[str, T] = {}
        self._discovered = False

    def names_of(self, item: T) -> tuple[str, ...]:
        """The names ``item`` is filed under."""
        found = self._key(item)
        return (found,) if isinstance(found, str) else tuple(found)

    def register(self, item: T) -> T:
        """Add ``item`` under its name(s) (one call next to its definition); the same item
        again is a no-op (a module imported twice), another item under a taken name is
        refused, and nothing is filed when any name is refused."""
        names = self.names_of(item)
        if self._check is not None:
            self._check(item)
        for name in names:
            held = self._items.get(name)
            if held is not None and held is not item:
                raise ConfigError(f"{self.kind} '{name}' is registered already; pick another name")
        for name in names:
            self._items[name] = item
        return item

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that add a plug-in take it away again)."""
        self._items.pop(name, None)

    def modules(self) -> tuple[str, ...]:
        """The modules that register this registry's plug-ins, by entry-point name."""
        return plugin_modules(self.group) if self.group else ()

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        for module in self.modules():
            try:
                importlib.import_module(module)
            except MdcrError:
                raise
            except Exception as exc:  # a plug-in's own import error, named in one line
                raise ConfigError(
                    f"the {self.kind} plug-ins of '{module}' (entry point group "
                    f"'{self.group}') cannot be imported ({first_line(exc)}); fix or uninstall "
                    "the package that declares it (--debug shows the traceback)"
                ) from exc

    def get(self, name: str) -> T:
        """The item named ``name``; an unknown name is one line listing the valid ones."""
        self._discover()
        if name not in self._items:
            valid = ", ".join(sorted(self._items)) or "none"
            raise self.error(f"unknown {self.kind} '{name}'; valid: {valid}")
        return self._items[name]

    def items(self) -> dict[str, T]:
        """Every registered item by name (the plug-ins discovered first)."""
        self._discover()
        return dict(self._items)

    def names(self) -> list[str]:
        return sorted(self.items())

    def __contains__(self, name: object) -> bool:
        self._discover()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.items())
