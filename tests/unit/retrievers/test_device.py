"""The device helper: None -> CPU, int -> that GPU, -1 -> all GPUs, 'auto'."""

from __future__ import annotations

import builtins
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mdcr.core.errors import ConfigError
from mdcr.retrievers import device
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


@pytest.mark.parametrize(
    ("nodes", "none"),
    [
        ((), True),
        (("nvidiactl", "nvidia-uvm", "null"), True),  # a driver, no GPU
        (("nvidiactl", "nvidia0"), False),
        (("nvidia3",), False),
        (("kfd",), False),  # ROCm
        (("dxg",), False),  # WSL 2
    ],
)
def test_gpu_device_nodes_are_read_from_dev(
    tmp_path: Path, nodes: tuple[str, ...], none: bool
) -> None:
    for name in nodes:
        (tmp_path / name).touch()
    assert device.no_gpu_device_nodes(tmp_path) is none


def test_no_gpu_device_node_is_no_gpu_without_importing_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_torch(name: str, *args: Any, **kwargs: Any) -> Any:
        assert name.partition(".")[0] != "torch", "torch was imported"
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(device, "sys", SimpleNamespace(platform="linux", modules={}))
    monkeypatch.setattr(device, "DEVICE_NODES", tmp_path)
    monkeypatch.setattr(builtins, "__import__", no_torch)
    assert device.cuda_device_count() == 0
    assert resolve_device("auto") == Device()
    with pytest.raises(ConfigError, match="GPU 0 but 0 GPU"):
        resolve_device("cuda")
    (tmp_path / "nvidia0").touch()  # now torch decides
    with pytest.raises(AssertionError, match="torch was imported"):
        device.cuda_device_count()
