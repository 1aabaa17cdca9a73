#!/usr/bin/env bash
# Stage what bench/gpu_check.sh's throughput step (bench/gpu_bench.py) needs on a GPU machine that
# has PyTorch, transformers and sentence-transformers but no network and no babelspace resources,
# within the 64 MiB that one call may carry together with the working tree:
#
#   bash bench/gpu_stage.sh                 # writes .stage/ (ignored by git), prints its size
#
# .stage/ then holds (bench/gpu_stage.py): Bible pairs and encoding texts, the minilm teacher and
# e5-small's 4-bit file with unused embedding rows zeroed, the XLM-R tokenizer, and the wheels the
# GPU image lacks (datasets and its pure-Python needs). On the GPU machine, carry .stage and run
#   bash bench/gpu_check.sh                 # unpacks .stage first when it is there
# Environment: STAGE (folder, default .stage), PAIRS (training pairs, default 20000: 61 MiB in all).
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE=${STAGE:-.stage}
PAIRS=${PAIRS:-20000}
LIMIT=$((64 * 1024 * 1024))
exclude=$(git rev-parse --git-path info/exclude)
grep -qxF "/$STAGE/" "$exclude" 2>/dev/null || echo "/$STAGE/" >>"$exclude"
rm -rf "$STAGE" && mkdir -p "$STAGE/whl"
export HF_HUB_OFFLINE=1 PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
python bench/gpu_stage.py pack --out "$STAGE" --pairs "$PAIRS"
# the GPU image's Python is 3.12 on x86-64; these three are pure Python or manylinux wheels
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d "$STAGE/whl" datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
stage_bytes=$(du -sb "$STAGE" | cut -f1)
tree_bytes=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
total=$((stage_bytes + tree_bytes))
printf 'stage %.1f MiB + working tree %.1f MiB = %.1f MiB (limit 64 MiB)\n' \
  "$(echo "$stage_bytes / 1048576" | bc -l)" "$(echo "$tree_bytes / 1048576" | bc -l)" "$(echo "$total / 1048576" | bc -l)"
if [ "$total" -gt "$LIMIT" ]; then
  echo "too large for one call: lower PAIRS" >&2
  exit 1
fi
