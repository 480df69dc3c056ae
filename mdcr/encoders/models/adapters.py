"""Bottleneck adapters (as SPECTER2's) applied to a BERT model without the ``adapters`` library.

The ``adapters`` library (1.3.0, the newest) pins transformers ~=4.57.6, while
sentence-transformers 6 needs transformers 5, so mdcr applies a saved adapter itself. It
reads the adapter's ``adapter_config.json`` and weights (``pytorch_adapter.bin`` or
``adapter_model.safetensors``) and changes each layer's output block to what the library
computes for a sequential bottleneck adapter (``seq_bn``, Pfeiffer et al. 2020; SPECTER2's
proximity adapter is one), with ``h`` the block's dense output, ``x`` its input and ``LN``
the block's own layer norm::

    LN(h + x + up(act(down(LN(h + x)))) * scaling)

(``original_ln_before``, ``residual_before_ln`` and ``original_ln_after`` on; no extra
layer norms, no gating, no attention-block adapter). Any other adapter configuration is a
one-line error. ``tests/integration/encoders/test_adapters.py`` checks the vectors against the
``adapters`` library run in its own environment.
"""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import Any

from mdcr.core.errors import ConfigError, InputDataError, require

CONFIG_FILE = "adapter_config.json"
WEIGHT_FILES = ("adapter_model.safetensors", "pytorch_adapter.bin")
# What mdcr computes; every other value of these keys is refused.
_REQUIRED = {
    "mh_adapter": False,
    "output_adapter": True,
    "original_ln_before": True,
    "original_ln_after": True,
    "residual_before_ln": True,
    "adapter_residual_before_ln": False,
    "ln_before": False,
    "ln_after": False,
    "is_parallel": False,
    "use_gating": False,
    "phm_layer": False,
}
_ACTIVATIONS = ("relu", "gelu", "swish", "silu", "tanh")
_KEY = re.compile(
    r"encoder\.layer\.(\d+)\.output\.adapters\.([^.]+)\.adapter_(down\.0|up)\.(weight|bias)$"
)


def adapter_folder(source: str, revision: str | None) -> Path:
    """A local adapter folder, or the hub repo's files (cached, or fetched when online)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    from huggingface_hub import hf_hub_download

    try:
        config = Path(hf_hub_download(source, CONFIG_FILE, revision=revision))
    except Exception as exc:  # not cached offline, no such repo: say so in one line
        raise InputDataError(
            f"could not get adapter '{source}' ({type(exc).__name__}); download it, or give "
            "a local folder with adapter_config.json"
        ) from exc
    for name in WEIGHT_FILES:
        try:
            hf_hub_download(source, name, revision=revision)
            break
        except Exception:  # the repo holds the other weights file
            continue
    return config.parent


def read_adapter(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config, weights) of a saved bottleneck adapter, checked against what mdcr runs."""
    torch = require("torch")
    config_path = folder / CONFIG_FILE
    if not config_path.is_file():
        raise InputDataError(f"'{folder}' has no {CONFIG_FILE}; give a saved adapter")
    saved = json.loads(config_path.read_text())
    config = dict(saved.get("config", saved))
    wrong = {k: config.get(k) for k, v in _REQUIRED.items() if config.get(k, v) != v}
    act = str(config.get("non_linearity", "relu")).lower()
    scaling = config.get("scaling", 1.0)
    if wrong or act not in _ACTIVATIONS or not isinstance(scaling, int | float):
        what = ", ".join(f"{k}={v}" for k, v in wrong.items()) or f"non_linearity={act}"
        raise ConfigError(
            f"adapter '{folder}' is not a sequential bottleneck adapter mdcr can run ({what}); "
            "only seq_bn (Pfeiffer) adapters such as SPECTER2's are supported"
        )
    weights_path = next((folder / n for n in WEIGHT_FILES if (folder / n).is_file()), None)
    if weights_path is None:
        raise InputDataError(f"'{folder}' has no adapter weights ({' or '.join(WEIGHT_FILES)})")
    if weights_path.suffix == ".safetensors":
        weights = require("safetensors.torch").load_file(str(weights_path))
    else:
        weights = torch.load(weights_path, map_location="cpu", weights_only=True)
    config["non_linearity"] = act
    return config, weights


def _activation(name: str) -> Any:
    import torch.nn.functional as F

    return {"relu": F.relu, "gelu": F.gelu, "swish": F.silu, "silu": F.silu, "tanh": F.tanh}[name]


def apply_adapter(model: Any, folder: Path) -> dict[str, Any]:
    """Put the adapter into every layer of a BERT-style ``model`` (in place); return what
    was applied (name, layers, bottleneck size) for the encoder's identity."""
    import torch

    config, weights = read_adapter(folder)
    layers: dict[int, dict[str, torch.Tensor]] = {}
    names = set()
    for key, tensor in weights.items():
        m = _KEY.search(key)
        if m:
            layers.setdefault(int(m.group(1)), {})[f"{m.group(3)}.{m.group(4)}"] = tensor
            names.add(m.group(2))
    blocks = model.encoder.layer
    if len(names) != 1 or sorted(layers) != list(range(len(blocks))):
        raise InputDataError(
            f"adapter '{folder}' holds weights for layers {sorted(layers)} of adapter(s) "
            f"{sorted(names)}; expected one adapter over the model's {len(blocks)} layers"
        )
    act = _activation(config["non_linearity"])
    scaling = float(config.get("scaling", 1.0))
    for i, block in enumerate(blocks):
        w = layers[i]
        params = {k: torch.nn.Parameter(v.float(), requires_grad=False) for k, v in w.items()}
        block.output.adapter_params = torch.nn.ParameterDict(
            {k.replace(".", "_"): p for k, p in params.items()}
        )

        def forward(
            self: Any, hidden_states: torch.Tensor, input_tensor: torch.Tensor
        ) -> torch.Tensor:
            p = self.adapter_params
            h = self.dropout(self.dense(hidden_states))
            base = self.LayerNorm(h + input_tensor)
            down = act(torch.nn.functional.linear(base, p["down_0_weight"], p["down_0_bias"]))
            up = torch.nn.functional.linear(down, p["up_weight"], p["up_bias"]) * scaling
            return self.LayerNorm(up + h + input_tensor)  # type: ignore[no-any-return]

        block.output.forward = types.MethodType(forward, block.output)
    first = layers[0]["down.0.weight"]
    return {
        "adapter": next(iter(names)),
        "layers": len(blocks),
        "bottleneck": int(first.shape[0]),
        "non_linearity": config["non_linearity"],
    }
