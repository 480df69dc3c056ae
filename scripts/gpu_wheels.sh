#!/usr/bin/env bash
# Downloads, on a machine with the package registries, the wheels that a lent GPU machine
# lacks (it has Python 3.12, torch, transformers, sentence-transformers, numpy, pandas,
# pyarrow, numba, scipy, tqdm and pytest, and no network): into .whl/, which git ignores
# and scripts/gpu_check.sh installs from. faiss-gpu is not among them (its CUDA libraries
# are hundreds of MB): the torch backend is the GPU search path measured there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
mkdir -p .whl
for spec in faiss-cpu==1.15.1 duckdb pysbd pytrec-eval-terrier; do
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "$spec"
done
ls -1 .whl
du -sh .whl
