"""The exact BM25 grid sweep, equal to Lucene: the grid, the numba kernel, the torch kernel."""
