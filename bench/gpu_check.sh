#!/usr/bin/env bash
# The GPU check: one command on a machine with a CUDA GPU, under 8 minutes on one GPU.
#
#   bash bench/gpu_check.sh            # writes its log to ${OUT:-/tmp/gpu_check}/gpu_check.log
#
# 1. the device tests on cuda (device resolution, precision, the trainer's fp16 scaler path);
# 2. the default recipe for 200 steps in bf16 on cuda: pairs/s, peak GPU memory, the held-out table;
# 3. step time fp32 vs bf16 (bench/precision_step_time.py);
# 4. encode throughput of e5-small on the GPU (fp32 and fp16 weights) vs the CPU peer;
# 5. with two or more GPUs: the 2-process DDP (NCCL) run equals one process, and a 2-GPU FSDP run.
# With GPU_CHECK_EXTRAS=1 (a few more minutes): 6. the default run as shipped (`babelspace train`,
# precision auto) and `--recipe paper` at the same budget; 7. the ablation grid at the e5-small scale.
# 0. first, when .stage/ is there (bash bench/gpu_stage.sh, for a machine without the offline
# resources or network): its wheels are installed and its data and models unpacked, then
# bench/gpu_bench.py measures the default recipe at batch 16, 256 and 1024 (pairs/s, MFU against
# the measured bf16 matmul peak, peak memory), the sentence-transformers peer at its best batch, and
# e5-small encoding with `babelspace encode` and SentenceTransformer.encode (JSON in $OUT).
# GPU_CHECK_DRY=1: only step 0, in bench/gpu_bench.py's tiny CPU mode (checks the script's logic).
# GPU_CHECK_ABLATION=1: instead of steps 0b-7, the MEXMA ablation grid of docs/mexma.md ("The
# seed's claims") at the paper's scale, in one call: full e5-small, the paper's head depth (6 layers x
# 8 heads) and vocabulary softmax (unmask_vocab=full), batch 64, max length 64, ABL_STEPS steps (400)
# with the head warmed up alone for the first ABL_HEAD_WARMUP (100), encoder lr ABL_LR (2e-5), head lr
# ABL_HEAD_LR (5e-4), the sentence MSE and KoLeo weights ABL_MSE (1) and ABL_KOLEO (0.01), the
# paper's (ABL_MSE=100 ABL_KOLEO=1: the CPU regime's, docs/mexma.md "The CPU regime"); the rows
# start cls, mexma, mexma -token-grad, mexma -koleo, mexma mono-unmask, contrastive and distill over
# seeds 0,1,2, then the A-B table with 95% intervals (--compare). Trained
# on every language of the data, evaluated on ko,vi,ro,de (200 test-book verses each); JSON in
# $OUT/ablation_grid.json. With .stage/ it uses the staged e5-small, pairs.tsv and test_pairs.tsv
# (bash bench/gpu_stage.sh). GPU_CHECK_DRY=1 with GPU_CHECK_ABLATION=1 prints the grid's configs
# (bench/ablation.py --dry-run) and trains nothing: the path can be checked on a machine without a GPU.
# Every figure is printed; docs/mexma.md carries the ones measured.
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 BABELSPACE_TEST_DEVICE=cuda
OUT=${OUT:-/tmp/gpu_check}           # the log (and the ablation JSON) only
WORK=${GPU_CHECK_WORK:-/tmp/gpu_check_work}  # models, checkpoints, caches (several GB)
mkdir -p "$OUT" "$WORK"
export BABELSPACE_CACHE=${BABELSPACE_CACHE:-$WORK/cache}  # one materialised e5-small for every step
exec > >(tee "$OUT/gpu_check.log") 2>&1
if [ -x .venv/bin/python ]; then . .venv/bin/activate; fi
step() { echo; echo "=== $* ($(date +%T))"; }
# without an installed babelspace (a bare GPU image): run it from this checkout
if ! command -v babelspace >/dev/null; then
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
  mkdir -p "$WORK/bin" && printf '#!/bin/sh\nexec python -m babelspace "$@"\n' >"$WORK/bin/babelspace"
  chmod +x "$WORK/bin/babelspace" && export PATH="$WORK/bin:$PATH"
fi

DRY=${GPU_CHECK_DRY:-0}
if [ -d .stage ]; then
  step "0. staged resources (.stage)"
  if ! python -c "import datasets" 2>/dev/null; then  # the GPU image lacks it (the peer's trainer needs it)
    python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" .stage/whl/*.whl \
      && export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$WORK/site"
  fi
  python bench/gpu_stage.py unpack --stage .stage --to "$WORK/stage"
  if [ "$DRY" = 1 ]; then BENCH_ARGS=(--dry --fit-pairs 64); else BENCH_ARGS=(); fi
  if [ "${GPU_CHECK_ABLATION:-0}" != 1 ]; then
    step "0b. throughput: babelspace at 16/256/1024, the sentence-transformers peer, encoding"
    timeout 420 python bench/gpu_bench.py "${BENCH_ARGS[@]}" --data "$WORK/stage/pairs.tsv" \
      --texts "$WORK/stage/texts.txt" --teacher "$WORK/stage/teacher" --student "$WORK/stage/e5-small" \
      --work "$WORK/bench" --json "$OUT/gpu_bench.json"
  fi
fi
if [ "$DRY" = 1 ] && [ "${GPU_CHECK_ABLATION:-0}" != 1 ]; then step "done (dry): log in $OUT/gpu_check.log"; exit 0; fi

if [ "${GPU_CHECK_ABLATION:-0}" = 1 ]; then
  if [ -d "$WORK/stage/e5-small" ]; then
    ABL_DATA=(--student "$WORK/stage/e5-small" --data "$WORK/stage/pairs.tsv" --eval-data "$WORK/stage/test_pairs.tsv")
  else
    ABL_DATA=(--student e5-small --data bible)
  fi
  ABL=(python bench/ablation.py "${ABL_DATA[@]}" --train-langs all --langs ko,vi,ro,de --max-sentences 200
    --steps "${ABL_STEPS:-400}" --batch-size 64 --max-seq-length 64 --head-layers 6 --head-heads 8
    --lr "${ABL_LR:-2e-5}" --tasks xsim,xsimpp,tatoeba,geometry --seeds 0,1,2
    --mexma-set "head_warmup_steps=${ABL_HEAD_WARMUP:-100} head_lr=${ABL_HEAD_LR:-5e-4} unmask_vocab=full sentence_mse_weight=${ABL_MSE:-1} koleo_weight=${ABL_KOLEO:-0.01}"
    --variants "start cls,mexma,mexma -token-grad,mexma -koleo,mexma mono-unmask,contrastive,distill"
    --compare "mexma:start cls,mexma:mexma -token-grad,mexma:mexma -koleo,mexma:mexma mono-unmask,mexma:contrastive,mexma:distill")
  if [ "$DRY" = 1 ]; then
    step "8. ablation grid (dry run: the configs, nothing trained)"
    "${ABL[@]}" --dry-run
  else
    step "8. ablation grid at the paper's scale, seeds 0,1,2"
    timeout 3000 "${ABL[@]}" --json "$OUT/ablation_grid.json"
  fi
  step "done (ablation): log in $OUT/gpu_check.log"
  exit 0
fi

step "device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count(), 'bf16', torch.cuda.is_bf16_supported())"
N_GPU=$(python -c "import torch; print(torch.cuda.device_count())")

step "1. device tests on cuda"
timeout 300 python -m pytest -q tests/device/test_device_resolution.py tests/training/test_training_precision.py tests/training/test_training_gather_negatives.py -k "not mexma"

step "2. default recipe, 200 steps, bf16, cuda"
timeout 600 babelspace train --device cuda --precision bf16 --max-steps 200 --batch-size 64 \
  --out "$WORK/run-bf16" --overwrite

step "3. step time fp32 vs bf16 (60 steps each, batch 64)"
timeout 600 python bench/precision_step_time.py --device cuda --precisions fp32,bf16 --steps 60

step "4. encode throughput, e5-small, 5,000 Bible test-book sentences"
timeout 300 python - <<'PY'
import time, torch
from babelspace.models.encoder import encode, load_encoder
from babelspace.evaluation.held_out import held_out_texts
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
  timeout 300 python -m pytest -q tests/training/test_training_trainer.py -k torchrun
  step "5b. FSDP (configs/fsdp.yaml, 2 GPUs): 40 steps of the default recipe, sharded"
  sed 's/XLMRobertaLayer/BertLayer/' configs/fsdp.yaml >"$WORK/fsdp_bert.yaml"
  timeout 300 accelerate launch --config_file "$WORK/fsdp_bert.yaml" --num_processes 2 -m babelspace train \
    --max-steps 40 --batch-size 64 --out "$WORK/run-fsdp" --overwrite
else
  step "5. skipped: one GPU (the 2-process DDP test needs two)"
fi
if [ "${GPU_CHECK_EXTRAS:-0}" = 1 ]; then
  step "6a. the default run as shipped (cuda, precision auto)"
  time timeout 600 babelspace train --device cuda --out "$WORK/run-default" --overwrite
  step "6b. --recipe paper at the default budget (cuda)"
  timeout 600 babelspace train --device cuda --recipe paper --out "$WORK/run-paper" --overwrite
  step "7. ablation grid, e5-small scale, 2 seeds (cuda)"
  timeout 600 python bench/ablation.py --scale e5-small --steps 120 --batch-size 32 --seeds 0,1 \
    --langs de,fr,ru,zh --max-sentences 400 --json "$OUT/ablation_e5.json"
fi
step "done: log in $OUT/gpu_check.log"
