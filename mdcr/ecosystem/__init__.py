"""mdcr beside the tools of the field: BEIR's file layout, MTEB's tasks, models and result
files (docs/ecosystem.md).

- :mod:`.beir_layout`: one BEIR folder (corpus, queries, qrels, candidate lists) that
  BEIR's ``GenericDataLoader`` and MTEB's retrieval loader both read;
- :mod:`.beir_export`: a pools output or an MDCR benchmark written as such folders;
- :mod:`.beir_import`: the stage ``beir-import``, a BEIR folder as pools;
- :mod:`.mteb_results`: a scored retriever as MTEB result files.

MTEB and BEIR themselves are the ``ecosystem`` extra, imported only where used.
"""
