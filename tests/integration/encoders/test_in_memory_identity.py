"""An in-memory model's identity sees every change that can change its outputs: arrays,
tensors and modules at any depth of its state, its code (a notebook's too), its
tokenizer; it ignores what cannot (the device, the train/eval flag, per-call tokenizer
settings), is the same in every process, and refuses state it cannot read."""

from __future__ import annotations

import subprocess
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from mdcr.core.errors import ConfigError
from mdcr.encoders.models.in_memory import model_identity
from mdcr.encoders.state_digest import UnhashableState, state_digest

REPO = Path(__file__).resolve().parents[3]


def _state(obj: object) -> str:
    from mdcr.encoders.identity import is_user_module

    return state_digest(obj, is_user_module)[0]


@dataclass
class Layer:
    weights: np.ndarray
    bias: list[float] = field(default_factory=lambda: [0.0, 0.0])


class Stack:
    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.layers = [Layer(rng.normal(size=(3, 2))), Layer(rng.normal(size=(2, 2)))]
        self.meta = {"norm": {"eps": 1e-6, "kinds": {"l2", "mean"}}}


def test_arrays_and_values_at_any_depth_count() -> None:
    base = _state(Stack(0))
    assert _state(Stack(0)) == base  # equal state, equal digest
    changes = [
        lambda s: s.layers[1].weights.__setitem__((1, 0), s.layers[1].weights[1, 0] + 1e-9),
        lambda s: s.layers[0].bias.append(0.0),
        lambda s: s.meta["norm"].__setitem__("eps", 1e-5),
        lambda s: s.meta["norm"]["kinds"].add("max"),
        lambda s: setattr(s.layers[0], "weights", s.layers[0].weights.astype(np.float32)),
        lambda s: setattr(s, "extra", None),
    ]
    digests = {base}
    for change in changes:
        stack = Stack(0)
        change(stack)
        digests.add(_state(stack))
    assert len(digests) == len(changes) + 1


def test_cycles_and_shared_objects_are_hashed_once() -> None:
    a, b = Stack(0), Stack(0)
    a.me, b.me = a, b  # type: ignore[attr-defined]
    a.twice = [a.layers[0], a.layers[0]]  # type: ignore[attr-defined]
    b.twice = [b.layers[0], b.layers[0]]  # type: ignore[attr-defined]
    assert _state(a) == _state(b)
    b.twice = [b.layers[0], Layer(b.layers[0].weights.copy())]  # type: ignore[attr-defined]
    assert _state(a) != _state(b)  # equal values, but no longer one shared object


DIGEST_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from tests.integration.encoders.test_in_memory_identity import Stack, _state
s = Stack(3)
s.meta["names"] = {{"alpha", "beta", "gamma", "delta"}}
s.meta["frozen"] = frozenset({{("x", 1), ("y", 2)}})
print(_state(s))
"""


def test_the_digest_is_the_same_in_every_process() -> None:
    """Set order changes with the string hash seed; the digest must not."""
    out = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run(
            [sys.executable, "-c", DIGEST_SCRIPT.format(repo=str(REPO))],
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        )
        out.add(done.stdout.strip())
    assert len(out) == 1


CELL = """
import numpy as np
SCALE = {scale}

def helper(x):
    return x * SCALE

class CellModel:
    def __init__(self):
        self.w = np.ones(3)

    def encode(self, sentences):
        return np.array([[helper(len(s)) + {offset}] * 3 for s in sentences], np.float32)
"""


def _cell(scale: int = 2, offset: int = 0) -> object:
    """A model defined in code without a file, as a notebook cell defines it."""
    namespace: dict[str, object] = {"__name__": "notebook_cell_module"}
    exec(compile(CELL.format(scale=scale, offset=offset), "<cell>", "exec"), namespace)
    return namespace["CellModel"]()  # type: ignore[operator]


def test_code_without_a_file_is_hashed_by_its_bytecode_and_globals() -> None:
    base = _state(_cell())
    assert _state(_cell()) == base
    assert _state(_cell(offset=1)) != base  # the method's code changed
    assert _state(_cell(scale=3)) != base  # a global the code reads changed
    model = _cell()

    def closure(k: float) -> types.FunctionType:
        return lambda x: x * k  # type: ignore[return-value]

    model.post = closure(1.0)  # type: ignore[attr-defined]
    first = _state(model)
    model.post = closure(2.0)  # type: ignore[attr-defined]
    assert _state(model) != first  # a closure's captured value


def test_torch_modules_hash_code_buffers_and_config_but_not_device_or_mode() -> None:
    import torch

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(4, 2)
            self.register_buffer("scale", torch.ones(2), persistent=False)
            self.where = torch.device("cpu")
            self.device = "cpu"
            self.mode = "mean"

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x) * self.scale

    base = model_identity(Scaled())
    model = Scaled()
    model.where, model.device = torch.device("cuda"), "cuda:0"  # settings
    model.train(False)
    assert model_identity(model) == base
    model.scale[0] = 2.0  # a buffer not in the state dict
    assert model_identity(model)["state"] != base["state"]
    assert model_identity(model)["weights"] == base["weights"]
    model = Scaled()
    model.mode = "max"
    assert model_identity(model)["state"] != base["state"]


def test_a_tokenizer_change_counts_and_calling_it_does_not(tiny_bert: Path) -> None:
    from transformers import AutoTokenizer

    class Holder:
        def __init__(self) -> None:
            self.tokenizer = AutoTokenizer.from_pretrained(tiny_bert)

    holder = Holder()
    base = _state(holder)
    holder.tokenizer(["the cat sat on the mat"] * 2, truncation=True, max_length=8, padding=True)
    assert _state(holder) == base  # truncation and padding are set by each call
    holder.tokenizer.add_tokens(["citationgraph"])
    assert _state(holder) != base


def test_a_tokenizer_read_offline_is_the_one_read_online(tiny_bert: Path) -> None:
    """Where a folder was read from (``local_files_only``, which ``HF_HUB_OFFLINE=1`` sets)
    moves no digest: the command line offline and a notebook online name one model. What it
    was read as does."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    tokenizer.init_kwargs["local_files_only"] = False  # as read online
    online = _state(tokenizer)
    tokenizer.init_kwargs["local_files_only"] = True  # as read offline
    assert _state(tokenizer) == online
    tokenizer.init_kwargs["do_lower_case"] = not tokenizer.init_kwargs.get("do_lower_case")
    assert _state(tokenizer) != online


def test_the_settings_a_class_declares_are_hashed_by_name_alone() -> None:
    """``state_settings``: how it runs and what exists only to run (the device, a lock,
    statistics) move no digest, whatever they hold; the weights do."""

    class Runner:
        state_settings = ("device", "stats", "_lock")

        def __init__(self) -> None:
            self.weights = np.arange(4.0)
            self.device = "cpu"
            self.stats = {"papers": 0}
            self._lock = threading.Lock()

    class Undeclared(Runner):
        state_settings = ("device",)

    base = _state(Runner())
    with pytest.raises(UnhashableState, match="_lock"):
        _state(Undeclared())  # without the declaration the lock is state
    moved = Runner()
    moved.device, moved.stats["papers"] = "cuda:3", 10
    assert _state(moved) == base
    moved.weights[0] = 1.0
    assert _state(moved) != base


def test_what_cannot_be_read_is_refused_with_its_path(tmp_path: Path) -> None:
    class Model:
        def __init__(self, thing: object) -> None:
            self.parts = [np.zeros(2), {"resource": thing}]

        def encode(self, sentences: list[str]) -> np.ndarray:
            return np.zeros((len(sentences), 2), np.float32)

    with (tmp_path / "f.txt").open("w") as fh:
        things = [threading.Lock(), threading.RLock(), fh, (i for i in range(3))]
        for thing in things:
            with pytest.raises(UnhashableState) as info:
                _state(Model(thing))
            assert info.value.path == "model.parts[1]['resource']"
            with pytest.raises(ConfigError, match="cache_key=") as err:
                model_identity(Model(thing))
            assert "\n" not in str(err.value)
            keyed = model_identity(Model(thing), cache_key="run-7")
            assert keyed["cache_key"] == "run-7" and "state" not in keyed
