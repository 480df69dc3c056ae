"""The built-in encoder families: how the records of :mod:`mdcr.retrievers.builtin` are
built and identified, and the ``hf:`` and ``mem:`` specs (``py:`` is
:mod:`mdcr.encoders.python_family`).

- ``hf``: a BERT-like hub model or folder, pooled token vectors of ``title [SEP]
  abstract`` (SciBERT, SPECTER, SciNCL, SPECTER2 base);
- ``minilm``: all-MiniLM-L6-v2 shipped by a PyPI package, loaded offline from it;
- ``specter2``: a base model with an adapter applied by mdcr itself;
- ``aspire``: sentence vectors, best sentence pair;
- ``random``: seeded random unit vectors;
- ``hf-any`` (``hf:<model id or path>``): a model with a sentence-transformers config is
  loaded as that config says (:mod:`mdcr.encoders.models.st_models`); another gets CLS
  pooling, ip, 512 tokens, ``title [SEP] abstract`` unless overridden (pooling, metric,
  max_length, input_format, layers, revision, trust_remote_code), and the choice is
  printed and recorded;
- ``mem`` (``mem:<name>@<digest>``): a model object handed to ``mdcr.evaluate`` in this
  process.

Each family imports its models only when it builds one.
"""

from __future__ import annotations

from typing import Any

from mdcr.encoders.base import EncoderOptions
from mdcr.encoders.models.in_memory import MEM_PREFIX
from mdcr.encoders.registry import FAMILIES, AnyEncoder, EncoderFamily, option_or_default
from mdcr.retrievers.builtin import HF_OPTIONS, EncoderRecord

HF_PREFIX = "hf:"
# The options a pooled transformer encoder takes from its record's defaults.
_POOLED = ("pooling", "metric", "max_length", "input_format", "layers")


def _revision(o: EncoderOptions, record: EncoderRecord) -> str | None:
    """The revision to load: the option, else the record's (None: the default branch)."""
    return o.revision or record.revision


def _option(o: EncoderOptions, record: EncoderRecord, name: str) -> Any:
    """Option ``name`` as given, else the default the record declares."""
    return option_or_default(o, record.option_defaults(), name)


def hf_encoder(record: EncoderRecord, o: EncoderOptions, source: str, **extra: Any) -> AnyEncoder:
    """A pooled transformer encoder (:class:`~mdcr.encoders.models.hf.HFEncoder`) of
    ``source``: the pooling options as given, else the record's defaults (an option the
    record neither defaults nor takes is left to the encoder), the runtime options, and
    ``extra`` (name, model id, revision, ...)."""
    from mdcr.encoders.models.hf import HFEncoder

    defaults = record.option_defaults()
    pooled = {k: _option(o, record, k) for k in _POOLED if k in defaults or not o.is_unset(k)}
    return HFEncoder(source, **pooled, **extra, **o.runtime())


def _hub_identity(record: EncoderRecord, o: EncoderOptions) -> dict[str, Any]:
    from mdcr.encoders.identity import model_source_identity

    return model_source_identity(record.model_id, _revision(o, record))


class HfFamily(EncoderFamily):
    """A BERT-like model: pooled token vectors of ``title [SEP] abstract``."""

    name = "hf"

    def build(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> AnyEncoder:
        return hf_encoder(
            record,
            o,
            record.model_id,
            name=record.name,
            model_id=record.model_id,
            trust_remote_code=bool(o.trust_remote_code),
            revision=_revision(o, record),
        )

    def identify(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> dict[str, Any]:
        return _hub_identity(record, o)


FAMILIES.register(HfFamily())


class MinilmFamily(EncoderFamily):
    """A model shipped in a PyPI package (all-MiniLM-L6-v2), loaded offline from it."""

    name = "minilm"

    def build(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> AnyEncoder:
        from importlib import metadata

        from mdcr.encoders.models.hf import minilm_path

        version = metadata.version(str(record.package))
        return hf_encoder(
            record,
            o,
            minilm_path(),
            name=record.name,
            model_id=f"{record.model_id} ({record.package}=={version})",
        )

    def identify(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> dict[str, Any]:
        from importlib import metadata
        from pathlib import Path

        from mdcr.encoders.identity import folder_digest
        from mdcr.encoders.models.hf import minilm_path

        return {
            "package": f"{record.package}=={metadata.version(str(record.package))}",
            "weights": folder_digest(Path(minilm_path())),
        }


FAMILIES.register(MinilmFamily())


class Specter2Family(EncoderFamily):
    """A base model with an adapter applied by mdcr itself (SPECTER2's proximity adapter)."""

    name = "specter2"

    def build(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.identity import hub_commit
        from mdcr.encoders.loading import load_pretrained
        from mdcr.encoders.models.adapters import adapter_folder, apply_adapter

        adapter = str(record.adapter)
        tokenizer, model, revision = load_pretrained(record.model_id, revision=_revision(o, record))
        adapter_commit = hub_commit(adapter, None)
        applied = apply_adapter(model, adapter_folder(adapter, adapter_commit))
        encoder = hf_encoder(
            record,
            o,
            record.model_id,
            name=record.name,
            model_id=f"{record.model_id} + {adapter}",
            loaded=(tokenizer, model, revision),
        )
        encoder.identity["adapter"] = {"model_id": adapter, "commit": adapter_commit, **applied}  # type: ignore[union-attr]
        return encoder

    def identify(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> dict[str, Any]:
        from mdcr.encoders.identity import model_source_identity

        return {
            **_hub_identity(record, o),
            "adapter": model_source_identity(str(record.adapter), None),
        }


FAMILIES.register(Specter2Family())


class AspireFamily(EncoderFamily):
    """Sentence vectors (one per sentence), the best sentence pair scoring a paper pair."""

    name = "aspire"

    def build(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.models.aspire import AspireEncoder

        return AspireEncoder(  # type: ignore[no-any-return]
            record.model_id,
            name=record.name,
            max_length=_option(o, record, "max_length"),
            layers=_option(o, record, "layers"),
            metric=_option(o, record, "metric"),
            trust_remote_code=bool(o.trust_remote_code),
            revision=_revision(o, record),
            **o.runtime(),
        )

    def identify(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> dict[str, Any]:
        from importlib import metadata

        out = _hub_identity(record, o)
        out["sentence_splitter"] = f"pysbd=={metadata.version('pysbd')}"
        return out


FAMILIES.register(AspireFamily())


class RandomFamily(EncoderFamily):
    """Seeded random unit vectors from (seed, paper_id): the chance floor."""

    name = "random"

    def build(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.models.random import RandomEncoder

        return RandomEncoder(dim=_option(o, record, "dim"), seed=_option(o, record, "seed"))

    def identify(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> dict[str, Any]:
        """Nothing beyond mdcr's code: the vectors are a function of (seed, paper_id),
        computed by mdcr itself (hashed through the encode stage's version); dim and seed
        are hashed as options or their defaults."""
        return {}


FAMILIES.register(RandomFamily())


class HfAnyFamily(EncoderFamily):
    """``hf:<model id or path>``: as its sentence-transformers config says, if it has one;
    else CLS pooling, inner product, 512 tokens unless overridden, and said aloud."""

    name = "hf-any"
    prefix = HF_PREFIX
    usage = "hf:<model id or path>"
    # hf: models without a sentence-transformers config (one with it is run as it says;
    # its config is hashed with its weights).
    record = EncoderRecord(
        name="hf:<model id or path>",
        label="",
        description="any Hugging Face model by id or local path",
        family="hf-any",
        pooling="cls",
        metric="ip",
        max_length=512,
        input_format="sep",
        layers="last",
        options=HF_OPTIONS,
    )

    def build(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.models.st_models import has_st_config, st_encoder

        name = f"{HF_PREFIX}{arg}"
        if has_st_config(arg, o.revision):
            return st_encoder(arg, name=name, o=o)  # type: ignore[no-any-return]
        defaults = record.option_defaults()
        chosen = ("pooling", "metric", "max_length", "input_format")
        unset = [f"{k} {defaults[k]}" for k in chosen if o.is_unset(k)]
        choices = (
            f"{name} has no sentence-transformers config; mdcr chose {', '.join(unset)} "
            "(set them as encode options to choose otherwise)"
            if unset
            else None
        )
        return hf_encoder(
            record,
            o,
            arg,
            name=name,
            trust_remote_code=bool(o.trust_remote_code),
            revision=o.revision,
            prompt=o.document_prompt or "",
            query_prompt=o.query_prompt,
            choices=choices,
        )

    def identify(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> dict[str, Any]:
        from mdcr.encoders.identity import model_source_identity

        return model_source_identity(arg, o.revision)


FAMILIES.register(HfAnyFamily())


class MemFamily(EncoderFamily):
    """``mem:<name>@<digest>``: a model object handed to ``mdcr.evaluate`` in this process
    (mdcr makes the spec; it is not offered to the user)."""

    name = "mem"
    prefix = MEM_PREFIX
    record = EncoderRecord(
        name="mem:<name>@<digest>",
        label="",
        description="a model object handed to mdcr.evaluate in this process",
        family="mem",
    )

    def build(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.models.in_memory import registered

        return registered(arg)[0]  # type: ignore[no-any-return]

    def identify(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> dict[str, Any]:
        from mdcr.encoders.models.in_memory import registered

        return dict(registered(arg)[1])

    def probed(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.models.in_memory import registered

        return registered(arg)[0]  # type: ignore[no-any-return]


FAMILIES.register(MemFamily())
