"""The exact search's device operation: float64 dot products of (query, pool row) pairs on
the torch backend's device, where its rows are, with the host's bits.

The host (:mod:`mdcr.index.exact_kernel`) defines a score: the float16 products of a query
and a pool row, formed exactly, summed in float64 by numpy's pairwise sum. This module
gives the same bits on the device, by an exactness argument rather than by numpy's order:

- A float16 x float16 product is exact in float64 (22 significant bits).
- Let ``G`` be a power of two dividing every product of a pair (the smallest of their
  lowest set bits; ``lowbit(x_i q_i) = lowbit(x_i) lowbit(q_i)``) and ``A = sum |p_i|``.
  Every partial sum, in any order, is a multiple of ``G`` of magnitude at most ``A``; if
  ``A < 2^53 G``, each is exact in float64, so any summation order (numpy's pairwise
  sum, a torch reduction on a GPU) gives the exact dot product: the same bits.
- ``|q| |x| < 32`` implies it for every pair (``G >= 2^-48``, ``A <= |q| |x|``): the
  host's condition for its compiled kernel, met by unit vectors, so no pair is checked.
  Otherwise every pair is checked on the device (``A`` as the float64 sum of ``|p_i|``
  enlarged by ``1 + 2^-30`` to cover that sum's rounding), and a pair that fails is
  scored on the host by numpy itself (``SearchStats.extra["host_rescored"]``). For
  float16 vectors a failure needs a dimension where both values are tiny beside a large
  sum: 82 of 2M pairs of random vectors of norm 15, 226 of 2M for vectors of norm 15
  sharing a mean direction (as CLS vectors do).

A dot product that is exactly zero is +0.0, as numpy's reduction (which starts from +0.0)
gives. Float32 stores (or queries in another dtype than the pool) stay on the host:
float32 products have up to 48 significant bits, their float64 sums round, and the bits
are numpy's order's alone. The rest of the exact search (the cut, the L2 form, the order,
the widening) is :mod:`mdcr.index.exact`'s, on the host, for every backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from mdcr.index.exact_kernel import EXACT_NORM_PRODUCT, _dots

# A float64 sum of d <= 2^20 non-negative terms is within (d - 1) 2^-53 of the exact sum.
_SUM_SLACK = 1.0 + 2.0**-30
_SPAN = 2.0**53
_SLICE_VALUES = {"cuda": 1 << 25, "cpu": 1 << 20}  # pair x dimension values scored at once


def lowbit(v: torch.Tensor) -> torch.Tensor:
    """The lowest set bit of each ``|v|`` (float32 holding float16 values) as a float32
    power of two; +inf for zeros, so that a minimum passes over them."""
    a = v.float().abs()
    bits = a.view(torch.int32)
    # Clearing the lowest set mantissa bit leaves at least half the value: the difference
    # is exact. A power of two (no mantissa bit set) is its own lowest bit.
    low = a - (bits & (bits - 1)).view(torch.float32)
    low = torch.where((bits & 0x7FFFFF) == 0, a, low)
    return torch.where(a == 0, torch.inf, low)


def _exact(
    x: torch.Tensor, q64: torch.Tensor, x_low: torch.Tensor | None, q_low: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Row-wise dot products of ``x`` and ``q64``: float64 sums of exact products, and
    (when the lowest bits are given) the positions of pairs not proven exact, or None."""
    prod = torch.mul(x, q64)  # in float64 (x converts exactly): exact products
    dot = prod.sum(dim=1) + 0.0  # an exact zero is +0.0, as numpy's sum gives
    if x_low is None or q_low is None:
        return dot, None
    total = prod.abs_().sum(dim=1)
    grain = (x_low * q_low).amin(dim=1).double()
    bad = ~(total * _SUM_SLACK < grain * _SPAN)
    return dot, (bad.nonzero().squeeze(1) if bool(bad.any()) else None)


class DeviceScorer:
    """The :class:`~mdcr.index.exact.PairScorer` of a torch backend that re-scores where its
    rows are (``backend.gather``, ``backend.out_device``): a batch's pairs at once, on one
    thread. Each pair is checked where ``|q| |x|`` may reach 32 (``q_norm`` and
    ``db_norm`` the largest norms), each squared norm (l2) where ``|x|^2`` may; pairs not
    proven exact are summed by numpy on the host from ``db`` and ``queries`` (float16)."""

    parallel = False

    def __init__(
        self,
        backend: Any,
        db: np.ndarray,
        queries: np.ndarray,
        *,
        l2: bool,
        q_norm: float,
        db_norm: float,
    ) -> None:
        self.backend = backend
        self.db = db
        self.queries = queries
        self.l2 = l2
        self.check_dots = not q_norm * db_norm < EXACT_NORM_PRODUCT
        self.check_sq = not db_norm * db_norm < EXACT_NORM_PRODUCT
        self.host_rescored = 0

    @property
    def extra(self) -> dict[str, int]:
        """Re-scored on the device (``device_rescoring``), so many pairs on the host."""
        return {"device_rescoring": 1, "host_rescored": self.host_rescored}

    def pair_dots(
        self, qrows: np.ndarray, owner: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """See :class:`~mdcr.index.exact.PairScorer`: gathered, multiplied and summed on the
        device in slices; only the float64 results come back."""
        dev = self.backend.out_device
        with torch.inference_mode():
            q16 = torch.from_numpy(np.ascontiguousarray(self.queries[qrows])).to(dev)
            q64, q_low = q16.double(), (lowbit(q16) if self.check_dots else None)
            owner_d, rows_d = torch.from_numpy(owner).to(dev), torch.from_numpy(rows).to(dev)
            dots = torch.empty(len(rows), dtype=torch.float64, device=dev)
            squares = torch.empty(len(rows) if self.l2 else 0, dtype=torch.float64, device=dev)
            step = max(1, _SLICE_VALUES[dev.type] // max(1, self.backend.dim))
            for s in range(0, len(rows), step):
                o, r = owner_d[s : s + step], rows_d[s : s + step]
                x = self.backend.gather(r)
                x_low = lowbit(x) if self.check_dots or (self.l2 and self.check_sq) else None
                low = None if q_low is None else q_low.index_select(0, o)
                dot, bad = _exact(x, q64.index_select(0, o), x_low, low)
                if bad is not None:  # the host's own sums for pairs not proven exact
                    at, qi = r[bad].cpu().numpy(), qrows[o[bad].cpu().numpy()]
                    dot[bad] = self._from_host(_dots(self.db[at], self.queries[qi]), dev)
                dots[s : s + step] = dot
                if self.l2:
                    check = (x_low, x_low) if self.check_sq else (None, None)
                    sq, bad = _exact(x, x.double(), *check)
                    if bad is not None:
                        at = r[bad].cpu().numpy()
                        sq[bad] = self._from_host(_dots(self.db[at], self.db[at]), dev)
                    squares[s : s + step] = sq
            return dots.cpu().numpy(), (squares.cpu().numpy() if self.l2 else None)

    def _from_host(self, scores: np.ndarray, dev: Any) -> torch.Tensor:
        """Scores summed on the host, counted, on the device."""
        self.host_rescored += len(scores)
        return torch.from_numpy(scores).to(dev)
