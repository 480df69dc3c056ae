"""The ``prefilter`` stage: its config and rules, the per-file scan, the outputs."""
