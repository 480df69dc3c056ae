"""``mdcr evaluate``: the request (request.py) and the pools-mode pipelines (pools.py);
the benchmark-mode pipelines are :mod:`mdcr.evaluation.benchmark`."""
