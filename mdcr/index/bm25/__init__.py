"""BM25 as the paper runs it: the ``bm25-tune`` and ``bm25`` stages and their pool data."""
