"""One registry for every kind of plug-in: stages, input formats, measures, encoder records,
encoder families and export formats.

A plug-in is registered by one call next to its definition (``REGISTRY.register(name,
item)``, or ``@REGISTRY.register_as(name)`` on a definition). A registry refuses a second
item under a taken name, answers an unknown name with a one-line error that lists the valid
ones, and imports the modules that define the built-in plug-ins (``discover``) the first
time it is read, so importing a registry stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from mdcr.core.errors import ConfigError, MdcrError

T = TypeVar("T")


class Registry(Generic[T]):
    """Named plug-ins of one kind (``kind``: how errors name them, e.g. "stage").

    ``modules``: the modules that register the built-in ones, imported on first read.
    ``error``: the error type for an unknown name (a config value by default).
    """

    def __init__(
        self,
        kind: str,
        modules: Sequence[str] = (),
        *,
        error: type[MdcrError] = ConfigError,
    ) -> None:
        self.kind = kind
        self.modules = tuple(modules)
        self.error = error
        self._items: dict[str, T] = {}
        self._discovered = False

    def register(self, name: str, item: T) -> T:
        """Add ``item`` under ``name``; the same item again is a no-op (a module imported
        twice), another item under a taken name is refused."""
        held = self._items.get(name)
        if held is not None and held is not item:
            raise ConfigError(
                f"{self.kind} '{name}' is registered twice; {self.kind} names must be unique"
            )
        self._items[name] = item
        return item

    def register_as(self, name: str) -> Callable[[T], T]:
        """``@registry.register_as("name")`` on a definition."""

        def add(item: T) -> T:
            return self.register(name, item)

        return add

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that add a plug-in take it away again)."""
        self._items.pop(name, None)

    def _discover(self) -> None:
        if not self._discovered:
            self._discovered = True
            for module in self.modules:
                importlib.import_module(module)

    def get(self, name: str) -> T:
        """The item named ``name``; an unknown name is one line listing the valid ones."""
        self._discover()
        if name not in self._items:
            valid = ", ".join(sorted(self._items)) or "none"
            raise self.error(f"unknown {self.kind} '{name}'; valid: {valid}")
        return self._items[name]

    def items(self) -> dict[str, T]:
        """Every registered item by name (built-ins discovered first)."""
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
