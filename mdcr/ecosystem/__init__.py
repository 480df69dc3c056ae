"""mdcr beside the tools of the field: BEIR's file layout, MTEB's tasks, models and result
files (docs/ecosystem.md).

- :mod:`.beir.layout`: one BEIR folder (corpus, queries, qrels, candidate lists) that
  BEIR's ``GenericDataLoader`` and MTEB's retrieval loader both read;
- :mod:`.beir.export`: a pools output or an MDCR benchmark written as such folders
  (``mdcr export --format beir``);
- :mod:`.beir.importer`: the stage ``beir-import``, a BEIR folder as pools;
- :mod:`.mteb_results`: a scored retriever as MTEB result files (``mdcr export --format
  mteb-results``).

MTEB and BEIR themselves are the ``ecosystem`` extra, imported only where used.
"""
