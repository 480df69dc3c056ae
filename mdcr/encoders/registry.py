"""Encoders by spec: an encoder record's exact name, or ``<prefix><argument>`` of an encoder
family (``hf:<model>``, ``py:<module>:<attr>``, ...).

Two registries, each filled by one registration next to each definition:

- encoder **records** (:mod:`mdcr.retrievers.builtin`, ``ENCODER_RECORDS``): torch-free data
  naming a model, its defaults, the options it takes, its label, ... and its ``family``.
  The record is the registry's entry: what the encode stage, the dry run and the reports
  read of an encoder.
- encoder **families** (``FAMILIES`` here): how an encoder is built and identified, one
  :class:`EncoderFamily` object with ``build`` and ``identify``. The built-in families
  (:mod:`mdcr.encoders.families`: ``hf``, ``specter2``, ``aspire``, ``minilm``, ``random``;
  the spec prefixes ``hf:`` and ``mem:``; :mod:`mdcr.encoders.python_family`: ``py:``) are
  imported the first time the registry is read, and each imports its models only when
  it builds one. A family with a ``prefix`` is named by specs that start with it; its
  ``record`` is then the entry (options, defaults, help) every such spec shares.

Names are never guessed from substrings (``specter2`` is not ``specter``), a duplicate
registration is an error, and an unknown spec gets a one-line error listing the valid
ones. A record declares which model options it takes, so an option that an encoder would
ignore is refused rather than silently dropped.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from mdcr.core.errors import ConfigError
from mdcr.core.registry import Registry
from mdcr.encoders.base import METRICS, Encoder, EncoderOptions, MultiVectorEncoder
from mdcr.retrievers.builtin import (
    BM25 as BM25_RECORD,
)
from mdcr.retrievers.builtin import ENCODER_RECORDS, EncoderRecord

AnyEncoder = Encoder | MultiVectorEncoder

# BM25 is a retriever, not an encoder; the paper's tables name it too.
BM25 = BM25_RECORD.name


class EncoderFamily(ABC):
    """How the encoders of one family are built and identified (subclass it, implement
    ``build`` and ``identify``, and register one instance with ``FAMILIES.register`` next to
    its definition).

    ``name``: what a record's ``family`` says. ``prefix`` (with ``record``): specs
    ``<prefix><argument>`` name this family, with ``record`` as their entry; ``usage``:
    how the valid specs list it (empty: not listed, e.g. ``mem:``, which mdcr makes
    itself).
    """

    name: str = ""
    prefix: str | None = None
    record: EncoderRecord | None = None
    usage: str = ""

    @abstractmethod
    def build(self, record: EncoderRecord, arg: str, options: EncoderOptions) -> AnyEncoder:
        """The encoder (load its models lazily, inside this call)."""

    @abstractmethod
    def identify(self, record: EncoderRecord, arg: str, options: EncoderOptions) -> dict[str, Any]:
        """The identity of its code and weights, hashed into the encode fingerprint,
        computed without loading the model where possible. A family has no default: one
        that forgot its weights would reuse vectors after they changed."""

    def probed(self, record: EncoderRecord, arg: str, options: EncoderOptions) -> Any:
        """The encoder built to be identified, when this family identifies its encoders
        by their vectors for probe papers (``py:``, ``mem:``; :mod:`mdcr.encoders.probe`);
        None for one identified by its code and weights alone."""
        return None

    def accepts(self, arg: str) -> bool:
        """Whether ``arg`` (the spec after the prefix) is well formed for this family."""
        return bool(arg)

    def check_options(
        self, record: EncoderRecord, spec: str, arg: str, options: EncoderOptions
    ) -> None:
        """Refuse model options the encoder does not take (one line naming those it
        takes)."""
        bad = [o for o in options.given() if o not in record.options]
        if bad:
            takes = ", ".join(record.options) or "none"
            raise ConfigError(
                f"encoder '{spec}' does not take option(s) {', '.join(bad)}; its options: {takes}"
            )
        if options.metric is not None and options.metric not in METRICS:
            raise ConfigError(
                f"metric '{options.metric}' is not valid; valid options: {', '.join(METRICS)}"
            )


def _check_family(family: EncoderFamily) -> None:
    """A prefix family needs its ``record``, and a prefix another family holds is
    refused."""
    if family.prefix is not None:
        if family.record is None or not family.prefix.endswith(":"):
            raise ConfigError(
                f"encoder family '{family.name}': a prefix family needs a prefix ending in "
                "':' and a record (its options and defaults)"
            )
        for other in FAMILIES.items().values():
            if other is not family and other.prefix == family.prefix:
                raise ConfigError(
                    f"encoder family '{family.name}': prefix '{family.prefix}' is taken by "
                    f"'{other.name}'"
                )


# Every encoder family, registered by the modules of the entry-point group
# mdcr.encoder_families.
FAMILIES: Registry[EncoderFamily] = Registry(
    "encoder family",
    key=lambda family: family.name,
    group="mdcr.encoder_families",
    check=_check_family,
)


def _prefix_families() -> list[EncoderFamily]:
    return [f for f in FAMILIES.items().values() if f.prefix is not None]


def encoder_names() -> list[str]:
    """The records' names (sorted), not counting the specs of prefix families."""
    return sorted(ENCODER_RECORDS.items())


def valid_specs() -> str:
    forms = [f.usage for f in _prefix_families() if f.usage]
    return ", ".join([*encoder_names(), *forms])


def lookup(spec: str) -> tuple[EncoderRecord, str]:
    """The record for an encoder spec and the argument after its prefix (if any)."""
    if spec in ENCODER_RECORDS:
        return ENCODER_RECORDS.get(spec), ""
    for family in _prefix_families():
        prefix = str(family.prefix)
        if spec.startswith(prefix) and family.accepts(spec[len(prefix) :]):
            assert family.record is not None  # FAMILIES checks it
            return family.record, spec[len(prefix) :]
    raise ConfigError(f"unknown encoder '{spec}'; valid encoders: {valid_specs()}")


def family_of(record: EncoderRecord) -> EncoderFamily:
    """The family that builds a record (an unknown family: one line listing the valid)."""
    return FAMILIES.get(record.family)


def check_options(record: EncoderRecord, spec: str, options: EncoderOptions) -> None:
    """Refuse model options the encoder does not take (one line naming those it takes)."""
    _, arg = lookup(spec)
    family_of(record).check_options(record, spec, arg, options)


def build_encoder(spec: str, options: EncoderOptions | None = None) -> AnyEncoder:
    """Build the encoder a spec names, with options checked against what it takes."""
    options = options or EncoderOptions()
    record, arg = lookup(spec)
    family = family_of(record)
    family.check_options(record, spec, arg, options)
    return family.build(record, arg, options)


def identify_encoder(spec: str, options: EncoderOptions | None = None) -> dict[str, Any]:
    """The identity of the code and weights behind an encoder spec, without loading it.

    A hub model's identity holds the ``commit`` to load (pass it as the revision); see
    :mod:`mdcr.encoders.identity`.
    """
    options = options or EncoderOptions()
    record, arg = lookup(spec)
    family = family_of(record)
    family.check_options(record, spec, arg, options)
    return family.identify(record, arg, options)


def probed_encoder(spec: str, options: EncoderOptions | None = None) -> Any:
    """The encoder :func:`identify_encoder` built, when its family identifies it by its
    vectors for probe papers (else None); call it after :func:`identify_encoder`."""
    options = options or EncoderOptions()
    record, arg = lookup(spec)
    return family_of(record).probed(record, arg, options)


def option_defaults(spec: str, options: EncoderOptions | None = None) -> dict[str, Any]:
    """The defaults the record fills in for the model options left unset.

    The encode fingerprint hashes them (the given ones are hashed as parameters), so a
    default changed in a record is a new output. For an ``hf:`` model they are the ones
    used when it has no sentence-transformers config (a config is hashed with the model's
    weights); a ``py:`` encoder's own defaults are in its hashed source.
    """
    options = options or EncoderOptions()
    record, _ = lookup(spec)
    return {name: d for name, d in record.option_defaults().items() if options.is_unset(name)}


def entry_for(retriever: str) -> EncoderRecord | None:
    """The record of a retriever name (None for bm25, prefix specs and unknown names)."""
    return ENCODER_RECORDS.items().get(retriever)


def option_or_default(o: EncoderOptions, defaults: Mapping[str, Any], name: str) -> Any:
    """Option ``name`` as given, else the encoder's default."""
    return defaults[name] if o.is_unset(name) else getattr(o, name)
