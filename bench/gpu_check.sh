#!/usr/bin/env bash
# The GPU check: one command on a machine with a CUDA GPU, under 8 minutes on one GPU.
#
#   bash bench/gpu_check.sh            # writes its log to ${OUT:-/tmp/gpu_check}/gpu_check.log
#
# 1. the device tests on cuda (device resolution, precision, the trainer's fp16 scaler path);
# 2. the default recipe for 200 steps in bf16 on cuda: pairs/s, peak GPU memory, the held-out table;
# 3. step time fp32 vs bf16 (bench/precision_step_time.py);
# 4. encode throughput of e5-small on the GPU (fp32 and fp16 weights) vs the CPU peer;
# 5. with two or more GPUs: the 2-process DDP (NCCL) run equals one process.
# Every figure is printed; docs/performance.md carries the ones measured.
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 BABELSPACE_TEST_DEVICE=cuda
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
if [ -x .venv/bin/python ]; then . .venv/bin/activate; fi
step() { echo; echo "=== $* ($(date +%T))"; }

step "device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count(), 'bf16', torch.cuda.is_bf16_supported())"
N_GPU=$(python -c "import torch; print(torch.cuda.device_count())")

step "1. device tests on cuda"
timeout 300 python -m pytest -q tests/test_device.py tests/test_precision.py tests/test_gather_negatives.py -k "not mexma"

step "2. default recipe, 200 steps, bf16, cuda"
timeout 600 babelspace train --device cuda --precision bf16 --max-steps 200 --batch-size 64 \
  --output "$OUT/run-bf16" --overwrite --cache-dir "$OUT/cache"

step "3. step time fp32 vs bf16 (60 steps each, batch 64)"
timeout 600 python bench/precision_step_time.py --device cuda --precisions fp32,bf16 --steps 60

step "4. encode throughput, e5-small, 5,000 Bible test-book sentences"
timeout 300 python - <<'PY'
import time, torch
from babelspace.encoder import encode, load_encoder
from babelspace.training.summary import held_out_texts
en, per_lang = held_out_texts(None, 227, 0)
texts = (en + [t for v in per_lang.values() for t in v])[:5000]
for device, half in (("cpu", False), ("cuda", False), ("cuda", True)):
    if device == "cpu":
        texts_d = texts[:500]  # the CPU peer on a tenth, scaled
    else:
        texts_d = texts
    model = load_encoder("e5-small", device=device)
    if half:
        model.half()
    encode(model, texts_d[:64], batch_size=64)  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    encode(model, texts_d, batch_size=256 if device == "cuda" else 64)
    if device == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"{device:5} {'fp16' if half else 'fp32'}: {len(texts_d) / dt:9.1f} sentences/s ({len(texts_d)} sentences, {dt:.1f}s)")
PY

if [ "${N_GPU:-0}" -ge 2 ]; then
  step "5. torchrun 2 processes (NCCL) = 1 process"
  timeout 300 python -m pytest -q tests/test_trainer.py -k torchrun
else
  step "5. skipped: one GPU (the 2-process DDP test needs two)"
fi
step "done: log in $OUT/gpu_check.log"
