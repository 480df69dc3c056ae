"""Config loading: unknown keys, wrong types, literals, lists, overrides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from mdcr.config import from_mapping, input_path, override, param, params_of
from mdcr.errors import ConfigError


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
    assert params_of(cfg, hashed=True) == {"sizes": [1, 2, 3], "ratio": 1.0}


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
