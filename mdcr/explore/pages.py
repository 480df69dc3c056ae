"""The pages as data: the overview, the queries of one setup, one query, and two
retrievers' per-query values. The server renders them with templates and answers them as
JSON; the static export writes them as files. A page names other pages through a
:class:`Links` object (URLs of the server, or the files of an export).

Every number comes from the store: per-query values as ``mdcr export --per-query`` writes
them, differences as a retriever's value minus the baseline's, rankings as the runs hold
them, positives as the qrels. Only the rank correlation of two top-k lists is computed
here (:mod:`mdcr.explore.contrast`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from mdcr.core.errors import MdcrError
from mdcr.explore.contrast import CONTRAST, CONTRAST_LABEL, CONTRAST_SOURCE, weighted_tau_codes
from mdcr.explore.words import pieces, shared_in, words

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from mdcr.explore.reads import Reader, TopLists
    from mdcr.explore.result import Result, Setup

DEFAULT_K = 10
MAX_K = 500
PAGE_ROWS = 100
_CACHED_CONTRASTS = 16  # (setup, baseline, versus, k): a setup's rank correlations kept


class NotFound(MdcrError):
    """A request names something the result does not hold (a setup, a query, a
    retriever, a measure) or a value out of range: a 404 page with this one line."""


class Links(Protocol):
    """Where the pages are: the server's URLs, or an export's files (None: not there)."""

    def overview(self) -> str | None: ...

    def queries(self, setup: str, **params: Any) -> str | None: ...

    def query(self, pool_id: str, query_id: str, **params: Any) -> str | None: ...

    def scatter(self, setup: str, **params: Any) -> str | None: ...


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA."""
    import pandas as pd

    return value is None or bool(pd.isna(value))


def _number(value: Any) -> float | None:
    return None if _missing(value) else float(value)


def _int(value: Any) -> int | None:
    return None if _missing(value) else int(value)


def _text(value: Any) -> str | None:
    return None if _missing(value) else str(value)


def _codes(a: TopLists, b: TopLists, units: int) -> tuple[np.ndarray, np.ndarray]:
    """Two retrievers' top lists as integer codes (units x k each, -1: no paper), one
    code per paper id."""
    import numpy as np
    import pyarrow as pa

    found = pa.concat_arrays([a.ids, b.ids]).dictionary_encode().indices
    codes = found.to_numpy(zero_copy_only=False).astype(np.int64)
    out = []
    for lists, part in ((a, codes[: len(a.ids)]), (b, codes[len(a.ids) :])):
        placed = np.full(units * lists.k, -1, dtype=np.int64)
        placed[lists.slots] = part
        out.append(placed.reshape(units, lists.k))
    return out[0], out[1]


class Explorer:
    """The pages of one opened result, read through ``reader``."""

    def __init__(self, result: Result, reader: Reader) -> None:
        self.result = result
        self.reader = reader
        self._contrasts: OrderedDict[tuple[str, str, str, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    # -- arguments ------------------------------------------------------------------------

    def setup(self, key: str) -> Setup:
        found = self.result.setups.get(key)
        if found is None:
            valid = ", ".join(self.result.setups)
            raise NotFound(f"no setup '{key}' in this result; its setups: {valid}")
        return found

    def _choice(self, setup: Setup, args: Mapping[str, str], name: str, valid: tuple[str, ...],
                default: str) -> str:  # fmt: skip
        value = args.get(name) or default
        if value not in valid:
            raise NotFound(
                f"no {name} '{value}' in {setup.label}; valid: {', '.join(valid) or 'none'}"
            )
        return value

    def _k(self, args: Mapping[str, str]) -> int:
        raw = args.get("k") or str(DEFAULT_K)
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_K:
            raise NotFound(f"k '{raw}' is not a whole number from 1 to {MAX_K}")
        return int(raw)

    def _whole(self, args: Mapping[str, str], name: str) -> int | None:
        raw = args.get(name) or ""
        if not raw:
            return None
        if not raw.lstrip("-").isdigit():
            raise NotFound(f"{name} '{raw}' is not a whole number")
        return int(raw)

    def _compared(self, setup: Setup, args: Mapping[str, str]) -> tuple[str, str, str]:
        """(measure, baseline, versus) of a queries or scatter page."""
        if not setup.retrievers:
            raise NotFound(f"{setup.label} has no retriever")
        metric = self._choice(setup, args, "metric", setup.metrics, setup.metrics[0])
        base = self.result.baseline
        baseline = self._choice(
            setup, args, "baseline", setup.retrievers,
            base if base in setup.retrievers else setup.retrievers[0],
        )  # fmt: skip
        others = [r for r in setup.retrievers if r != baseline] or [baseline]
        versus = self._choice(setup, args, "versus", setup.retrievers, others[0])
        return metric, baseline, versus

    # -- the overview -----------------------------------------------------------------------

    def overview(self, links: Links) -> dict[str, Any]:
        from mdcr.explore.overview import overview

        def link(setup: str, retriever: str, metric: str, field: str | None) -> str | None:
            base = self.result.baseline
            params: dict[str, Any] = {"metric": metric}
            if retriever != base and base in self.setup(setup).retrievers:
                params.update(versus=retriever, sort=f"diff:{retriever}", order="desc")
            else:
                params.update(sort=f"value:{retriever}", order="desc")
            if field:
                params["field"] = field
            return links.queries(setup, **params)

        page = overview(self.result, link)
        page["setups"] = [self._setup_entry(s, links) for s in self.result.setups.values()]
        return {**self._head(), **page}

    def _head(self) -> dict[str, Any]:
        r = self.result
        return {
            "title": r.title,
            "stage": r.stage,
            "fingerprint": r.fingerprint,
            "baseline": r.baseline,
        }

    def _setup_entry(self, s: Setup, links: Links) -> dict[str, Any]:
        others = [r for r in s.retrievers if r != self.result.baseline]
        a = self.result.baseline if self.result.baseline in s.retrievers else s.retrievers[0]
        return {
            "key": s.key,
            "label": s.label,
            "queries": s.queries,
            "pools": len(s.pool_ids),
            "retrievers": list(s.retrievers),
            "metrics": list(s.metrics),
            "href": links.queries(s.key),
            "scatter": links.scatter(s.key, a=a, b=others[0]) if others else None,
        }

    # -- the queries of a setup ---------------------------------------------------------------

    def queries(self, key: str, args: Mapping[str, str], links: Links, *, paged: bool = True
                ) -> dict[str, Any]:  # fmt: skip
        """Every query of the setup (filtered, sorted; one page of them when ``paged``)."""
        setup = self.setup(key)
        metric, baseline, versus = self._compared(setup, args)
        k = self._k(args)
        frame = self._filtered(setup, self._frame(setup, metric, baseline), args)
        sort_keys = self._sort_keys(setup, baseline)
        default = f"diff:{versus}" if versus != baseline else f"value:{baseline}"
        sort = args.get("sort") or default
        if sort not in sort_keys:
            raise NotFound(f"no sort '{sort}'; valid: {', '.join(sort_keys)}")
        order = args.get("order") or "desc"
        if order not in ("asc", "desc"):
            raise NotFound(f"no order '{order}'; valid: asc, desc")
        # The rank correlation of every row when it sorts them or every row is shown (a
        # setup's, kept for its next pages); else of the page's rows only.
        every_row = sort == CONTRAST or not paged
        if every_row:
            every = self._setup_contrast(setup, baseline, versus, k, frame["unit"].to_numpy())
            frame = frame.assign(**{CONTRAST: every})
        frame = frame.sort_values(
            [sort, "query_id", "pool_id"],
            ascending=[order == "asc", True, True],
            na_position="last",
            kind="stable",
        )
        total = len(frame)
        pages = max(1, -(-total // PAGE_ROWS)) if paged else 1
        page = self._whole(args, "page") or 1
        if not 1 <= page <= pages:
            raise NotFound(f"page {page} is not between 1 and {pages}")
        shown = frame.iloc[(page - 1) * PAGE_ROWS : page * PAGE_ROWS] if paged else frame
        if not every_row:
            units = shown["unit"].to_numpy()
            shown = shown.assign(**{CONTRAST: self.contrast(setup, baseline, versus, k, units)})
        state = {
            "metric": metric,
            "baseline": baseline,
            "versus": versus,
            "k": k,
            "sort": sort,
            "order": order,
            **{f: args[f] for f in ("field", "year", "pos_min", "pos_max") if args.get(f)},
        }
        others = [r for r in setup.retrievers if r != baseline]
        return {
            **self._head(),
            "setup": self._setup_entry(setup, links),
            "state": state,
            "retrievers": list(setup.retrievers),
            "others": others,
            "metrics": list(setup.metrics),
            "fields": list(setup.fields),
            "years": list(setup.years),
            "columns": self._columns(setup, state, sort_keys, links),
            "rows": [
                self._row(setup, {str(c): v for c, v in r.items()}, others, state, links)
                for r in shown.to_dict("records")
            ],
            "total": total,
            "page": page,
            "pages": pages,
            "page_links": {
                "prev": links.queries(key, **{**state, "page": page - 1}) if page > 1 else None,
                "next": links.queries(key, **{**state, "page": page + 1}) if page < pages else None,
            },
            "scatter": links.scatter(key, a=baseline, b=versus, metric=metric),
            "contrast_source": CONTRAST_SOURCE,
        }

    def _frame(self, setup: Setup, metric: str, baseline: str) -> pd.DataFrame:
        """One row per unit of the setup: its facts, each retriever's value and each
        difference from the baseline."""
        idx = self.result.setup_units(setup.key)
        units = self.result.units.iloc[idx]
        values = self.result.values[metric].iloc[idx]
        frame = units[["pool_id", "query_id", "rep", "field", "year", "n_positives", "title"]]
        frame = frame.rename(columns={"n_positives": "positives"}).copy()
        frame["unit"] = idx
        for r in setup.retrievers:
            v = values[r].to_numpy() if r in values else float("nan")
            frame[f"value:{r}"] = v
        base = frame[f"value:{baseline}"]
        for r in setup.retrievers:
            if r != baseline:
                frame[f"diff:{r}"] = frame[f"value:{r}"] - base
        frame["query"] = frame["query_id"]
        return frame

    def _filtered(self, setup: Setup, frame: pd.DataFrame, args: Mapping[str, str]
                  ) -> pd.DataFrame:  # fmt: skip
        field = args.get("field")
        if field:
            if field not in setup.fields:
                raise NotFound(
                    f"no field '{field}' in {setup.label}; valid: {', '.join(setup.fields)}"
                )
            frame = frame[frame["field"] == field]
        year = self._whole(args, "year")
        if year is not None:
            frame = frame[frame["year"] == year]
        low, high = self._whole(args, "pos_min"), self._whole(args, "pos_max")
        if low is not None:
            frame = frame[frame["positives"] >= low]
        if high is not None:
            frame = frame[frame["positives"] <= high]
        return frame

    def _sort_keys(self, setup: Setup, baseline: str) -> list[str]:
        keys = ["query", "title", "rep", "field", "year", "positives"]
        keys += [f"value:{r}" for r in setup.retrievers]
        keys += [f"diff:{r}" for r in setup.retrievers if r != baseline]
        return [*keys, CONTRAST]

    def _columns(self, setup: Setup, state: dict[str, Any], keys: list[str], links: Links
                 ) -> list[dict[str, Any]]:  # fmt: skip
        labels = {
            "query": "query", "title": "title", "rep": "rep", "field": "field",
            "year": "year", "positives": "positives",
            CONTRAST: f"{CONTRAST_LABEL}@{state['k']} {state['baseline']}/{state['versus']}",
        }  # fmt: skip
        out = []
        for key in keys:
            kind, _, name = key.partition(":")
            label = labels.get(key) or (
                name if kind == "value" else f"{name} − {state['baseline']}"
            )
            flip = "asc" if state["sort"] == key and state["order"] == "desc" else "desc"
            out.append(
                {
                    "key": key,
                    "label": label,
                    "kind": kind if kind in ("value", "diff") else key,
                    "numeric": kind in ("value", "diff", CONTRAST, "rep", "year", "positives"),
                    "sorted": state["order"] if state["sort"] == key else None,
                    "href": links.queries(
                        setup.key, **{**state, "sort": key, "order": flip, "page": 1}
                    ),
                }
            )
        return out

    def _row(self, setup: Setup, r: dict[str, Any], others: list[str], state: dict[str, Any],
             links: Links) -> dict[str, Any]:  # fmt: skip
        values = {name: _number(r[f"value:{name}"]) for name in setup.retrievers}
        diffs = {name: _number(r[f"diff:{name}"]) for name in others}
        return {
            "pool_id": str(r["pool_id"]),
            "query_id": str(r["query_id"]),
            "rep": _int(r["rep"]),
            "field": _text(r["field"]),
            "year": _int(r["year"]),
            "positives": _int(r["positives"]),
            "title": _text(r["title"]) or "",
            "values": values,
            "diffs": diffs,
            CONTRAST: _number(r[CONTRAST]),
            "href": links.query(str(r["pool_id"]), str(r["query_id"]), k=state["k"]),
        }

    def contrast(self, setup: Setup, a: str, b: str, k: int, units: np.ndarray | None = None
                 ) -> np.ndarray:  # fmt: skip
        """τ_h of a's and b's top k for each of ``units`` (rows of the result's units, of
        the setup; None: all of the setup's, kept for the setup's next pages), NaN where
        either did not rank the query."""
        import numpy as np

        if units is None:
            return self._setup_contrast(setup, a, b, k, None)
        with self._lock:
            kept = self._contrasts.get((setup.key, a, b, k))
        if kept is not None:
            return kept[np.searchsorted(self.result.setup_units(setup.key), units)]
        taus = np.full(len(units), np.nan)
        lists_a = self.reader.top_lists(setup, a, k, units)
        lists_b = self.reader.top_lists(setup, b, k, units)
        if lists_a is None or lists_b is None:
            return taus
        both = lists_a.ranked & lists_b.ranked
        codes_a, codes_b = _codes(lists_a, lists_b, len(units))
        taus[both] = weighted_tau_codes(codes_a[both], codes_b[both])
        return taus

    def _setup_contrast(self, setup: Setup, a: str, b: str, k: int, units: np.ndarray | None
                        ) -> np.ndarray:  # fmt: skip
        """:meth:`contrast` of every unit of the setup (computed once per setup, pair and
        k; the last few kept), for ``units`` (None: all, in the setup's order)."""
        import numpy as np

        key = (setup.key, a, b, k)
        every = self.result.setup_units(setup.key)
        with self._lock:
            found = self._contrasts.get(key)
            if found is not None:
                self._contrasts.move_to_end(key)
        if found is None:
            found = self.contrast(setup, a, b, k, every)
            with self._lock:
                self._contrasts[key] = found
                while len(self._contrasts) > _CACHED_CONTRASTS:
                    self._contrasts.popitem(last=False)
        return found if units is None else found[np.searchsorted(every, units)]

    # -- one query ----------------------------------------------------------------------------

    def query(self, pool_id: str, query_id: str, args: Mapping[str, str], links: Links
              ) -> dict[str, Any]:  # fmt: skip
        """One query in one pool: its text, every retriever's top k side by side, where
        each positive landed, its values, and its other repetitions and setups."""
        k = self._k(args)
        unit = self.result.unit(pool_id, query_id)
        if unit is None:
            raise NotFound(f"no query '{query_id}' in pool '{pool_id}' in this result")
        row = self.result.units.iloc[unit]
        setup = self.setup(str(row["setup_key"]))
        rankings = self.reader.rankings(setup, unit)
        positives = self.reader.positives(setup, unit)
        ids = {query_id, *positives}
        for ranked in rankings.values():
            ids.update(ranked.paper_ids[:k] if ranked else [])
        papers = self.reader.papers(setup, sorted(ids))
        own = papers.get(query_id, {"title": _text(row["title"]) or "", "abstract": ""})
        query_words = words(f"{own['title']} {own['abstract']}")
        positive = set(positives)
        columns = []
        for name, ranked in rankings.items():
            columns.append(self._ranking_column(name, ranked, k, papers, positive, query_words))
        return {
            **self._head(),
            "setup": self._setup_entry(setup, links),
            "pool_id": pool_id,
            "query_id": query_id,
            "rep": _int(row["rep"]),
            "field": _text(row["field"]),
            "year": _int(row["year"]),
            "citations": _int(row["citations"]),
            "n_positives": _int(row["n_positives"]),
            "title": own["title"],
            "abstract": own["abstract"],
            "k": k,
            "more": [
                {"k": n, "href": links.query(pool_id, query_id, k=n)}
                for n in (10, 20, 50, 100, MAX_K)
                if n != k
            ],
            "values": self._values(setup, unit),
            "columns": columns,
            "positives": self._landed(positives, rankings, papers, query_words),
            "occurrences": self._occurrences(query_id, unit, k, links),
            "queries_href": links.queries(setup.key),
        }

    def _ranking_column(self, name: str, ranked: Any, k: int, papers: dict[str, dict[str, Any]],
                        positive: set[str], query_words: set[str]) -> dict[str, Any]:  # fmt: skip
        if ranked is None:
            return {"retriever": name, "stored": False, "depth": 0, "items": []}
        items = []
        for i, (paper, score) in enumerate(zip(ranked.paper_ids[:k], ranked.scores, strict=False)):
            info = papers.get(paper, {})
            title = info.get("title", "")
            title_pieces = pieces(title, query_words)
            abstract_pieces = pieces(info.get("abstract", ""), query_words)
            items.append(
                {
                    "rank": i + 1,
                    "paper_id": paper,
                    "score": score,
                    "title": title,
                    "pieces": title_pieces,
                    "abstract_pieces": abstract_pieces,
                    "year": info.get("year"),
                    "positive": paper in positive,
                    "shared": shared_in(title_pieces, abstract_pieces),
                }
            )
        return {
            "retriever": name,
            "stored": True,
            "depth": ranked.depth,
            "items": items,
            "positives_in_top_k": sum(item["positive"] for item in items),
        }

    def _values(self, setup: Setup, unit: int) -> list[dict[str, Any]]:
        out = []
        for m in setup.metrics:
            stored = self.result.values[m].iloc[unit]
            out.append(
                {
                    "metric": m,
                    "values": {
                        r: _number(stored[r]) if r in stored else None for r in setup.retrievers
                    },
                }
            )
        return out

    def _landed(self, positives: list[str], rankings: dict[str, Any],
                papers: dict[str, dict[str, Any]], query_words: set[str]
                ) -> list[dict[str, Any]]:  # fmt: skip
        """Each positive with its rank in each ranking (None: not in it), best first."""
        ranks = {r: ranked.rank_of() for r, ranked in rankings.items() if ranked is not None}
        depth = {r: ranked.depth for r, ranked in rankings.items() if ranked is not None}
        out = []
        for paper in positives:
            info = papers.get(paper, {})
            landed = {r: ranks[r].get(paper) for r in ranks}
            found = [v for v in landed.values() if v is not None]
            out.append(
                {
                    "paper_id": paper,
                    "title": info.get("title", ""),
                    "pieces": pieces(info.get("title", ""), query_words),
                    "year": info.get("year"),
                    "ranks": landed,
                    "depths": depth,
                    "best": min(found) if found else None,
                }
            )
        return sorted(out, key=lambda p: (p["best"] is None, p["best"] or 0, p["paper_id"]))

    def _occurrences(self, query_id: str, unit: int, k: int, links: Links) -> list[dict[str, Any]]:
        out = []
        for i in self.result.occurrences(query_id):
            row = self.result.units.iloc[i]
            setup = self.result.setups[str(row["setup_key"])]
            rep = _int(row["rep"])
            out.append(
                {
                    "label": setup.label + (f", repetition {rep}" if rep is not None else ""),
                    "pool_id": str(row["pool_id"]),
                    "current": i == unit,
                    "href": None if i == unit else links.query(str(row["pool_id"]), query_id, k=k),
                }
            )
        return out

    # -- two retrievers -----------------------------------------------------------------------

    def scatter(self, key: str, args: Mapping[str, str], links: Links) -> dict[str, Any]:
        """Each query's value by retriever ``a`` (x) against ``b`` (y), one measure."""
        setup = self.setup(key)
        metric, baseline, versus = self._compared(setup, args)
        a = self._choice(setup, args, "a", setup.retrievers, baseline)
        b = self._choice(setup, args, "b", setup.retrievers, versus)
        idx = self.result.setup_units(key)
        units = self.result.units.iloc[idx]
        values = self.result.values[metric].iloc[idx]
        points: list[dict[str, Any]] = []
        for (_, u), x, y in zip(units.iterrows(), values[a], values[b], strict=True):
            if x != x or y != y:
                continue
            points.append(
                {
                    "pool_id": str(u["pool_id"]),
                    "query_id": str(u["query_id"]),
                    "title": _text(u["title"]) or "",
                    "rep": _int(u["rep"]),
                    "x": float(x),
                    "y": float(y),
                    "href": links.query(str(u["pool_id"]), str(u["query_id"])),
                }
            )
        return {
            **self._head(),
            "setup": self._setup_entry(setup, links),
            "metric": metric,
            "metrics": list(setup.metrics),
            "retrievers": list(setup.retrievers),
            "a": a,
            "b": b,
            "points": points,
            "above": sum(p["y"] > p["x"] for p in points),
            "below": sum(p["y"] < p["x"] for p in points),
            "equal": sum(p["y"] == p["x"] for p in points),
            "queries_href": links.queries(key, metric=metric, baseline=a, versus=b),
        }
