"""The ``pools`` stage (paper sections 3.1 and 3.2): queries of the query year, and for each
setup, split and repetition a seeded candidate pool holding every cited paper, with its
qrels (:mod:`.build`; queries, sampling, seeds and the corpus tables beside it)."""
