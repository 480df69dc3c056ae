"""The corpus: S2ORC or S2AG records in, the prefiltered papers and citations out (paper
section 3).

- :mod:`.formats`: the input formats the prefilter reads, one registered module per layout;
- :mod:`.prefilter`: the ``prefilter`` stage, the paper's rules over any format;
- :mod:`.synth`: the ``synth`` stage, a synthetic corpus in either layout;
- :mod:`.jsonl`: JSON-lines shards read, their bad files and lines named.
"""
