"""``mdcr explore --static DIR``: the pages of one setup written as files, to share and
open offline.

The export holds the overview (``index.html``), the setup's queries page with every row
(sorted and filtered in the browser by a few lines of inline JavaScript), its two
retrievers' scatter, and one page per query and pool with the top k of every retriever
(``query-<n>.html``). Links to what the export does not hold (another setup, another
measure, another k) are left out. Every file is the server's page, rendered from the same
templates and data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mdcr.core.errors import ConfigError
from mdcr.explore.pages import DEFAULT_K, Explorer


@dataclass
class StaticLinks:
    """The export's files: one setup, one measure, baseline and versus, one k."""

    setup: str
    metric: str
    baseline: str
    versus: str
    k: int
    units: dict[tuple[str, str], int] = field(default_factory=dict)

    def overview(self) -> str:
        return "index.html"

    def queries(self, setup: str, **params: Any) -> str | None:
        if setup != self.setup or params.get("metric", self.metric) != self.metric:
            return None
        if params.get("page", 1) != 1:
            return None
        return f"queries-{setup}.html"

    def query(self, pool_id: str, query_id: str, **params: Any) -> str | None:
        unit = self.units.get((pool_id, query_id))
        if unit is None or int(params.get("k", self.k)) != self.k:
            return None
        return f"query-{unit}.html"

    def scatter(self, setup: str, **params: Any) -> str | None:
        pair = (params.get("a", self.baseline), params.get("b", self.versus))
        if setup != self.setup or pair != (self.baseline, self.versus):
            return None
        if params.get("metric", self.metric) != self.metric:
            return None
        return f"scatter-{setup}.html"


def write_static(explorer: Explorer, out: Path, setup_key: str | None, k: int = DEFAULT_K
                 ) -> list[str]:  # fmt: skip
    """Write the pages of ``setup_key`` (default: the result's first setup) into ``out``;
    return the lines the command prints."""
    from mdcr.explore.app import jinja_environment

    if out.exists() and not out.is_dir():
        raise ConfigError(f"explore --static '{out}' is a file; give a folder")
    result = explorer.result
    explorer.reader.wait_for_copies()  # every query page follows: read from the copies
    key = setup_key or next(iter(result.setups))
    setup = explorer.setup(key)
    args = {"k": str(k)}
    first = explorer.queries(key, args, NoLinks(), paged=False)["state"]
    links = StaticLinks(key, first["metric"], first["baseline"], first["versus"], k)
    units = result.setup_units(key)
    for i in units:
        row = result.units.iloc[int(i)]
        links.units[(str(row["pool_id"]), str(row["query_id"]))] = int(i)
    env = jinja_environment()
    out.mkdir(parents=True, exist_ok=True)

    def write(name: str, template: str, page: dict[str, Any]) -> None:
        html = env.get_template(template).render(page=page, static=True, home=links.overview())
        (out / name).write_text(html, encoding="utf-8")

    write("index.html", "overview.html", explorer.overview(links))
    write(f"queries-{key}.html", "queries.html", explorer.queries(key, args, links, paged=False))
    scatter = {"a": first["baseline"], "b": first["versus"], "metric": first["metric"]}
    write(f"scatter-{key}.html", "scatter.html", explorer.scatter(key, scatter, links))
    for (pool_id, query_id), unit in links.units.items():
        write(f"query-{unit}.html", "query.html", explorer.query(pool_id, query_id, args, links))
    return [
        f"wrote {len(links.units) + 3} pages for {setup.label} (top {k}) into {out}",
        f"open {out / 'index.html'}",
    ]


class NoLinks:
    """Links to nothing: for reading a page's state before the export's links exist."""

    def overview(self) -> None:
        return None

    def queries(self, setup: str, **params: Any) -> None:
        return None

    def query(self, pool_id: str, query_id: str, **params: Any) -> None:
        return None

    def scatter(self, setup: str, **params: Any) -> None:
        return None
