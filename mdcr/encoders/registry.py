"""One registry of encoders, looked up by exact name, ``hf:<model>`` or ``py:<module>:<attr>``.

Names are never guessed from substrings (``specter2`` is not ``specter``), a duplicate
registration is an error, and an unknown name gets a one-line error listing the valid
ones. Each entry declares which model options it takes, so an option that an encoder would
ignore is refused rather than silently dropped.

The built-in encoders are records (:mod:`mdcr.builtin_encoders`: model, defaults, options,
label, paper name, MDCR negative role, vector size, cost); this module turns each record
into an entry, with the factory and identity of its ``family``. Adding an encoder of a
known family is one record there. Besides them:

- ``hf:<model id or path>``: a model with a sentence-transformers config is loaded as that
  config says (:mod:`mdcr.encoders.st_models`); another gets CLS pooling, ip, 512 tokens,
  ``title [SEP] abstract`` unless overridden (pooling, metric, max_length, input_format,
  layers, revision, trust_remote_code), and the choice is printed and recorded.
- ``py:<module>:<attr>``: your own :class:`~mdcr.encoders.base.Encoder`.
- ``register(EncoderEntry(...))`` at run time: never a built-in (it may not stand for the
  paper's models, published rows or MDCR negative types).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mdcr.builtin_encoders import BM25 as BM25_RECORD
from mdcr.builtin_encoders import HF_OPTIONS, BuiltinEncoder, encoder_record
from mdcr.encoders.base import (
    METRICS,
    Encoder,
    EncoderOptions,
    MultiVectorEncoder,
)
from mdcr.encoders.in_memory import MEM_PREFIX
from mdcr.errors import ConfigError

HF_PREFIX = "hf:"
PY_PREFIX = "py:"


AnyEncoder = Encoder | MultiVectorEncoder
Factory = Callable[[str, EncoderOptions], AnyEncoder]
# identify(arg after the prefix, options) -> the identity of the code and weights.
Identify = Callable[[str, EncoderOptions], dict[str, Any]]


def _nothing_to_identify(arg: str, o: EncoderOptions) -> dict[str, Any]:
    return {}


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
    """Option ``name`` as given, else (unset) the encoder's default."""
    return defaults[name] if o.is_unset(name) else getattr(o, name)


@dataclass(frozen=True)
class EncoderEntry:
    """A registered encoder and what the rest of mdcr needs to know about it.

    ``label``: its display name; ``paper_name``: its name in the tables of Medić & Šnajder
    (2022), for the paper's own models; ``dim``: its vector size when known before loading;
    ``multi_vector``: one vector per sentence (Aspire); ``torch_model``: it computes in
    the configured precision (its resolved value is hashed); ``cost``: its encode time
    per paper relative to a BERT-base encoder, for ``--dry-run`` estimates (0: no model);
    ``defaults``: the model options its factory uses when they are not given (hashed into
    the encode fingerprint by :func:`option_defaults`). A built-in entry is made from its
    record (:func:`builtin_entry`), which it keeps as ``record``.
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
    record: BuiltinEncoder | None = None


_REGISTRY: dict[str, EncoderEntry] = {}


def register(entry: EncoderEntry) -> EncoderEntry:
    """Add an encoder; a second entry under the same name, or a built-in's name, is an
    error."""
    if entry.name.startswith((HF_PREFIX, PY_PREFIX, MEM_PREFIX)) or not entry.name:
        raise ConfigError(f"encoder name '{entry.name}' is reserved; pick a plain name")
    taken = _REGISTRY.get(entry.name)
    if (taken is not None and taken is not entry) or encoder_record(entry.name) is not None:
        raise ConfigError(f"encoder '{entry.name}' is registered twice; names must be unique")
    _REGISTRY[entry.name] = entry
    return entry


def encoder_names() -> list[str]:
    """The built-in and registered names (sorted), not counting the ``hf:``/``py:`` forms."""
    from mdcr.builtin_encoders import ENCODERS

    return sorted({*(r.name for r in ENCODERS), *_REGISTRY})


def valid_specs() -> str:
    return ", ".join(encoder_names()) + ", hf:<model id or path>, py:<module>:<attr>"


def lookup(spec: str) -> tuple[EncoderEntry, str]:
    """The entry for an encoder spec and the argument after its prefix (if any)."""
    record = encoder_record(spec)
    if record is not None:
        return builtin_entry(record), ""
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
        if entry is _PY_ENTRY and options.given():  # a py: object takes them only if it asks
            _check_py_options(spec[len(PY_PREFIX) :], options)
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
    """The defaults this registry fills in for the model options left unset.

    The encode fingerprint hashes them (the given ones are hashed as parameters), so a
    default changed here is a new output. For an ``hf:`` model they are the ones used when
    it has no sentence-transformers config (a config is hashed with the model's weights);
    a ``py:`` encoder's own defaults are in its hashed source.
    """
    options = options or EncoderOptions()
    entry, _ = lookup(spec)
    return {name: d for name, d in entry.defaults.items() if options.is_unset(name)}


def entry_for(retriever: str) -> EncoderEntry | None:
    """The registry entry of a retriever name (None for bm25, hf:, py: and unknown names)."""
    record = encoder_record(retriever)
    return builtin_entry(record) if record is not None else _REGISTRY.get(retriever)


# BM25 is a retriever, not an encoder; the paper's tables name it too.
BM25 = BM25_RECORD.name


@functools.cache
def builtin_entry(record: BuiltinEncoder) -> EncoderEntry:
    """The registry entry of a built-in record: its family's factory and identity."""
    factory, identify = _FAMILIES[record.family]
    return EncoderEntry(
        record.name,
        record.description,
        factory(record),
        record.options,
        identify=identify(record),
        label=record.label,
        paper_name=record.paper_name,
        dim=record.dim,
        multi_vector=record.multi_vector,
        torch_model=record.torch_model,
        cost=record.cost,
        defaults=record.option_defaults(),
        record=record,
    )


def _revision(o: EncoderOptions, record: BuiltinEncoder) -> str | None:
    """The revision to load: the option, else the record's (None: the default branch)."""
    return o.revision or record.revision


def _option(o: EncoderOptions, record: BuiltinEncoder, name: str) -> Any:
    """Option ``name`` as given, else the default the record declares."""
    return option_or_default(o, record.option_defaults(), name)


# -- the families' identities (from a record) ---------------------------------------------


def _hub_identity(record: BuiltinEncoder) -> Identify:
    def identify(arg: str, o: EncoderOptions) -> dict[str, Any]:
        from mdcr.encoders.identity import model_source_identity

        return model_source_identity(record.model_id, _revision(o, record))

    return identify


def _aspire_identity(record: BuiltinEncoder) -> Identify:
    def identify(arg: str, o: EncoderOptions) -> dict[str, Any]:
        from importlib import metadata

        from mdcr.encoders.identity import model_source_identity

        out = model_source_identity(record.model_id, _revision(o, record))
        out["sentence_splitter"] = f"pysbd=={metadata.version('pysbd')}"
        return out

    return identify


def _package_identity(record: BuiltinEncoder) -> Identify:
    def identify(arg: str, o: EncoderOptions) -> dict[str, Any]:
        from importlib import metadata
        from pathlib import Path

        from mdcr.encoders.hf import minilm_path
        from mdcr.encoders.identity import folder_digest

        return {
            "package": f"{record.package}=={metadata.version(str(record.package))}",
            "weights": folder_digest(Path(minilm_path())),
        }

    return identify


def _adapter_identity(record: BuiltinEncoder) -> Identify:
    def identify(arg: str, o: EncoderOptions) -> dict[str, Any]:
        from mdcr.encoders.identity import model_source_identity

        return {
            **model_source_identity(record.model_id, _revision(o, record)),
            "adapter": model_source_identity(str(record.adapter), None),
        }

    return identify


def _no_identity(record: BuiltinEncoder) -> Identify:
    return _nothing_to_identify


def _hf_any_identity(arg: str, o: EncoderOptions) -> dict[str, Any]:
    from mdcr.encoders.identity import model_source_identity

    return model_source_identity(arg, o.revision)


# py: encoders built to be identified, by (arg, options): the run that follows the plan in
# this process takes the very object whose state and probe vectors the fingerprint hashed.
_BUILT: dict[tuple[str, str], AnyEncoder] = {}


def _py_identity(arg: str, o: EncoderOptions) -> dict[str, Any]:
    """A ``py:`` encoder's identity: its code (:func:`~mdcr.encoders.identity.python_identity`),
    and, built, its state (:func:`~mdcr.encoders.in_memory.model_identity`) and its vectors
    for the probe papers (:mod:`mdcr.encoders.probe`)."""
    from mdcr.encoders.identity import import_attr, python_identity, watch_code
    from mdcr.encoders.in_memory import model_identity
    from mdcr.encoders.probe import probe_digest

    spec = f"{PY_PREFIX}{arg}"
    module_name = arg.split(":")[0]
    with watch_code(module_name):
        _, obj = import_attr(spec, arg)
        encoder = _build_py(arg, o, obj)
        probe = probe_digest(spec, encoder)
    cache_key = getattr(encoder, "cache_key", None)
    state = model_identity(
        encoder,
        None if cache_key is None else str(cache_key),
        fix=f"declare cache_key = '<a name for this exact state>' on encoder '{spec}' "
        "(and change it whenever what it loads changes)",
    )
    _BUILT[(arg, repr(o))] = encoder
    return {**python_identity(module_name, obj), "state": state, "probe": probe}


# -- the families' factories (from a record) ----------------------------------------------


def _hf_factory(record: BuiltinEncoder) -> Factory:
    """A BERT-like model: pooled token vectors of ``title [SEP] abstract``."""

    def build(arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.hf import HFEncoder

        return HFEncoder(
            record.model_id,
            name=record.name,
            model_id=record.model_id,
            pooling=_option(o, record, "pooling"),
            metric=_option(o, record, "metric"),
            max_length=_option(o, record, "max_length"),
            input_format=_option(o, record, "input_format"),
            layers=_option(o, record, "layers"),
            trust_remote_code=bool(o.trust_remote_code),
            revision=_revision(o, record),
            **o.runtime(),
        )

    return build


def _aspire_factory(record: BuiltinEncoder) -> Factory:
    def build(arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.aspire import AspireEncoder

        return AspireEncoder(
            record.model_id,
            name=record.name,
            max_length=_option(o, record, "max_length"),
            layers=_option(o, record, "layers"),
            metric=_option(o, record, "metric"),
            trust_remote_code=bool(o.trust_remote_code),
            revision=_revision(o, record),
            **o.runtime(),
        )

    return build


def _package_factory(record: BuiltinEncoder) -> Factory:
    """A model shipped in a PyPI package (all-MiniLM-L6-v2), loaded offline from it."""

    def build(arg: str, o: EncoderOptions) -> AnyEncoder:
        from importlib import metadata

        from mdcr.encoders.hf import HFEncoder, minilm_path

        version = metadata.version(str(record.package))
        return HFEncoder(
            minilm_path(),
            name=record.name,
            model_id=f"{record.model_id} ({record.package}=={version})",
            pooling=_option(o, record, "pooling"),
            metric=_option(o, record, "metric"),
            max_length=_option(o, record, "max_length"),
            input_format=_option(o, record, "input_format"),
            layers=_option(o, record, "layers"),
            **o.runtime(),
        )

    return build


def _adapter_factory(record: BuiltinEncoder) -> Factory:
    """A base model with an adapter applied by mdcr itself (SPECTER2's proximity adapter)."""

    def build(arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.adapters import adapter_folder, apply_adapter
        from mdcr.encoders.hf import HFEncoder
        from mdcr.encoders.identity import hub_commit
        from mdcr.encoders.loading import load_pretrained

        adapter = str(record.adapter)
        tokenizer, model, revision = load_pretrained(record.model_id, revision=_revision(o, record))
        adapter_commit = hub_commit(adapter, None)
        applied = apply_adapter(model, adapter_folder(adapter, adapter_commit))
        encoder = HFEncoder(
            record.model_id,
            name=record.name,
            model_id=f"{record.model_id} + {adapter}",
            pooling=_option(o, record, "pooling"),
            metric=_option(o, record, "metric"),
            max_length=_option(o, record, "max_length"),
            input_format=_option(o, record, "input_format"),
            loaded=(tokenizer, model, revision),
            **o.runtime(),
        )
        encoder.identity["adapter"] = {"model_id": adapter, "commit": adapter_commit, **applied}
        return encoder

    return build


def _random_factory(record: BuiltinEncoder) -> Factory:
    def build(arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.random import RandomEncoder

        return RandomEncoder(dim=_option(o, record, "dim"), seed=_option(o, record, "seed"))

    return build


# Each family: (factory, identity), both made from a record.
_FAMILIES: dict[str, tuple[Callable[[BuiltinEncoder], Factory], Callable[..., Identify]]] = {
    "hf": (_hf_factory, _hub_identity),
    "aspire": (_aspire_factory, _aspire_identity),
    "minilm": (_package_factory, _package_identity),
    "specter2": (_adapter_factory, _adapter_identity),
    "random": (_random_factory, _no_identity),
}


def _hf_any(arg: str, o: EncoderOptions) -> AnyEncoder:
    """``hf:<model id or path>``: as its sentence-transformers config says, if it has one;
    else CLS pooling, inner product, 512 tokens unless overridden, and said aloud."""
    from mdcr.encoders.hf import HFEncoder
    from mdcr.encoders.st_models import has_st_config, st_encoder

    name = f"{HF_PREFIX}{arg}"
    if has_st_config(arg, o.revision):
        return st_encoder(arg, name=name, o=o)  # type: ignore[no-any-return]
    chosen = ("pooling", "metric", "max_length", "input_format")
    defaults = [f"{k} {HF_DEFAULTS[k]}" for k in chosen if o.is_unset(k)]
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
        trust_remote_code=bool(o.trust_remote_code),
        revision=o.revision,
        prompt=o.document_prompt or "",
        query_prompt=o.query_prompt,
        choices=choices,
        **o.runtime(),
    )


def _builds_with_options(obj: Any) -> bool | None:
    """Whether a ``py:`` attribute takes the encode options: True for a class or factory
    with an ``options`` parameter, False for one without, None for a ready object."""
    if inspect.isclass(obj) or (callable(obj) and not hasattr(obj, "encode")):
        try:
            return "options" in inspect.signature(obj).parameters
        except (TypeError, ValueError):  # no signature to read (a builtin)
            return False
    return None


def _check_py_options(arg: str, o: EncoderOptions) -> None:
    """A one-line error for model options given to a ``py:`` encoder that would ignore
    them (they would change the fingerprint and nothing else)."""
    from mdcr.encoders.identity import import_attr

    _, obj = import_attr(f"{PY_PREFIX}{arg}", arg)
    takes = _builds_with_options(obj)
    if takes:
        return
    given = ", ".join(o.given())
    what = "an object" if takes is None else "built without an 'options' parameter"
    raise ConfigError(
        f"encoder 'py:{arg}' is {what} and takes no options, so {given} would be ignored; "
        "leave them out, or expose a class or factory with an 'options' parameter"
    )


def _py(arg: str, o: EncoderOptions) -> AnyEncoder:
    """``py:<module>:<attr>``: an encoder object, or a class/factory that returns one.

    A class or factory with a parameter named ``options`` receives the
    :class:`EncoderOptions`; otherwise it is called without arguments.
    """
    from mdcr.encoders.identity import import_attr

    built = _BUILT.pop((arg, repr(o)), None)
    if built is not None:  # built (and probed) by the plan of this run
        return built
    if o.given():
        _check_py_options(arg, o)
    _, obj = import_attr(f"{PY_PREFIX}{arg}", arg)
    return _build_py(arg, o, obj)


def _build_py(arg: str, o: EncoderOptions, obj: Any) -> AnyEncoder:
    """The encoder ``py:<arg>`` names: ``obj`` itself, or what the class or factory
    ``obj`` returns, checked against the :class:`Encoder` protocol."""
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
