"""What ``mdcr run --dry-run`` prints beyond fingerprints: sizes and wall-time estimates.

``sizes``: pools, papers to encode, benchmark papers and disk, from typed plan facts;
``timing``: each stage's work priced by the rates measured in the paper's rehearsals.
"""

from mdcr.planning.sizes import (
    benchmark_estimate,
    corpus_papers,
    encode_estimate,
    input_records,
    pools_estimate,
    size_text,
)
from mdcr.planning.timing import Machine, estimate

__all__ = [
    "Machine",
    "benchmark_estimate",
    "corpus_papers",
    "encode_estimate",
    "estimate",
    "input_records",
    "pools_estimate",
    "size_text",
]
