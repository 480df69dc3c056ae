"""Tests of ``mdcr evaluate`` and ``mdcr.evaluate``: both modes, their inputs, names, origin
and summary."""
