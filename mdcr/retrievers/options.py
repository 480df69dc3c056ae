"""The encoder options, declared once: the encode stage's fields, its command-line flags, the
options an encoder is built with (:class:`EncoderOptions`) and their checks all derive
from the declarations below.

- Model options (:class:`ModelOptions`) change the vectors; each encoder takes some of
  them (its record's ``options``, :mod:`mdcr.retrievers.builtin`) and refuses the others.
  ``None`` means unset: the encoder's own default, which the encode fingerprint hashes
  (``option_defaults``).
- Runtime options (:class:`RuntimeOptions`) decide how the vectors are computed: device,
  batch size, workers, attention, compile (settings, never hashed) and the precision
  (hashed as what it resolves to).

An unset option is hashed, and recorded in the manifest, as ``None``; what the encoder
then uses (its record's default) is hashed through the encode stage's identity
(``option_defaults``). Adding an option is one declaration here, plus the factories that
use it and the records that take it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from mdcr.core.config import param, setting
from mdcr.core.errors import ConfigError
from mdcr.retrievers.device import DEVICE_HELP

Metric = Literal["ip", "l2", "cos"]
METRICS: tuple[str, ...] = ("ip", "l2", "cos")
# How the encode stage stores vectors unless told otherwise (its ``storage`` parameter).
DEFAULT_STORAGE = "float16"


def option(*, help: str, minimum: int | None = None) -> Any:
    """A model option: unset (``None``) by default; ``minimum``: the least value of a
    number."""
    field = param(None, help=help)
    meta = {**field.metadata, "option": True, "minimum": minimum}
    return dataclasses.field(default=None, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """The options that change the vectors; ``None``: the encoder's own default."""

    max_length: int | None = option(
        help="max tokens per paper; unset = the encoder's default", minimum=1
    )
    pooling: Literal["cls", "mean", "max", "last"] | None = option(
        help="token pooling; unset = the encoder's own (a sentence-transformers config's, if "
        "the model has one); last = the last non-padding token",
    )
    metric: Literal["ip", "l2", "cos"] | None = option(
        help="similarity override; unset = what the encoder was trained for"
    )
    input_format: Literal["sep", "pair", "space"] | None = option(
        help="sep = title [SEP] abstract; pair = tokenizer pair; space = 'title abstract'",
    )
    layers: Literal["last", "all"] | None = option(
        help="token vectors from the last layer, or the mean over all layers"
    )
    dim: int | None = option(help="random encoder: vector size; unset = 768", minimum=1)
    seed: int | None = option(help="random encoder: seed; unset = 0", minimum=0)
    trust_remote_code: bool | None = option(
        help="allow model code from the hub (hf: models); unset = no"
    )
    revision: str | None = option(
        help="hub revision (branch, tag or commit) of the model; unset = its default branch"
    )
    query_prompt: str | None = option(
        help="text put before each query paper, or a prompt name from the model's "
        "sentence-transformers config; unset = the config's 'query' prompt (if any). A "
        "query prompt other than the document prompt makes the encoder asymmetric: query "
        "papers are encoded once more, as queries",
    )
    document_prompt: str | None = option(
        help="text or prompt name put before each candidate paper; unset = the config's "
        "'document' prompt, else its default prompt (if any)",
    )

    def is_unset(self, name: str) -> bool:
        """Whether model option ``name`` is unset (``None``)."""
        return getattr(self, name) is None

    def given(self) -> list[str]:
        """Names of the model options that are set."""
        return [name for name in MODEL_OPTIONS if not self.is_unset(name)]

    def check_options(self, where: str) -> None:
        """One-line errors for option values out of range (``where``: the stage name)."""
        for name in MODEL_OPTIONS:
            value, least = getattr(self, name), _MINIMUM[name]
            if least is not None and value is not None and value < least:
                raise ConfigError(
                    f"{where}.{name}: {value} is not valid; use >= {least}, or leave it "
                    "unset for the encoder's default"
                )
        if self.revision == "":
            raise ConfigError(f"{where}.revision: '' is not a revision; leave it unset")


@dataclass(frozen=True, kw_only=True)
class RuntimeOptions:
    """How the vectors are computed: settings (never hashed), and the precision (hashed as
    what ``auto`` resolves to)."""

    precision: Literal["auto", "fp32", "bf16", "fp16", "bf16-weights", "fp16-weights"] = param(
        "auto",
        help="auto = bf16 autocast on CUDA (fp16 if no bf16), fp32 on CPU; "
        "*-weights = cast the model itself (faster, slightly less exact); the resolved "
        "value is hashed",
        resolved=True,
    )
    batch_tokens: int | None = setting(
        None,
        help="tokens per batch (padded, or real tokens when unpadded); unset = 2048 on CPU, "
        "131072 on GPU",
    )
    device: str = setting(
        "auto",
        help=f"where to encode: {DEVICE_HELP}; several GPUs encode in parallel, a copy of "
        "the model on each",
    )
    workers: int | None = setting(
        None,
        help="CPU workers preparing the input: tokenizer threads for transformer encoders "
        "(unset = one per core on a GPU machine, none on the CPU), sentence-splitting "
        "processes for Aspire (unset = all cores on a GPU machine, one on the CPU)",
    )
    attention: Literal["auto", "padded", "unpadded"] = setting(
        "auto",
        help="unpadded = sequences packed end to end, no compute on padding (models with "
        "SDPA attention; checked against padded at the first batch, falling back if they "
        "differ); auto = unpadded on GPU, padded on CPU",
    )
    compile: bool = setting(
        False, help="run the model through torch.compile (eager if compiling fails)"
    )

    def check_runtime(self, where: str) -> None:
        for name in ("batch_tokens", "workers"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(
                    f"{where}.{name}: {value} is not valid; use >= 1, or leave it unset"
                )


@dataclass(frozen=True, kw_only=True)
class EncoderOptions(ModelOptions, RuntimeOptions):
    """The options an encoder is built with: the model options, then the runtime ones."""

    def runtime(self) -> dict[str, Any]:
        """Runtime options as keyword arguments."""
        return {name: getattr(self, name) for name in RUNTIME_OPTIONS}


MODEL_OPTIONS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ModelOptions))
RUNTIME_OPTIONS: tuple[str, ...] = (
    "device",
    "precision",
    "batch_tokens",
    "workers",
    "attention",
    "compile",
)
ENCODER_OPTIONS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(EncoderOptions))
_MINIMUM = {f.name: f.metadata["minimum"] for f in dataclasses.fields(ModelOptions)}


def options_of(cfg: Any) -> EncoderOptions:
    """The encoder options a config (the encode stage's) holds, by name."""
    return EncoderOptions(**{name: getattr(cfg, name) for name in ENCODER_OPTIONS})


def default_option_params() -> dict[str, Any]:
    """The encode parameters among the options (the model options and the precision) at
    their defaults, as a manifest records them."""
    out: dict[str, Any] = dict.fromkeys(MODEL_OPTIONS)
    out["precision"] = next(
        f.default for f in dataclasses.fields(RuntimeOptions) if f.name == "precision"
    )
    return out
