"""The measures mdcr scores with: one typed entry per measure, registered once.

A config names a measure by its kind (``score.metrics = ["map", "ndcg", "recall"]``,
``bm25-tune.metric = "map"``); a stored value names it with its cut-off (``map@500``,
``recall@30``), or, for a value over a whole candidate list (MDCR), without one (``map``,
``ndcg``; ``recall@5`` keeps its k). Where the cut-off comes from is part of the measure:

- ``cutoff = "depth"``: the ranking depth (``score.depth``, ``bm25-tune.depth``; the
  paper's 500); over MDCR's whole candidate lists it has no cut-off. Its table label
  leaves the cut-off implied (``MAP``, ``nDCG``), as the paper does.
- ``cutoff = "k"``: the k of R@k (``score.recall_k``; the paper's 30; MDCR's 5). Its
  label shows it (``R@30``).

Adding a measure is one ``MEASURES.register(Measure(...))`` call (see
docs/architecture.md, "How to extend mdcr"); a duplicate kind is refused. An unknown name
is a one-line error listing the registered ones: a :class:`~mdcr.core.errors.ConfigError`
for a config value, an :class:`~mdcr.core.errors.InputDataError` for a stored name.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mdcr.contracts.paper import DEPTH, MDCR_RECALL_K, RECALL_K
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.registry import Registry
from mdcr.measures.chance import expected_ap, expected_ndcg, expected_recall

Cutoff = Literal["depth", "k"]
# (n candidates, m relevant among them, r relevant in the qrels, cut-off) -> expectation
ChanceFormula = Callable[[int, int, int, int], float]

_KIND = re.compile(r"^[a-z][a-z0-9_]*$")
_NAME = re.compile(r"^([a-z][a-z0-9_]*)(?:@(\d+))?$")


@dataclass(frozen=True)
class Measure:
    """One measure: how it is named, computed, labelled, ordered and floored by chance.

    ``ranx`` and ``pytrec_eval`` are how those libraries name it: ``{ranx}@{k}`` (ranx
    computes every value here) and ``pytrec_eval.format(k=k)`` (the independent check of
    the tests and MDCR's original scorer); ``pytrec_eval_whole`` is pytrec_eval's name
    over a whole candidate list, where that exists. ``label`` is the table label (with
    ``@k`` appended for a ``k`` cut-off), ``per_query_label`` the label of one query's
    value (``AP`` for MAP). ``chance`` is the expectation under a uniformly random
    ranking (None: no chance row). Tables list measures by ``order``, then kind. ``mteb``
    is MTEB's score key stem (``map`` gives ``map_at_500``; None: not in MTEB's results).
    """

    kind: str
    label: str
    cutoff: Cutoff
    ranx: str
    pytrec_eval: str
    order: int
    pytrec_eval_whole: str | None = None
    per_query_label: str | None = None
    chance: ChanceFormula | None = None
    mteb: str | None = None

    def name(self, k: int | None) -> str:
        """The stored name: ``map@500``; ``map`` over a whole list (``k`` None)."""
        return self.kind if k is None else f"{self.kind}@{k}"

    def cutoff_of(self, depth: int, k: int) -> int:
        """This measure's cut-off when a run is scored at ``depth`` with R@``k``."""
        return depth if self.cutoff == "depth" else k

    def ranx_name(self, k: int) -> str:
        return f"{self.ranx}@{k}"

    def pytrec_eval_name(self, k: int | None) -> str:
        """pytrec_eval's measure: ``map_cut_500``, ``recall_5``; ``map`` over a whole list."""
        if k is None:
            if self.pytrec_eval_whole is None:
                raise InputDataError(f"measure '{self.kind}' has no whole-list form")
            return self.pytrec_eval_whole
        return self.pytrec_eval.format(k=k)

    def mteb_name(self, k: int) -> str | None:
        """MTEB's score key: ``map_at_500``, ``recall_at_30``; None when MTEB has none."""
        return None if self.mteb is None else f"{self.mteb}_at_{k}"

    def label_at(self, k: int | None) -> str:
        """The table label: ``MAP``, ``nDCG`` (cut-off implied), ``R@30``."""
        return f"{self.label}@{k}" if self.cutoff == "k" and k is not None else self.label

    def definition(self) -> dict[str, Any]:
        """What defines this measure's values (ranx's name, the cut-off, the chance
        formula's code), hashed into the fingerprints that use a measure registered at run
        time (the built-in ones are mdcr's code, covered by the stage versions)."""
        chance = None
        if self.chance is not None:
            try:
                code = inspect.getsource(self.chance)
            except (OSError, TypeError):
                code = repr(getattr(self.chance, "__code__", self.chance))
            chance = {
                "function": f"{self.chance.__module__}.{self.chance.__qualname__}",
                "sha256": hashlib.sha256(code.encode()).hexdigest(),
            }
        return {"ranx": self.ranx, "cutoff": self.cutoff, "chance": chance}


# How every value is shown (report.md, `mdcr evaluate`, `mdcr show`): metric x 100 with one
# decimal, under its table label (``MAP``, ``nDCG``, ``R@30``; ``R@5`` on MDCR).
PERCENT = 100.0
DIGITS = 1


def percent(value: float) -> str:
    """``value`` as shown: x 100 with :data:`DIGITS` decimals (``0.2756`` -> ``27.6``)."""
    return f"{value * PERCENT:.{DIGITS}f}"


def _check_measure(measure: Measure) -> None:
    """A malformed kind or cut-off is refused (one line)."""
    if not _KIND.match(measure.kind):
        raise ConfigError(
            f"measure kind {measure.kind!r}: use lower-case letters, digits and '_' "
            "(it is written as kind@k)"
        )
    if measure.cutoff not in ("depth", "k"):
        raise ConfigError(f"measure '{measure.kind}': cutoff must be 'depth' or 'k'")


# Every measure by kind: the built-in ones registered at the end of this module, others by
# the modules of the entry-point group mdcr.measures or at run time.
MEASURES: Registry[Measure] = Registry(
    "measure", key=lambda measure: measure.kind, group="mdcr.measures", check=_check_measure
)


def measures() -> tuple[Measure, ...]:
    """The registered measures in table order."""
    return tuple(sorted(MEASURES.items().values(), key=lambda m: (m.order, m.kind)))


def kinds() -> tuple[str, ...]:
    return tuple(m.kind for m in measures())


def get(kind: str, where: str = "metric") -> Measure:
    """The measure of a config's kind (``map``); unknown: a ConfigError naming ``where``."""
    m = MEASURES.items().get(kind)
    if m is None:
        raise ConfigError(f"{where}: unknown measure {kind!r}; valid: {', '.join(kinds())}")
    return m


def parse(name: str) -> tuple[Measure, int | None]:
    """(measure, cut-off) of a stored name: ``recall@30``; ``map`` (a whole list) gives None.

    A name that no registered measure has is an InputDataError listing the valid forms."""
    match = _NAME.match(name)
    m = MEASURES.items().get(match.group(1)) if match else None
    if match is None or m is None or (match.group(2) is None and m.cutoff == "k"):
        forms = ", ".join(f"{x.kind}@N" if x.cutoff == "k" else f"{x.kind}[@N]" for x in measures())
        raise InputDataError(f"unknown measure name '{name}'; registered: {forms}")
    return m, (None if match.group(2) is None else int(match.group(2)))


def label(name: str) -> str:
    """The paper's column label of a stored name: ``MAP``, ``nDCG``, ``R@30``."""
    m, k = parse(name)
    return m.label_at(k)


def shown_name(name: str) -> str:
    """What a stored or config name is printed as: its table label (``map@500`` and
    ``map`` -> ``MAP``, ``recall@30`` -> ``R@30``); a name no measure has is kept."""
    try:
        m, k = parse(name)
    except InputDataError:
        kind = MEASURES.items().get(name)  # a config kind: recall's cut-off is unknown here
        return name if kind is None else kind.label
    return m.label_at(k)


def per_query_label(name: str) -> str:
    """The label of one query's value: ``AP`` for MAP; the table label otherwise."""
    m, k = parse(name)
    return m.per_query_label or m.label_at(k)


def sort_key(name: str) -> tuple[int, str, int]:
    """Table order: MAP, nDCG, R@k (then measures registered later), by cut-off."""
    m, k = parse(name)
    return m.order, m.kind, -1 if k is None else k


def names(config_kinds: Sequence[str], depth: int, k: int, where: str = "metric") -> list[str]:
    """Stored names of config kinds: ``depth``-cut measures at ``depth``, the others at ``k``."""
    found = [get(kind, where) for kind in config_kinds]
    return [m.name(m.cutoff_of(depth, k)) for m in found]


def expected(name: str, n: int, m: int, r: int) -> float | None:
    """The expectation of ``name`` under a random ranking (None: the measure has none)."""
    measure, k = parse(name)
    if measure.chance is None:
        return None
    return measure.chance(n, m, r, n if k is None else k)


def definitions(config_kinds: Iterable[str]) -> dict[str, Any]:
    """The definitions of the measures registered at run time among ``config_kinds``, for a
    stage's identity (empty for the built-in ones)."""
    added = {k: get(k).definition() for k in sorted(set(config_kinds)) if k not in BUILT_IN}
    return {"measures": added} if added else {}


MAP = MEASURES.register(
    Measure(
        kind="map",
        mteb="map",
        label="MAP",
        cutoff="depth",
        ranx="map",
        pytrec_eval="map_cut_{k}",
        pytrec_eval_whole="map",
        per_query_label="AP",
        chance=expected_ap,
        order=0,
    )
)
NDCG = MEASURES.register(
    Measure(
        kind="ndcg",
        mteb="ndcg",
        label="nDCG",
        cutoff="depth",
        ranx="ndcg",
        pytrec_eval="ndcg_cut_{k}",
        pytrec_eval_whole="ndcg",
        chance=expected_ndcg,
        order=1,
    )
)
RECALL = MEASURES.register(
    Measure(
        kind="recall",
        mteb="recall",
        label="R",
        cutoff="k",
        ranx="recall",
        pytrec_eval="recall_{k}",
        chance=expected_recall,
        order=2,
    )
)
BUILT_IN = frozenset(MEASURES)

# The paper's measures (section 3: MAP, nDCG at depth 500 and R@30; section 4.2, MDCR:
# MAP, nDCG over the whole candidate list and R@5), as config kinds and stored names.
PAPER_KINDS: tuple[str, ...] = (MAP.kind, NDCG.kind, RECALL.kind)
PAPER_NAMES: tuple[str, ...] = tuple(names(PAPER_KINDS, DEPTH, RECALL_K))
MDCR_NAMES: tuple[str, ...] = tuple(
    get(kind).name(None if get(kind).cutoff == "depth" else MDCR_RECALL_K) for kind in PAPER_KINDS
)
