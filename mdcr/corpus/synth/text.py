"""Topical English-like text for the synthetic S2ORC corpus, from package-data vocabularies.

Why real words: the corpus must exercise both lexical retrieval (BM25) and neural
sentence encoders (all-MiniLM-L6-v2). An encoder trained on English only separates
topics whose words it knows, so every field below has a hand-curated list of real
domain terms, and every topic within a field its own list of real terms and phrases.
Sentences come from academic templates whose slots are filled with those terms, so an
abstract reads like a (vague) real abstract of its topic.

Structure of the signal, coarse to fine:

- field terms, shared by all papers of a MAG field;
- topic terms, shared by the papers of one topic (6-8 topics per field);
- niche focus terms: a fixed handful of the topic's terms (plus a few field terms)
  that the papers of one niche (a small community inside a topic) repeat.

The citation generator in :mod:`mdcr.corpus.synth.stage` cites mostly within the niche and
the topic, so citing and cited papers share words at every level.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

# The vocabulary is package data (mdcr/data/synth_vocabulary.json):
# - field_weights: MAG fields of study, as spelled in S2ORC (Appendix A.2 of the paper),
#   with relative sizes, a rough picture of S2ORC's skew (Medicine largest; Art,
#   Philosophy and History smallest, so their field-cited sets are the small ones);
# - related_fields: fields that often co-occur as a second MAG label;
# - fields: per field, its terms and its topics' terms (comma-separated);
# - generic: generic academic words by template slot (BM25's IDF discounts them);
# - sections / titles: sentence templates by abstract section, and title templates.
#   Slots: {t} topic-level term, {f} field-level term, {a}/{m}/{r}/{v}/{vs}/{ps}/{pp}/{o}
#   generic words, {n} a number;
# - short_abstracts: what records with an abstract under 30 characters hold;
# - modifiers: real, domain-neutral modifiers of niche key phrases;
# - signature_names / signature_kinds: names of papers' contributions ("Meridian cohort");
# - first_names / last_names: authors.


def _load_vocabulary() -> dict[str, Any]:
    text = resources.files("mdcr").joinpath("data/synth_vocabulary.json").read_text("utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


_DATA = _load_vocabulary()
FIELD_WEIGHTS: dict[str, float] = dict(_DATA["field_weights"])
FIELDS: tuple[str, ...] = tuple(sorted(FIELD_WEIGHTS))
RELATED_FIELDS: dict[str, tuple[str, ...]] = {
    k: tuple(v) for k, v in _DATA["related_fields"].items()
}
_VOCAB: dict[str, tuple[str, dict[str, str]]] = {
    f: (v["terms"], dict(v["topics"])) for f, v in _DATA["fields"].items()
}
_GENERIC: dict[str, str] = dict(_DATA["generic"])
_SECTIONS: tuple[tuple[str, ...], ...] = tuple(tuple(s) for s in _DATA["sections"])
_TITLES: tuple[str, ...] = tuple(_DATA["titles"])
SHORT_ABSTRACTS: tuple[str, ...] = tuple(_DATA["short_abstracts"])
MODIFIERS: tuple[str, ...] = tuple(_DATA["modifiers"])
SIGNATURE_NAMES: tuple[str, ...] = tuple(_DATA["signature_names"])
SIGNATURE_KINDS: dict[str, tuple[str, ...]] = {
    k: tuple(v) for k, v in _DATA["signature_kinds"].items()
}
FIRST_NAMES: tuple[str, ...] = tuple(_DATA["first_names"])
LAST_NAMES: tuple[str, ...] = tuple(_DATA["last_names"])

_SLOT = re.compile(r"\{(\w+)\}")


def _split_terms(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


# Slot markers of parsed templates; generic slots hold their word tuple directly.
_T: tuple[str, ...] = ("<topic term>",)
_F: tuple[str, ...] = ("<field term>",)
_N: tuple[str, ...] = ("<number>",)
# A parsed template: literal pieces (one more than slots), slots, and per slot whether it
# follows the article "a" (turned into "an" before a vowel).
_Template = tuple[tuple[str, ...], tuple[tuple[str, ...], ...], tuple[bool, ...]]


def _parse(template: str) -> _Template:
    parts = _SLOT.split(template)
    lits = tuple(parts[0::2])
    names = parts[1::2]
    special = {"t": _T, "f": _F, "n": _N}
    slots = tuple(special[s] if s in special else GENERIC[s] for s in names)
    an = tuple(lit.endswith(" a ") or lit in ("a ", "A ") for lit in lits[:-1])
    return lits, slots, an


def _stable_int(*parts: object) -> int:
    h = hashlib.blake2b(repr(parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")


@dataclass(frozen=True)
class Topic:
    """A topic of a field: its name, its own terms and the field terms it prefers."""

    field: str
    name: str
    terms: tuple[str, ...]
    field_terms: tuple[str, ...]


def _build_topics() -> tuple[Topic, ...]:
    topics = []
    for field in FIELDS:
        field_text, topic_texts = _VOCAB[field]
        fterms = _split_terms(field_text)
        for name, text in topic_texts.items():
            # Each topic prefers a fixed subset of its field's terms (topics overlap a bit).
            rnd = random.Random(_stable_int("topic-field-terms", field, name))
            topics.append(Topic(field, name, _split_terms(text), tuple(rnd.sample(fterms, 12))))
    return tuple(topics)


FIELD_TERMS: dict[str, tuple[str, ...]] = {f: _split_terms(v[0]) for f, v in _VOCAB.items()}
TOPICS: tuple[Topic, ...] = _build_topics()
GENERIC: dict[str, tuple[str, ...]] = {k: _split_terms(v) for k, v in _GENERIC.items()}
_SECTION_TEMPLATES = tuple(tuple(_parse(t) for t in sec) for sec in _SECTIONS)
_TITLE_TEMPLATES = tuple(_parse(t) for t in _TITLES)
# Abstract sentences by position: background, objective, methods..., results..., conclusion.


def section_plan(n_sent: int) -> tuple[int, ...]:
    """Section index of each sentence of an abstract with ``n_sent`` sentences."""
    if n_sent <= 1:
        return (1,)
    if n_sent == 2:
        return (1, 3)
    if n_sent == 3:
        return (0, 1, 3)
    rest = n_sent - 3  # background, objective and conclusion take one each
    n_bg_extra = rest // 5
    n_methods = (rest - n_bg_extra) // 2
    n_results = rest - n_bg_extra - n_methods
    return (0,) * (1 + n_bg_extra) + (1,) + (2,) * n_methods + (3,) * n_results + (4,)


class TextGenerator:
    """Renders titles and abstracts for papers given their topic, niche and references.

    Where a topical ``{t}`` slot takes its word from, with the default probabilities:

    - the niche's key phrases (modifier + topic term, e.g. "adaptive chemotherapy") and
      focus terms, shared by the papers of one niche;
    - the topic's terms and the field terms the topic prefers;
    - the paper's own signature (a named method, cohort or model, e.g. "Meridian cohort");
    - a cited paper's signature or niche key phrase, as real abstracts name the methods
      and concepts of the work they build on (so citing and cited papers share rare terms
      even when they sit in different niches);
    - the second field's terms, when the paper has one.

    Niche key phrases and focus terms are derived from the niche id alone, so they do not
    depend on the seed or on the order in which papers are rendered.
    """

    P_KEYPHRASE = 0.30
    P_FOCUS = 0.12
    P_TOPIC = 0.18
    P_TOPIC_FIELD = 0.08
    P_OWN_SIGNATURE = 0.05
    P_CITED = 0.17  # half a cited paper's signature, half one of its niche key phrases
    # (the rest, 0.10: the second field's terms, or topic terms when there is none)
    # Where an {f} slot takes its word from: field terms, topic terms (rest: second field).
    P_FIELD, P_FIELD_TOPIC = 0.72, 0.18
    N_FOCUS = 5
    N_KEYPHRASES = 4

    def __init__(self) -> None:
        self._niche_cache: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._plans = {n: section_plan(n) for n in range(1, 41)}

    def niche_terms(self, topic: int, niche: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(key phrases, focus terms) that the papers of niche ``niche`` repeat."""
        cached = self._niche_cache.get(niche)
        if cached is None:
            tp = TOPICS[topic]
            rnd = random.Random(_stable_int("niche-terms", niche))
            pool = tp.terms + tp.field_terms
            focus = (*rnd.sample(tp.terms, 3), *rnd.sample(pool, self.N_FOCUS - 3))
            phrases = tuple(
                f"{rnd.choice(MODIFIERS)} {rnd.choice(tp.terms)}" for _ in range(self.N_KEYPHRASES)
            )
            cached = (phrases, focus)
            self._niche_cache[niche] = cached
        return cached

    @staticmethod
    def signature(topic: int, sig: int) -> str:
        """The name of a paper's contribution, e.g. "Meridian cohort" (sig: any int >= 0)."""
        kinds = SIGNATURE_KINDS[TOPICS[topic].field]
        return f"{SIGNATURE_NAMES[sig % len(SIGNATURE_NAMES)]} {kinds[(sig // 997) % len(kinds)]}"

    def render(
        self,
        rnd: random.Random,
        topic: int,
        field2: str | None,
        niche: int,
        n_sent: int,
        *,
        sig: int = 0,
        cited: tuple[tuple[int, int, int], ...] = (),
        with_abstract: bool = True,
    ) -> tuple[str, str]:
        """A (title, abstract) pair; the abstract is "" when ``with_abstract`` is false.

        ``cited`` holds (topic, niche, sig) of some papers this paper cites.
        """
        fill = self._filler(rnd, topic, field2, niche, sig, cited)
        rand = rnd.random
        title = fill(_TITLE_TEMPLATES[int(rand() * len(_TITLE_TEMPLATES))])
        if not with_abstract:
            return title, ""
        plan = self._plans.get(n_sent) or section_plan(n_sent)
        sentences = []
        for sec in plan:
            templates = _SECTION_TEMPLATES[sec]
            sentences.append(fill(templates[int(rand() * len(templates))]))
        return title, " ".join(sentences)

    def _filler(
        self,
        rnd: random.Random,
        topic: int,
        field2: str | None,
        niche: int,
        sig: int,
        cited: tuple[tuple[int, int, int], ...],
    ) -> Callable[[_Template], str]:
        """The function that fills one template for this paper: a topical ``{t}`` slot
        from the sources of the class docstring, a field ``{f}`` slot, a number ``{n}``.
        Its word sources and thresholds are bound once, as locals of the closure (the
        synthetic corpus renders millions of templates)."""
        tp = TOPICS[topic]
        phrases, focus = self.niche_terms(topic, niche)
        fterms = FIELD_TERMS[tp.field]
        f2terms = FIELD_TERMS[field2] if field2 is not None else tp.terms
        own_sig = (self.signature(topic, sig),)
        cited_terms: list[str] = []
        for c_topic, c_niche, c_sig in cited:
            cited_terms.append(self.signature(c_topic, c_sig))
            cited_terms.append(rnd.choice(self.niche_terms(c_topic, c_niche)[0]))
        cited_seq = tuple(cited_terms) or phrases
        rand = rnd.random
        c1 = self.P_KEYPHRASE
        c2 = c1 + self.P_FOCUS
        c3 = c2 + self.P_TOPIC
        c4 = c3 + self.P_TOPIC_FIELD
        c5 = c4 + self.P_OWN_SIGNATURE
        c6 = c5 + self.P_CITED
        p_field = self.P_FIELD
        p_ftopic = p_field + self.P_FIELD_TOPIC
        tterms, tfterms = tp.terms, tp.field_terms

        def fill(tpl: _Template) -> str:
            lits, slots, an = tpl
            out = [lits[0]]
            for k, slot in enumerate(slots):
                if slot is _T:
                    u = rand()
                    if u < c2:
                        seq = phrases if u < c1 else focus
                    elif u < c4:
                        seq = tterms if u < c3 else tfterms
                    elif u < c6:
                        seq = own_sig if u < c5 else cited_seq
                    else:
                        seq = f2terms
                elif slot is _F:
                    u = rand()
                    seq = fterms if u < p_field else tterms if u < p_ftopic else f2terms
                elif slot is _N:
                    seq = (str(int(10 ** (1 + 2.5 * rand()))),)
                else:
                    seq = slot
                w = seq[int(rand() * len(seq))]
                if an[k] and w[0] in "aeiouAEIOU":
                    out[-1] = out[-1][:-2] + "an "
                out.append(w)
                out.append(lits[k + 1])
            text = "".join(out)
            return text[0].upper() + text[1:]

        return fill


def topics_of_field() -> dict[str, list[int]]:
    """Topic indices (into :data:`TOPICS`) of each field."""
    out: dict[str, list[int]] = {f: [] for f in FIELDS}
    for i, tp in enumerate(TOPICS):
        out[tp.field].append(i)
    return out
