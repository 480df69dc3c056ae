#!/usr/bin/env bash
# One prepared run for a lent GPU machine (docs/performance.md, "GPU"): the `gpu` tests,
# then both benchmarks at the sizes of the GPU measurements, in under six minutes on an
# H100/H200. Prepare here with scripts/gpu_wheels.sh (the packages that machine lacks, as
# wheels in .whl/), carry .whl along, and run `bash scripts/gpu_check.sh` there. Figures
# and logs go to $OUT (the device tool's folder) or ./gpu-check-out.
#
#   SIZE=small bash scripts/gpu_check.sh   # the same steps at toy sizes (a CPU rehearsal)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export NUMBA_CACHE_DIR=$PWD/.gpu-site/.numba_cache
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --target .gpu-site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD/.gpu-site:$PWD${PYTHONPATH:+:$PYTHONPATH}

DEVICE=cuda
PRECISION=bf16
if [ "${SIZE:-full}" = small ]; then
  DEVICE=cpu
  PRECISION=auto
  ENC=(--docs 300 --max-length 128)
  SEARCH=(--pool 20000 --queries 200 --k 100)
  MULTI=(--pool 5000 --queries 50 --k 100 --sentences 9)
else
  ENC=(--docs 12000 --max-length 512)
  SEARCH=(--pool 2000000 --queries 3800 --k 500)
  MULTI=(--pool 100000 --queries 500 --k 500 --sentences 9)
fi

step() {  # step NAME LIMIT_S COMMAND...: run one step, log it, never stop the others
  local name=$1 limit=$2
  shift 2
  echo "== $name"
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$OUT/$name.log"
  echo "== $name: rc $rc in $((SECONDS - start)) s"
}

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PYTHON" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
} | tee "$OUT/machine.txt"

if [ "$DEVICE" = cuda ]; then
  step gpu-tests 120 "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider tests
fi
step bench-encode 150 "$PYTHON" scripts/bench_encode.py --model bert-base --device "$DEVICE" \
  --precision "$PRECISION" "${ENC[@]}" --json "$OUT/bench_encode.json"
step bench-search 120 "$PYTHON" scripts/bench_search.py --backends torch --device "$DEVICE" \
  --no-raw --repeat 2 "${SEARCH[@]}" --json "$OUT/bench_search.json"
step bench-search-norm15 90 "$PYTHON" scripts/bench_search.py --backends torch --device "$DEVICE" \
  --no-raw --repeat 2 --norm 15 "${SEARCH[@]}" --json "$OUT/bench_search_norm15.json"
step bench-search-multi 60 "$PYTHON" scripts/bench_search.py --backends torch \
  --device "$DEVICE" --no-raw --repeat 2 "${MULTI[@]}" --json "$OUT/bench_search_multi.json"
echo "figures in $OUT"
