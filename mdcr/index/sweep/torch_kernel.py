"""The sweep on a GPU (torch): every grid point's top k from one query's postings, in blocks.

The same arithmetic as :mod:`mdcr.index.sweep.kernel`, written as torch tensor operations
so that a GPU runs it; CI runs the same code on the CPU and compares it with the numba
kernel bit for bit (``tests/integration/index/test_bm25_sweep.py``):

- a term score is Lucene's ``w - w / (1 + tf * table[norm byte])`` in float32, one eager
  torch operation per step (each rounds to float32 on its own, as Lucene does; nothing is
  fused into an FMA and CUDA's float32 division is correctly rounded);
- a document's term scores are added in float64 (``index_add_``). The order of a GPU's
  atomic adds varies, but the sum is exact in any order (term scores span far fewer than
  the 29 bits between float32 and float64), so it is the same number the kernel gets;
- the float64 sums are rounded to float32 and every grid point keeps its top k by
  (score desc, document number asc): one ``topk`` over an int64 key holding the score's
  bits (positive float32 values order as their bits do) above the complement of the
  document number.

Memory: the pool's postings (12 bytes each, once per pool), and per query the matched
postings' term scores for :data:`GRID_BLOCK` grid points at a time plus one float64
accumulator per document and grid point (a 2M-paper pool at 42 points: 0.7 GB).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

GRID_BLOCK = 8  # grid points whose term scores are held at once


@dataclass(frozen=True)
class TorchPostings:
    """A pool's inverted index as tensors on a device
    (:meth:`mdcr.index.sweep.grid.PoolTerms.on_device`)."""

    inv_ptr: np.ndarray  # int64, on the host: where each term's postings are
    inv_docs: Any  # int64 tensor
    inv_tfs: Any  # float32 tensor
    norms: Any  # int64 tensor: the norm byte of each document
    n_docs: int


def grid_top_torch(
    q_terms: np.ndarray,
    weights: np.ndarray,
    postings: TorchPostings,
    tables: np.ndarray,
    k: int,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per grid point (a column of ``tables``, float32 (256, grid points)): (document
    numbers, float32 scores) of the top ``k`` matched documents by (score desc, document
    number asc), as :func:`mdcr.index.sweep.kernel.grid_top` returns them."""
    import torch

    device = postings.inv_docs.device
    starts = postings.inv_ptr[q_terms]
    lens = postings.inv_ptr[q_terms + 1] - starts
    n_grid = tables.shape[1]
    total = int(lens.sum())
    if total == 0:
        return [(np.zeros(0, np.int64), np.zeros(0, np.float32))] * n_grid
    # The query's postings: the position of each in the pool's arrays, term after term.
    first = np.repeat(starts - (np.cumsum(lens) - lens), lens)
    where = torch.from_numpy(first + np.arange(total)).to(device)
    docs = postings.inv_docs[where]
    tfs = postings.inv_tfs[where][:, None]
    w = torch.from_numpy(np.repeat(weights.astype(np.float32), lens)).to(device)[:, None]
    rows = torch.from_numpy(np.ascontiguousarray(tables, np.float32)).to(device)
    norm_of = postings.norms[docs]
    acc = torch.zeros((postings.n_docs, n_grid), dtype=torch.float64, device=device)
    for g in range(0, n_grid, GRID_BLOCK):
        table = rows[:, g : g + GRID_BLOCK][norm_of]  # (postings, block) float32
        score = w - w / (1.0 + tfs * table)  # float32, one rounding per operation
        acc[:, g : g + GRID_BLOCK].index_add_(0, docs, score.double())
    matched = torch.zeros(postings.n_docs, dtype=torch.bool, device=device)
    matched[docs] = True
    rows_matched = torch.nonzero(matched).squeeze(1)
    scores = acc[rows_matched].float()  # (matched documents, grid points)
    keys = (scores.view(torch.int32).long() << 32) | (0xFFFFFFFF - rows_matched)[:, None]
    top = torch.topk(keys, min(k, len(rows_matched)), dim=0).indices  # (k, grid points)
    out = []
    for g in range(n_grid):
        pick = top[:, g]
        out.append(
            (rows_matched[pick].cpu().numpy().astype(np.int64), scores[pick, g].cpu().numpy())
        )
    return out
