"""The ``synth`` stage: a synthetic S2ORC corpus (config, latent graph, text)."""
