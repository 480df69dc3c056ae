"""Config loading: unknown keys, wrong types, literals, lists, overrides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from mdcr.core.config import from_mapping, input_path, override, param, params_of
from mdcr.core.errors import ConfigError


@dataclass(frozen=True)
class Cfg:
    source: str = input_path(help="in")
    k: int = param(3, help="k")
    ratio: float = param(0.5, help="r")
    mode: Literal["in", "out"] = param("in", help="m")
    sizes: tuple[int, ...] = param((10, 20), help="s")
    name: str | None = param(None, help="n")
    strict: bool = param(False, help="b")

    def validate(self) -> None:
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")


def test_typed_values_and_defaults() -> None:
    cfg = from_mapping(Cfg, {"source": "x", "sizes": [1, 2, 3], "ratio": 1}, "t")
    assert cfg.sizes == (1, 2, 3) and cfg.ratio == 1.0 and cfg.k == 3
    # Every parameter is hashed, those left at their default too.
    assert params_of(cfg, hashed=True) == {
        "k": 3,
        "ratio": 1.0,
        "mode": "in",
        "sizes": [1, 2, 3],
        "name": None,
        "strict": False,
    }


def test_equal_values_hash_equally_however_written() -> None:
    """An int given for a float, a list for a tuple, a mapping in any key order and a
    nested config hash as one canonical value; settings are never hashed."""
    import dataclasses

    from mdcr.core.config import canonical_json, setting

    @dataclass(frozen=True)
    class Inner:
        depth: int = param(5, help="d")
        threads: int = setting(1, help="t")

    default_inner = Inner()

    @dataclass(frozen=True)
    class Outer:
        weights: Mapping[str, Any] = param(help="w")
        grid: tuple[float, ...] = param((1, 2), help="g")
        inner: Any = param(default_inner, help="i")  # noqa: RUF009
        workers: int = setting(0, help="w")

    a = Outer(grid=(1, 2), weights={"b": 1, "a": (1, 2)}, inner=Inner(threads=1))
    b = Outer(grid=(1.0, 2.0), weights={"a": [1, 2], "b": 1}, inner=Inner(threads=8), workers=4)
    ha, hb = params_of(a, hashed=True), params_of(b, hashed=True)
    assert canonical_json(ha) == canonical_json(hb)
    assert ha == {"grid": [1.0, 2.0], "weights": {"a": [1, 2], "b": 1}, "inner": {"depth": 5}}
    c = dataclasses.replace(b, inner=Inner(depth=6))
    assert canonical_json(params_of(c, hashed=True)) != canonical_json(hb)


def test_a_parameter_that_cannot_be_hashed_is_a_one_line_error() -> None:
    unhashable = object()

    @dataclass(frozen=True)
    class Odd:
        what: Any = param(unhashable, help="o")  # noqa: RUF009

    with pytest.raises(ConfigError, match=r"Odd\.what: a value of type object cannot be hashed"):
        params_of(Odd(), hashed=True)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"source": "x", "kk": 1}, "t: unknown key 'kk'; valid keys: k, mode, name, ratio"),
        ({"source": "x", "k": "3"}, "t.k: expected an integer, got '3'"),
        ({"source": "x", "k": True}, "t.k: expected an integer"),
        ({"source": "x", "mode": "up"}, "t.mode: 'up' is not valid; valid options: 'in', 'out'"),
        ({"source": "x", "sizes": [1, "a"]}, "t.sizes[1]: expected an integer"),
        ({"source": "x", "strict": "yes"}, "t.strict: expected true or false"),
        ({}, "t: missing required key 'source'"),
        ({"source": "x", "k": 0}, "k must be >= 1, got 0"),
    ],
)
def test_errors_name_the_key_and_the_options(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_mapping(Cfg, data, "t")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_text_values_from_the_command_line() -> None:
    cfg = from_mapping(
        Cfg,
        {"source": "x", "k": "7", "sizes": "1_000,2000", "strict": "true", "name": "none"},
        "t",
        from_text=True,
    )
    assert (cfg.k, cfg.sizes, cfg.strict, cfg.name) == (7, (1000, 2000), True, None)


def test_override_parses_and_validates() -> None:
    cfg = from_mapping(Cfg, {"source": "x"}, "t")
    assert override(cfg, {"k": "9", "mode": "out"}, "t") == Cfg(source="x", k=9, mode="out")
    with pytest.raises(ConfigError, match="unknown key 'q'"):
        override(cfg, {"q": "1"}, "t")
    with pytest.raises(ConfigError, match="k must be >= 1"):
        override(cfg, {"k": "0"}, "t")


# Names that only say how the work is done; wherever a stage has one, it is a setting.
SETTING_NAMES = {
    "threads",
    "device",
    "batch_tokens",
    "workers",
    "attention",
    "compile",
    "query_batch",
    "backend",
    "margin",
    "reuse",
    "block_vectors",
    "executor",
    "ray_address",
    "ray_workers",
}
# Settings of one stage whose names other stages use otherwise: encode's label (what its
# status lines call the encoder, the retriever's name) is never hashed.
STAGE_SETTINGS = {("encode", "label")}


def test_every_stage_field_is_declared_once_and_settings_are_settings() -> None:
    from mdcr.core.config import config_fields, field_kind
    from mdcr.core.stage import stages

    kinds = {}
    for spec in stages().values():
        for f in config_fields(spec.config):
            # field_kind raises for a field declared without param/setting/input
            kinds[spec.name, f.name] = field_kind(f)
    named = {key for key in kinds if key[1] in SETTING_NAMES}
    for key in sorted(named):
        assert kinds[key] == "setting", f"{key[0]}.{key[1]} is a {kinds[key]}"
    # ... and every setting is one of those names, each of which some stage has.
    assert {key for key, kind in kinds.items() if kind == "setting"} == named | STAGE_SETTINGS
    assert {name for _, name in named} == SETTING_NAMES


def test_settings_are_recorded_but_not_hashed(tmp_path) -> None:
    import json

    from mdcr.core.config import params_of, setting, settings_of
    from mdcr.core.stage import StageContext, StageSpec
    from mdcr.core.store import Store

    @dataclass(frozen=True)
    class Cfg:
        n: int = param(1, help="a parameter")
        threads: int = setting(0, help="a setting")

    def run(cfg: Cfg, ctx: StageContext) -> None:
        (ctx.out / "x.txt").write_text(str(cfg.n))
        ctx.output("x.txt")

    spec = StageSpec("toy-settings", "1", Cfg, run, "settings")
    store = Store(tmp_path)
    a = store.execute(spec, Cfg(threads=1), {}, quiet=True)
    b = store.execute(spec, Cfg(threads=8), {}, quiet=True)
    assert b.up_to_date and a.fingerprint == b.fingerprint
    assert store.plan(spec, Cfg(n=2), {}).fingerprint != a.fingerprint
    manifest = json.loads((a.path / "manifest.json").read_text())
    assert manifest["settings"] == {"threads": 1} and manifest["params"] == {"n": 1}
    assert params_of(Cfg(n=3, threads=4), hashed=True) == {"n": 3}
    assert params_of(Cfg(threads=4), hashed=True) == {"n": 1}  # its default is hashed too
    assert settings_of(Cfg(threads=4)) == {"threads": 4}
