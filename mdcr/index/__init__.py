"""Retrieval: runs of the top candidates per query in every pool. Exact dense search
(``search``: :mod:`.dense` over :mod:`.exact` and its backends), BM25 as the paper runs it
(:mod:`.bm25` on :mod:`.lucene`, tuned by the exact :mod:`.sweep`), runs fused
(:mod:`.fusion`), and the run files they all write (:mod:`.runs`). Scoring lives in
:mod:`mdcr.scoring`; the two meet only through the measures."""
