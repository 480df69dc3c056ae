"""The catalog in words: ``mdcr ls``'s table, ``mdcr show``'s description of one output
and ``mdcr gc``'s list (the entries themselves: :mod:`mdcr.catalog.entries`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

from mdcr.catalog.entries import (
    DAMAGED,
    MADE,
    RESULT_STAGES,
    RUNNING,
    Entry,
    Garbage,
    Verified,
    index_summary,
    scan,
    users,
)
from mdcr.core.errors import InputDataError
from mdcr.core.fingerprints import canonical_json
from mdcr.core.home import Home
from mdcr.core.stage import REUSE_WARNINGS, UNREPRODUCIBLE
from mdcr.measures.registry import percent, shown_name, sort_key

_PARAMS_WIDTH = 48
_NAME_WIDTH = 24
_WIDTH = 100


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def _short(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(_short(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "none"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_short(v)}" for k, v in value.items()) + "}"
    return str(value)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


@functools.cache
def _defaults(stage: str) -> dict[str, str]:
    """A stage's parameters at their default, as canonical JSON (empty: unknown stage)."""
    from mdcr.core.config import config_fields, field_kind, has_default, recorded_default
    from mdcr.core.stage import stages

    spec = stages().get(stage)
    if spec is None:
        return {}
    out = {}
    for f in config_fields(spec.config):
        if field_kind(f) == "param" and has_default(f):
            out[f.name] = canonical_json(recorded_default(f))
    return out


def main_params(entry: Entry) -> str:
    """The parameters that tell this output from others of its stage: those not at their
    default (and BM25's k1 and b, when bm25-tune chose them)."""
    if entry.is_index:
        n = entry.manifest.get("n_docs")
        return f"n_docs={n}" if n is not None else ""
    defaults = _defaults(entry.stage)
    items = [
        f"{k}={_short(v)}"
        for k, v in sorted(entry.params.items())
        if defaults.get(k) != canonical_json(v)
    ]
    if entry.stage == "bm25" and "params_from" in entry.info:
        items.append(f"k1={_short(entry.info.get('k1'))} b={_short(entry.info.get('b'))} (tuned)")
    return " ".join(items)


def store_line(home: Home, entry: Entry | None = None) -> str:
    """``store: PATH (how it was found)``, the line every command prints; for ``mdcr
    show`` of a folder of another store, that store."""
    if entry is not None and entry.path.parent.parent != home.path:
        return f"store: {entry.path.parent.parent} (the store holding the folder given)"
    return f"store: {home.describe()}"


def ls_rows(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """One row per entry: what ``mdcr ls`` prints (``mdcr.ls`` returns them as a table)."""
    return [
        {
            "stage": e.stage,
            "fingerprint": e.fingerprint,
            "name": ",".join(e.names()),
            "params": main_params(e),
            "date": e.date,
            "bytes": e.bytes,
            "state": e.state,
            "path": str(e.path),
        }
        for e in entries
    ]


def ls_lines(
    entries: list[Entry], *, fold_indexes: bool, stage: str | None = None, retriever: str = ""
) -> list[str]:
    """The ``mdcr ls`` table of ``entries`` (those of ``stage``, about ``retriever``);
    with ``fold_indexes`` the Lucene indexes are one line."""
    shown = [e for e in entries if not (fold_indexes and e.is_index)]
    rows = [
        [
            r["stage"],
            r["fingerprint"],
            _cut(r["name"], _NAME_WIDTH),
            _cut(r["params"], _PARAMS_WIDTH),
            r["date"],
            human_bytes(r["bytes"]),
            r["state"],
        ]
        for r in ls_rows(shown)
    ]
    head = ["STAGE", "FINGERPRINT", "NAME", "PARAMS", "DATE (UTC)", "SIZE", "STATE"]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    lines = [
        "  ".join(
            f"{c:>{w}}" if i == 5 else f"{c:<{w}}"
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in [head, *rows]
    ]
    if not rows:
        about = f" about '{retriever}'" if retriever else ""
        lines = [f"no {stage + ' ' if stage else ''}outputs{about}"]
    damaged = sum(e.state == DAMAGED for e in shown)
    if damaged:
        lines.append(
            f"{damaged} damaged output(s): files not what their manifests record (`mdcr show FP` "
            "names the file); a run that needs one builds it again"
        )
    n, nbytes = index_summary(entries)
    if fold_indexes and n:
        lines.append(
            f"lucene-index: {n} index(es), {human_bytes(nbytes)} "
            "(`mdcr ls lucene-index` lists them)"
        )
    return lines


def _wrap(label: str, items: list[str], sep: str = ", ") -> list[str]:
    """``label`` then ``items`` joined, wrapped under the label's column."""
    pad = " " * 13
    lines: list[str] = []
    line = f"  {label + ':':<11}"
    for i, item in enumerate(items):
        piece = item + (sep.rstrip() if i < len(items) - 1 else "")
        if len(line) + len(piece) + 1 > _WIDTH and line.strip() != label + ":":
            lines.append(line.rstrip())
            line = pad
        line += piece + " "
    lines.append(line.rstrip())
    return lines


def _flat(obj: Any, prefix: str = "") -> list[str]:
    if isinstance(obj, dict) and obj:
        return [item for k, v in sorted(obj.items()) for item in _flat(v, f"{prefix}{k}.")]
    return [f"{prefix[:-1]}={_cut(_short(obj), 60)}"] if prefix else []


def show_lines(entry: Entry) -> list[str]:
    """``mdcr show``: the manifest in words, and the main numbers where it has them."""
    everything = scan(entry.path.parent.parent, size=False)
    used_by = sorted({u.key for u in users(everything).get(entry.fingerprint, [])})
    m = entry.manifest
    lines = [f"{entry.key}  {entry.state}" + (f" (by {entry.holder})" if entry.holder else "")]
    lines.append(f"  {'folder:':<11}{entry.path}")
    wall = m.get("build_s") if entry.is_index else m.get("timings", {}).get("wall_s")
    made = f"{entry.date} UTC" + (f", in {wall:g} s" if isinstance(wall, int | float) else "")
    lines.append(f"  {'made:':<11}{made}; {human_bytes(entry.bytes)} on disk")
    if entry.state == DAMAGED:
        lines.append(
            f"  {'damaged:':<11}{entry.damage}: never read; a run that needs it builds it "
            "again (`mdcr gc --yes` removes it)"
        )
    if entry.state not in MADE:
        lines.append(
            "  (work in progress)"
            if entry.state == RUNNING
            else "  (no complete manifest: an interrupted run; `mdcr gc` lists it)"
        )
        return lines
    if entry.names():
        lines.append(f"  {'name:':<11}{', '.join(entry.names())}")
    warnings = [str(w) for w in entry.info.get(REUSE_WARNINGS) or []]
    for reason in entry.info.get(UNREPRODUCIBLE) or []:
        if not any(str(reason) in w for w in warnings):  # said below in full otherwise
            lines.append(f"  {'caution:':<11}not reproducible: {reason}")
    lines += [f"  {'warning:':<11}{w}" for w in warnings]
    lines += _inputs(entry, everything)
    if used_by:
        lines += _wrap("used by", used_by)
    elif entry.stage not in RESULT_STAGES:
        lines.append(f"  {'used by:':<11}no other output (`mdcr gc --dry-run` lists it)")
    if entry.is_index:
        keys = ("n_docs", "corpus", "benchmark", "lucene", "analyzer")
        lines += _wrap("index", _flat({k: m[k] for k in keys if k in m}))
        return lines
    for label, key in (("identity", "identity"), ("params", "params"), ("settings", "settings")):
        if m.get(key):
            lines += _wrap(label, _flat(m[key]))
    timings = {k: v for k, v in m.get("timings", {}).items() if k not in ("started", "wall_s")}
    if timings:
        lines += _wrap("timings", [f"{k} {v:g} s" for k, v in sorted(timings.items())])
    lines += _outputs(m.get("outputs", {}))
    numbers = numbers_lines(entry)
    if numbers:
        lines.append(f"  {'numbers:':<11}{numbers[0]}")
        lines += [" " * 13 + n for n in numbers[1:]]
    facts = _facts(entry.info)
    if facts:
        lines += _wrap("facts", facts, sep="; ")
    packages = m.get("packages", {})
    if packages:
        lines += _wrap("packages", [f"{k} {v}" for k, v in sorted(packages.items())])
    return lines


def _inputs(entry: Entry, everything: list[Entry]) -> list[str]:
    known = {e.fingerprint: e.key for e in everything if e.state in MADE}
    lines: list[str] = []
    inputs = entry.manifest.get("inputs", {}) if not entry.is_index else {}
    for name, items in sorted(inputs.items()):
        for item in items:
            fp = str(item.get("fingerprint", ""))
            what = known.get(fp) or (f"{fp} (a raw input)" if fp.startswith("raw:") else fp)
            head = "inputs:" if not lines else ""
            lines.append(f"  {head:<11}{name} = {what}  {item.get('path', '')}")
    return lines


def _outputs(outputs: dict[str, Any]) -> list[str]:
    if not outputs:
        return []
    lines = []
    for i, (name, o) in enumerate(sorted(outputs.items())):
        if i == 8:
            lines.append(" " * 13 + f"... and {len(outputs) - 8} more file(s)")
            break
        rows = f"{o['rows']:,} rows, " if o.get("rows") is not None else ""
        head = "outputs:" if i == 0 else ""
        lines.append(f"  {head:<11}{name} ({rows}{human_bytes(o.get('bytes', 0))})")
    return lines


_NUMBER_KEYS = ("means", "macro", "chosen", "counts")
_SKIP_FACTS = (*_NUMBER_KEYS, "indexes", "runs", "retriever", "retrievers", "pools")


def _facts(info: dict[str, Any]) -> list[str]:
    """The manifest's small recorded facts (scalars and short mappings)."""
    out = []
    for key, value in sorted(info.items()):
        if key in _SKIP_FACTS:
            continue
        if isinstance(value, dict) and all(not isinstance(v, dict | list) for v in value.values()):
            if 0 < len(value) <= 8:
                out.append(f"{key}: {_cut(_short(value), 90)}")
        elif isinstance(value, str | int | float | bool) or (
            isinstance(value, list) and len(value) <= 8
        ):
            out.append(f"{key}: {_cut(_short(value), 90)}")
    return out


def numbers_lines(entry: Entry) -> list[str]:
    """The output's main numbers, where its manifest has them."""
    info = entry.info
    if entry.stage == "benchmark-score" and isinstance(info.get("macro"), dict):
        return _macro_lines(info["macro"])
    if entry.stage == "score" and isinstance(info.get("means"), dict):
        return _means_lines(info["means"])
    if entry.stage == "bm25-tune" and isinstance(info.get("chosen"), dict):
        c = info["chosen"]
        metric = shown_name(str(c.get("metric")))
        return [
            f"chosen k1 {_short(c.get('k1'))}, b {_short(c.get('b'))}: {metric} "
            f"{percent(float(c.get('value', float('nan'))))} x100 "
            f"(mean over {c.get('n_pools')} val pools)"
        ]
    if entry.stage == "bm25" and "k1" in info:
        return [f"k1 {_short(info['k1'])}, b {_short(info['b'])} on {info.get('n_pools')} pools"]
    if entry.stage == "encode" and isinstance(info.get("counts"), dict):
        return [", ".join(f"{k} {v:,}" for k, v in info["counts"].items() if isinstance(v, int))]
    return []


def _order(item: tuple[str, Any]) -> tuple[int, str, int]:
    """Measures in table order (MAP, nDCG, R@k); an unknown name last."""
    try:
        return sort_key(item[0])
    except InputDataError:
        return (1 << 30, item[0], 0)


def _macro_lines(macro: dict[str, float]) -> list[str]:
    """benchmark-score: macro average over fields per retriever and split, x100 with the
    report's decimals, under the measures' table labels."""
    table: dict[tuple[str, str], dict[str, float]] = {}
    for key, value in macro.items():
        parts = key.split("|")
        if len(parts) == 4 and parts[2] == "all":
            table.setdefault((parts[0], parts[1]), {})[parts[3]] = float(value)
    lines = ["macro average over fields, x100 (as in the report):"] if table else []
    for (retriever, split), metrics in sorted(table.items()):
        cells = "  ".join(
            f"{shown_name(m)} {percent(v)}" for m, v in sorted(metrics.items(), key=_order)
        )
        lines.append(f"{retriever:<16} {split:<5} {cells}")
    return lines


def _means_lines(means: dict[str, float]) -> list[str]:
    """score: each retriever's mean over the pools of a setup and split, x100 with the
    report's decimals, under the measures' table labels."""
    sums: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for key, value in means.items():
        parts = key.split("|")
        if len(parts) != 3:
            continue
        retriever, pool_id, metric = parts
        setup, split = [*pool_id.split("/"), "", ""][:2]
        sums.setdefault((retriever, setup, split), {}).setdefault(metric, []).append(float(value))
    lines = ["mean over pools (all sizes, fields, repetitions), x100 (as in the report):"]
    lines = lines if sums else []
    for (retriever, setup, split), metrics in sorted(sums.items()):
        cells = "  ".join(
            f"{shown_name(m)} {percent(sum(v) / len(v))}"
            for m, v in sorted(metrics.items(), key=_order)
        )
        n = max(len(v) for v in metrics.values())
        lines.append(f"{retriever:<16} {setup + ' ' + split:<13} {cells}  ({n} pools)")
    return lines


def gc_lines(items: list[Garbage], *, removing: bool) -> list[str]:
    """``mdcr gc``: each entry with its size and reason, then the total."""
    if not items:
        return ["nothing to remove: every output is used by a result, and no work is left over"]
    width = max(len(g.entry.where) for g in items)
    lines = [
        f"{g.entry.where:<{width}}  {human_bytes(g.entry.bytes):>10}  {g.reason}" for g in items
    ]
    total = human_bytes(sum(g.entry.bytes for g in items))
    verb = "removing" if removing else "would remove"
    lines.append(
        f"{verb} {len(items)} folder(s), {total}" + ("" if removing else "; --yes removes them")
    )
    return lines


def verify_lines(checked: list[Verified]) -> list[str]:
    """``mdcr verify``: one line per damaged output, then what was checked."""
    lines = [
        f"{v.entry.key}  damaged: {v.damage}; a run that needs it builds it again "
        "(`mdcr gc --yes` removes it)"
        for v in checked
        if v.damage is not None
    ]
    bad = len(lines)
    total = human_bytes(sum(e.bytes for e in (v.entry for v in checked)))
    lines.append(
        f"checked {len(checked)} output(s), {total}, every file's size and sha256: "
        + (f"{bad} damaged" if bad else "all as their manifests record")
    )
    return lines


def manifest_json(entry: Entry) -> str:
    return json.dumps(entry.manifest, indent=2, sort_keys=True)
