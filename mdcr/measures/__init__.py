"""Measures: one typed, registered entry per measure (``registry.py``), their values
computed with ranx (``compute.py``) and their expectation under a random ranking
(``chance.py``). A core package: it imports only mdcr's core modules (errors, paper), so
every stage that scores (``index`` for BM25 tuning, ``eval``, ``benchmark``) uses the
same entries without importing one another."""
