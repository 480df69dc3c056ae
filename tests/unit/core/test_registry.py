"""The one registry every plug-in kind uses."""

from __future__ import annotations

import pytest

from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.registry import Registry


def test_register_get_and_list_sorted() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("b", 2)
    assert reg.register_as("a")(1) == 1
    assert reg.get("a") == 1 and reg.get("b") == 2
    assert reg.names() == ["a", "b"] and list(reg) == ["a", "b"] and len(reg) == 2
    assert "a" in reg and "c" not in reg


def test_a_second_item_under_a_taken_name_is_refused_the_same_is_not() -> None:
    reg: Registry[object] = Registry("widget")
    item = object()
    reg.register("x", item)
    reg.register("x", item)  # the same module imported twice
    with pytest.raises(ConfigError, match="widget 'x' is registered twice"):
        reg.register("x", object())


def test_unknown_name_lists_the_valid_ones_in_the_registrys_error_type() -> None:
    reg: Registry[int] = Registry("measure", error=InputDataError)
    reg.register("map", 1)
    reg.register("ndcg", 2)
    with pytest.raises(InputDataError, match=r"^unknown measure 'mrr'; valid: map, ndcg$"):
        reg.get("mrr")


def test_modules_are_imported_on_first_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    imported: list[str] = []
    monkeypatch.setattr("importlib.import_module", lambda name: imported.append(name))
    reg: Registry[int] = Registry("stage", ("pkg.one", "pkg.two"))
    assert imported == []
    reg.names()
    reg.names()
    assert imported == ["pkg.one", "pkg.two"]
