"""The latent structure of the synthetic corpus and its citation graph.

Every paper gets a year, a field, a topic, a niche (a small community inside a topic) and a
citation attractiveness (Pareto-tailed, decaying with age); references are drawn from
urns at the niche, topic, field and corpus levels, only to papers of the citing paper's
year or older. Every random stream is derived from (seed, purpose, chunk), never from
execution order, so the corpus for a seed is always the same.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mdcr.contracts.paper import QUERY_YEAR
from mdcr.corpus.synth import text as st

if TYPE_CHECKING:
    from mdcr.corpus.synth.config import SynthConfig

# Papers per generation chunk. A constant (not a knob): the random streams are drawn per
# chunk, so the corpus for a given seed must not depend on anything else.
CHUNK = 50_000
ID_BASE = 10_000_000
# Mean urn copies per paper (integer attractiveness; more copies = finer weights).
URN_COPIES = 8.0


# --------------------------------------------------------------------------- randomness


def _entropy(seed: int, *parts: object) -> list[int]:
    """Seed material for (seed, "synth", purpose, chunk, ...): never execution order."""
    tag = hashlib.blake2b(repr(("synth", *parts)).encode(), digest_size=8).digest()
    return [seed, int.from_bytes(tag, "little")]


def rng_for(seed: int, *parts: object) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(_entropy(seed, *parts))))


def py_rng_for(seed: int, *parts: object) -> random.Random:
    e = _entropy(seed, *parts)
    return random.Random(e[0] * (1 << 64) + e[1])


# --------------------------------------------------------------------------- latent corpus


@dataclass
class Latent:
    """Per-paper latent attributes, index = position in year order."""

    year: np.ndarray  # int16, latent (also for null-year records)
    year_null: np.ndarray  # bool
    topic: np.ndarray  # int16 index into st.TOPICS
    field: np.ndarray  # int8 index into st.FIELDS
    field2: np.ndarray  # int8, -1 when none
    no_field: np.ndarray  # bool: mag_field_of_study is null
    niche: np.ndarray  # int32 global niche id
    abstract_kind: np.ndarray  # int8: 0 full, 1 null, 2 short
    title_empty: np.ndarray  # bool
    n_refs: np.ndarray  # int32 references to draw
    copies: np.ndarray  # int32 urn copies (integer attractiveness)
    sig: np.ndarray  # int32 signature (name of the paper's contribution) for the text
    pid: np.ndarray  # int64 numeric paper id

    @property
    def n(self) -> int:
        return int(self.year.shape[0])


def _logit_shift(years: np.ndarray, counts: np.ndarray, target: float, slope: float) -> float:
    """Intercept a with mean(sigmoid(a + slope * (2000 - year))) == target (bisection)."""
    if target <= 0.0:
        return -math.inf
    if target >= 1.0:
        return math.inf
    w = counts / counts.sum()
    x = slope * (2000.0 - years)
    lo, hi = -30.0, 30.0
    for _ in range(80):
        mid = (lo + hi) / 2
        share = float(np.sum(w / (1.0 + np.exp(-(mid + x)))))
        lo, hi = (mid, hi) if share < target else (lo, mid)
    return (lo + hi) / 2


def _year_prob(year: np.ndarray, a: float, slope: float) -> np.ndarray:
    if a == -math.inf:
        return np.zeros(year.shape)
    if a == math.inf:
        return np.ones(year.shape)
    return 1.0 / (1.0 + np.exp(-(a + slope * (2000.0 - year.astype(np.float64)))))


def _topic_probs() -> np.ndarray:
    """Probability of each topic: field weight times a mild Zipf share inside the field."""
    probs = np.zeros(len(st.TOPICS))
    total = sum(st.FIELD_WEIGHTS.values())
    for field, idx in st.topics_of_field().items():
        share = 1.0 / np.arange(1, len(idx) + 1) ** 0.6
        probs[idx] = st.FIELD_WEIGHTS[field] / total * share / share.sum()
    return probs / probs.sum()


def latent_corpus(cfg: SynthConfig, *, min_refs: int) -> Latent:
    n, seed = cfg.n_papers, cfg.seed
    rng = rng_for(seed, "latent")
    years_all = np.arange(cfg.first_year, cfg.last_year + 1)
    w = np.exp(cfg.growth * (years_all - cfg.first_year))
    w[-1] *= cfg.last_year_coverage
    counts = rng.multinomial(n, w / w.sum())
    year = np.repeat(years_all, counts).astype(np.int16)

    topic_p = _topic_probs()
    topic = rng.choice(len(topic_p), size=n, p=topic_p).astype(np.int16)
    topic_field = np.array([st.FIELDS.index(t.field) for t in st.TOPICS], dtype=np.int8)
    field = topic_field[topic]
    related = np.array(
        [[st.FIELDS.index(r) for r in st.RELATED_FIELDS[f]] for f in st.FIELDS], dtype=np.int8
    )
    two = rng.random(n) < cfg.two_field_share
    field2 = np.where(two, related[field, rng.integers(0, related.shape[1], n)], -1).astype(np.int8)
    no_field = rng.random(n) < cfg.no_field_share

    # Niches: small communities inside a topic, about niche_size papers each.
    n_niches = np.maximum(1, np.round(topic_p * n / cfg.niche_size)).astype(np.int64)
    niche_offset = np.concatenate([[0], np.cumsum(n_niches)[:-1]])
    local = (rng.random(n) * n_niches[topic]).astype(np.int64)
    niche = (niche_offset[topic] + local).astype(np.int32)

    # Missing abstracts and missing references are more common for older papers.
    slope = 0.04
    a_abs = _logit_shift(years_all, counts, cfg.no_abstract_share, slope)
    u = rng.random(n)
    p_null = _year_prob(year, a_abs, slope)
    abstract_kind = np.zeros(n, dtype=np.int8)
    abstract_kind[u < p_null] = 1
    short = (u >= p_null) & (u < p_null + cfg.short_abstract_share)
    abstract_kind[short] = 2
    year_null = rng.random(n) < cfg.null_year_share
    title_empty = rng.random(n) < cfg.empty_title_share

    a_refs = _logit_shift(years_all, counts, cfg.no_refs_share, slope)
    has_refs = rng.random(n) >= _year_prob(year, a_refs, slope)
    age = np.maximum(0, QUERY_YEAR - year.astype(np.float64))
    mean_refs = cfg.refs_recent * np.exp(-cfg.refs_decay * age)
    sigma = 0.6
    k = np.rint(rng.lognormal(np.log(mean_refs) - sigma**2 / 2, sigma))
    n_refs = np.where(has_refs, np.maximum(k, max(1, min_refs)), 0).astype(np.int32)

    # Attractiveness: Pareto fitness x recency x (records without abstract are rarely cited).
    fitness = (1.0 + rng.pareto(cfg.fitness_alpha, n)) * rng.lognormal(0.0, cfg.fitness_sigma, n)
    fitness *= np.exp(cfg.recency * (year.astype(np.float64) - cfg.last_year))
    fitness *= np.where(abstract_kind == 0, 1.0, 0.25) * np.where(title_empty, 0.5, 1.0)
    scaled = fitness * (URN_COPIES / fitness.mean())
    copies = np.floor(scaled + rng.random(n)).astype(np.int32)

    # Numeric ids like S2ORC's, unrelated to year order and not contiguous.
    pid = ID_BASE + rng.permutation(n).astype(np.int64) * 7 + rng.integers(0, 7, n)
    sig = rng.integers(0, 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    return Latent(
        year, year_null, topic, field, field2, no_field, niche, abstract_kind, title_empty,
        n_refs, copies, sig, pid,
    )  # fmt: skip


# --------------------------------------------------------------------------- citation graph


@dataclass
class _Level:
    """One locality level: an urn sorted by (group, index) and each paper's eligible slice."""

    group: np.ndarray | None  # per-paper group id (None: a single global group)
    seg_start: np.ndarray  # urn position where each group's segment starts
    prefix_end: np.ndarray  # per paper: urn position where its own copies begin
    urn: np.ndarray  # paper indices, each repeated by its copies


def _build_level(group: np.ndarray | None, copies: np.ndarray) -> _Level:
    n = copies.shape[0]
    idx_dtype = np.int32
    if group is None:
        order = np.arange(n, dtype=idx_dtype)
    else:
        order = np.argsort(group, kind="stable").astype(idx_dtype)
    c_sorted = copies[order]
    excl = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(c_sorted, out=excl[1:])
    pos_dtype = np.int32 if excl[-1] < 2**31 - 1 else np.int64
    prefix_end = np.empty(n, dtype=pos_dtype)
    prefix_end[order] = excl[:-1]
    urn = np.repeat(order, c_sorted)
    if group is None:
        seg_start = np.zeros(1, dtype=pos_dtype)
    else:
        g_sorted = group[order]
        n_groups = int(group.max()) + 1
        first = np.searchsorted(g_sorted, np.arange(n_groups), side="left")
        seg_start = excl[first].astype(pos_dtype)
    return _Level(group, seg_start, prefix_end, urn)


def _build_levels(lat: Latent) -> list[_Level]:
    return [
        _build_level(lat.niche, lat.copies),
        _build_level(lat.topic, lat.copies),
        _build_level(lat.field, lat.copies),
        _build_level(None, lat.copies),
    ]


def _sample_targets(
    levels: list[_Level], level_cum: np.ndarray, citing: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """One cited paper per entry of ``citing`` (-1 where none is eligible).

    The level (niche, topic, field, anywhere) is drawn first; a level with no older
    paper falls back to the next wider one. Inside a level, the target is a uniform draw
    from the citing paper's urn slice, i.e. proportional to attractiveness.
    """
    e = int(citing.shape[0])
    lvl = np.searchsorted(level_cum, rng.random(e), side="right")
    u = rng.random(e)
    cited = np.full(e, -1, dtype=np.int64)
    for li, level in enumerate(levels):
        sel = np.flatnonzero(lvl == li)
        if sel.size == 0:
            continue
        ci = citing[sel]
        if level.group is None:
            start = np.zeros(sel.size, dtype=np.int64)
        else:
            start = level.seg_start[level.group[ci]].astype(np.int64)
        span = level.prefix_end[ci].astype(np.int64) - start
        ok = span > 0
        good = sel[ok]
        r = start[ok] + (u[good] * span[ok]).astype(np.int64)
        cited[good] = level.urn[r]
        if li + 1 < len(levels):
            lvl[sel[~ok]] = li + 1  # nothing eligible here: fall back to a wider level
    return cited


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values (np.unique's hash path is far slower on int64 edge keys)."""
    x = np.sort(x)
    if x.size == 0:
        return x
    keep = np.empty(x.size, dtype=bool)
    keep[0] = True
    np.not_equal(x[1:], x[:-1], out=keep[1:])
    return x[keep]


RESAMPLE_ROUNDS = 4  # redraws for references lost as duplicates (popular papers repeat)


def _chunk_edges(
    lat: Latent,
    levels: list[_Level],
    level_cum: np.ndarray,
    a: int,
    b: int,
    rng: np.random.Generator,
    min_out: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct edges (citing, cited) of citing papers a..b-1, sorted by (citing, cited).

    Every cited index is smaller than its citing index (older or same year). Draws that
    repeat a reference are redrawn a few times, so a paper ends up with about n_refs
    distinct references at any corpus size. With ``min_out`` > 0, paper i gets at least
    min(min_out, i) distinct references.
    """
    n = lat.n
    want = lat.n_refs[a:b].astype(np.int64)
    citing = np.repeat(np.arange(a, b, dtype=np.int64), want)
    keys = np.zeros(0, dtype=np.int64)
    for _ in range(RESAMPLE_ROUNDS + 1):
        cited = _sample_targets(levels, level_cum, citing, rng)
        keep = cited >= 0
        keys = _sorted_unique(np.concatenate([keys, citing[keep] * n + cited[keep]]))
        missing = want - np.bincount(keys // n - a, minlength=b - a)
        if not missing.any():
            break
        citing = np.repeat(np.arange(a, b, dtype=np.int64), missing)
    if min_out > 0:
        keys = _top_up(keys, a, b, n, rng, min_out)
    return keys // n, keys % n


def _top_up(
    keys: np.ndarray, a: int, b: int, n: int, rng: np.random.Generator, min_out: int
) -> np.ndarray:
    """Add uniform older references until paper i has min(min_out, i) distinct ones."""
    need = np.minimum(min_out, np.arange(a, b))
    while True:
        have = np.bincount(keys // n - a, minlength=b - a)
        short = np.flatnonzero(have < need)
        if short.size == 0:
            return keys
        src = np.repeat(short + a, min_out).astype(np.int64)
        dst = (rng.random(src.size) * src).astype(np.int64)
        keys = _sorted_unique(np.concatenate([keys, src * n + dst]))


def edge_chunks(
    cfg: SynthConfig, lat: Latent, *, min_out: int
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """(a, b, citing, cited) per chunk of citing papers, in index order."""
    levels = _build_levels(lat)
    level_cum = np.cumsum([cfg.p_niche, cfg.p_topic, cfg.p_field])
    for c, a in enumerate(range(0, lat.n, CHUNK)):
        b = min(lat.n, a + CHUNK)
        rng = rng_for(cfg.seed, "edges", c)
        citing, cited = _chunk_edges(lat, levels, level_cum, a, b, rng, min_out)
        yield a, b, citing, cited


# --------------------------------------------------------------------------- records
