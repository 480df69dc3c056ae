"""The device helper: None -> CPU, int -> that GPU, -1 -> all GPUs, 'auto'."""

from __future__ import annotations

import pytest

from mdcr.core.errors import ConfigError
from mdcr.retrievers.device import Device, check_device_spec, resolve_device


def test_resolve_device_without_gpus() -> None:
    assert resolve_device(None, n_gpus=0) == Device()
    assert resolve_device("cpu", n_gpus=0) == Device()
    assert resolve_device("auto", n_gpus=0) == Device()
    with pytest.raises(ConfigError, match="GPU 0 but 0 GPU"):
        resolve_device("cuda", n_gpus=0)
    with pytest.raises(ConfigError, match="none is visible"):
        resolve_device(-1, n_gpus=0)


def test_resolve_device_with_gpus() -> None:
    assert resolve_device("auto", n_gpus=2).gpus == (0, 1)
    assert resolve_device(-1, n_gpus=2).gpus == (0, 1)
    assert resolve_device("all", n_gpus=2).gpus == (0, 1)
    assert resolve_device(1, n_gpus=2).gpus == (1,)
    assert resolve_device("cuda:1", n_gpus=2).torch_device == "cuda:1"
    assert str(resolve_device("cuda", n_gpus=2)) == "cuda:0"
    with pytest.raises(ConfigError, match="GPU 3"):
        resolve_device("cuda:3", n_gpus=2)


def test_bad_spec_is_one_line() -> None:
    with pytest.raises(ConfigError, match="device 'gpu' is not valid") as info:
        check_device_spec("gpu", "search.device")
    assert "\n" not in str(info.value)
