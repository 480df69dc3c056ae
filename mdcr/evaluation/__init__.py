"""``mdcr evaluate`` and :func:`mdcr.evaluate`, one package: the request (request.py), the
pools mode (pools.py), the benchmark mode (benchmark.py), the mode switch (run.py) and the
one result object both faces use (result.py: frames, printout, scores files).

(Named ``evaluation``, not ``evaluate``: ``mdcr.evaluate`` is the API's function, and a
subpackage of that name would replace it on ``mdcr`` once imported.)"""
