"""The prefilter's input formats: the registry and one module per layout (S2ORC, S2AG)."""
