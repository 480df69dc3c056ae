"""``mdcr explore``: a local, read-only web view of one result in the store.

A result (a report, a score, a benchmark-score or an ``mdcr evaluate`` output) is opened
once (:mod:`mdcr.explore.result`): its per-query values are the rows ``mdcr export
--per-query`` writes (:func:`mdcr.scoring.per_query_export.per_query_rows`), its tables
the report's own model (``report.json``, ``intervals.parquet``). Rankings, qrels and paper
texts are read on demand from the Parquet files the manifests list, with DuckDB
(:mod:`mdcr.explore.reads`), so memory follows the number of queries, never the pools.

The pages (:mod:`mdcr.explore.pages`: overview, the queries of a setup, one query, two
retrievers side by side) are plain data rendered by Jinja2 templates; :mod:`mdcr.explore.app`
serves them with Flask on 127.0.0.1 (JSON beside every page), and
:mod:`mdcr.explore.static` writes the same pages as files for sharing. The rank
correlation the queries page sorts by is in :mod:`mdcr.explore.contrast`, the shared words
a query page highlights in :mod:`mdcr.explore.words`.
"""
