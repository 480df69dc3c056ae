"""The one registry every plug-in kind uses, and its one discovery rule."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from mdcr.core import registry as registry_module
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.registry import Registry


@dataclass(frozen=True)
class Widget:
    name: str
    size: int = 1


def _widgets(**kw: object) -> Registry[Widget]:
    return Registry("widget", key=lambda w: w.name, **kw)  # type: ignore[arg-type]


def test_register_by_the_items_own_name_get_and_list_sorted() -> None:
    reg = _widgets()
    b = reg.register(Widget("b"))
    a = reg.register(Widget("a"))
    assert reg.get("a") is a and reg.get("b") is b
    assert reg.names() == ["a", "b"] and list(reg) == ["a", "b"] and len(reg) == 2
    assert "a" in reg and "c" not in reg


def test_a_second_item_under_a_taken_name_is_refused_the_same_is_not() -> None:
    reg = _widgets()
    item = reg.register(Widget("x"))
    assert reg.register(item) is item  # the same module imported twice
    with pytest.raises(ConfigError, match="widget 'x' is registered already"):
        reg.register(Widget("x", size=2))
    assert reg.get("x") is item


def test_an_item_under_several_names_is_filed_whole_or_not_at_all() -> None:
    reg: Registry[tuple[str, ...]] = Registry("facts of stage", key=lambda names: names)
    reg.register(("a", "b"))
    with pytest.raises(ConfigError, match="facts of stage 'b' is registered already"):
        reg.register(("c", "b"))
    assert reg.names() == ["a", "b"]  # 'c' was not filed


def test_the_kinds_own_check_refuses_before_anything_is_filed() -> None:
    def no_giants(w: Widget) -> None:
        if w.size > 10:
            raise ConfigError(f"widget '{w.name}' is too large")

    reg = _widgets(check=no_giants)
    with pytest.raises(ConfigError, match="too large"):
        reg.register(Widget("g", size=11))
    assert "g" not in reg


def test_unknown_name_lists_the_valid_ones_in_the_registrys_error_type() -> None:
    reg = _widgets(error=InputDataError)
    reg.register(Widget("map"))
    reg.register(Widget("ndcg"))
    with pytest.raises(InputDataError, match=r"^unknown widget 'mrr'; valid: map, ndcg$"):
        reg.get("mrr")


def test_the_groups_modules_are_imported_on_first_read_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    imported: list[str] = []
    monkeypatch.setattr(registry_module, "plugin_modules", lambda group: ("pkg.one", "pkg.two"))
    monkeypatch.setattr("importlib.import_module", lambda name: imported.append(name))
    reg = _widgets(group="mdcr.widgets")
    assert imported == []
    reg.names()
    reg.names()
    assert imported == ["pkg.one", "pkg.two"]


def test_a_plug_in_that_fails_to_import_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry_module, "plugin_modules", lambda group: ("t_no_such_plugin",))
    reg = _widgets(group="mdcr.widgets")
    with pytest.raises(ConfigError) as err:
        reg.names()
    message = str(err.value)
    assert "\n" not in message and "'t_no_such_plugin'" in message
    assert "entry point group 'mdcr.widgets'" in message and "ModuleNotFoundError" in message


def test_mdcrs_own_plug_ins_are_found_by_their_entry_points() -> None:
    """Every registry of mdcr discovers its built-ins through its group, the stages in
    pipeline order (their entry points' names)."""
    from mdcr.core.stage import STAGES, stages

    assert STAGES.modules()[:3] == (
        "mdcr.corpus.synth.stage",
        "mdcr.corpus.prefilter.stage",
        "mdcr.pools.build",
    )
    order = list(stages())
    assert order.index("synth") < order.index("encode") < order.index("benchmark-score")
    for group in ("mdcr.stages", "mdcr.input_formats", "mdcr.exports", "mdcr.encoder_families"):
        assert registry_module.plugin_modules(group), group
