"""Scale on this CPU: a 20M-pair TSV through the Arrow cache, the sampler, the input pipeline and training.

Stages (``--stages``, default all but ``main``):

- ``generate``: a synthetic TSV of ``--pairs`` pairs (default 20,000,000) in 20 language pairs
  (``en`` -> 20 codes, 4 columns), sentences of 3..60 words drawn from a log-normal (median 16 words,
  about 100 characters, as parallel corpora), words from a 4,000-word pseudo-vocabulary per
  language; written under ``--folder`` (several GB).
- ``convert``: the one-off conversion into the Arrow cache in a fresh process (pairs/s, peak RSS).
- ``pipeline``: the input pipeline alone (`babelspace.training.batches.step_batches` with
  ``--loader-workers`` processes): the sampler's batches read from the memory-mapped corpus and
  tokenized by e5-small's tokenizer, ready as tensors (pairs/s; batch ``--pipeline-batch``), for each
  training set of ``--pipeline-corpus`` (``tsv``: the synthetic file; ``bible``; ``mix``: the default
  ``--data`` mix) and each ``--token-cache`` (``off``: tokenized every step; ``on``: token ids looked
  up in the token cache, whose build, when it is missing, is timed on its own: texts/s and pairs/s).
- ``train``: ``babelspace train --data that.tsv --max-steps 30 --test-sentences 0`` (the default
  recipe otherwise) in a fresh process: time from the process start to the first training step
  (the ``step 0 dev`` log line: the loop starts right after it) and peak RSS.
- ``torchrun``: the same under ``torchrun --nproc_per_node 2`` (gloo on CPU): peak RSS per process.
- ``rss``: peak RSS of the 3-step run ``babelspace train --data that.tsv --student teacher
  --max-steps 3 --batch-size 8 --test-sentences 0`` on synthetic files of each of ``--rss-pairs``
  pairs (default 80,000, 800,000 and 8,000,000; each generated as above, the first lines of one
  file), side by side: memory flat in the corpus size means the three peaks are close. Each run has a
  fresh process; its peak is the run summary's (``ru_maxrss``) and the RSS sampled every 0.5 s.
- ``main``: the same ``train`` command run with the code of ``--main-src`` (a checkout's ``src``
  folder, e.g. the code before the Arrow cache), killed when its RSS passes ``--rss-cap-gb``:
  where it stood and the RSS it reached.

The TSV is deleted at the end unless ``--keep``. Run heavy stages one at a time on a shared machine.

    HF_HUB_OFFLINE=1 python bench/scale.py --folder /big/disk/scale
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TGT_LANGS = "de fr es it pt nl sv pl cs ru uk tr ar he hi id vi ja zh sw".split()
LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
VOCAB = 4000
CHUNK = 200_000


def _vocab(rng: np.random.Generator) -> list[str]:
    lengths = rng.integers(2, 10, VOCAB)
    return ["".join(map(chr, rng.choice(LETTERS, n))) for n in lengths]


def _sentences(words: pa.Array, lengths: np.ndarray, rng: np.random.Generator) -> pa.Array:
    """One sentence per length: that many random words joined by spaces (Arrow, no Python loop)."""
    ids = rng.integers(0, len(words), int(lengths.sum()))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), words.take(pa.array(ids))), " ")


def generate(path: Path, n: int, seed: int = 0) -> None:
    """``n`` lines ``src<TAB>tgt<TAB>en<TAB>xx``, 20 language pairs in turn."""
    rng = np.random.default_rng(seed)
    vocabs = [pa.array(_vocab(rng)) for _ in range(len(TGT_LANGS) + 1)]
    langs = pa.array(TGT_LANGS)
    t0 = time.perf_counter()
    with path.open("wb") as f:
        for start in range(0, n, CHUNK):
            m = min(CHUNK, n - start)
            words = np.clip(rng.lognormal(np.log(16), 0.5, m), 3, 60).astype(np.int64)
            lang = (np.arange(start, start + m) % len(TGT_LANGS)).astype(np.int64)
            src = _sentences(vocabs[0], words, rng)
            tgt = pa.concat_arrays(
                [_sentences(vocabs[k + 1], words[lang == k], rng) for k in range(len(TGT_LANGS))]
            ).take(pa.array(np.argsort(np.argsort(lang, kind="stable"), kind="stable")))
            lines = pc.binary_join_element_wise(src, tgt, pa.scalar("en"), langs.take(pa.array(lang)), "\t")
            f.write(("\n".join(lines.to_pylist()) + "\n").encode())
    logging.info(
        "generated %d pairs (%.1f GB) in %.0f s", n, path.stat().st_size / 1e9, time.perf_counter() - t0
    )


def _child_rss_gb() -> float:
    """Peak RSS of the largest finished child process (and its waited-for descendants)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20


def convert(tsv: Path, cache: Path) -> dict:
    code = (
        "import time, json, sys\nfrom pathlib import Path\n"
        "from babelspace.data.arrow_corpus import ReadOptions, open_corpus\n"
        "t = time.perf_counter()\n"
        f"c = open_corpus({str(tsv)!r}, ReadOptions(), Path({str(cache)!r}))\n"
        "print(json.dumps({'rows': len(c), 'seconds': time.perf_counter() - t}))\n"
    )
    before = _child_rss_gb()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    got["pairs_per_s"] = got["rows"] / got["seconds"]
    got["peak_rss_gb"] = max(before, _child_rss_gb())
    return got


def _train_set(name: str, tsv: Path, cache: Path):
    """The training set of ``--pipeline-corpus`` ``name``, as ``babelspace train`` reads it."""
    from babelspace.training.config import TrainConfig
    from babelspace.training.setup.corpora import load_corpora

    data = {"tsv": [str(tsv)], "bible": ["bible"], "mix": None}[name]
    cfg = TrainConfig(data=data, cache_dir=str(cache), dev_pairs=0, model_from="final")
    return load_corpora(cfg)[0]


def _tokens(train, objective, cache: Path) -> tuple[object, dict]:
    """The token tables of ``train`` (built now if missing) and the build's figures (texts/s and
    pairs/s of the build, or the seconds to open tables that existed)."""
    from babelspace.training.setup.token_plan import train_tokens

    before = set(cache.rglob("ids.bin"))
    t0 = time.perf_counter()
    tokens = train_tokens(train, 0, objective, "on", cache)
    seconds = time.perf_counter() - t0
    if set(cache.rglob("ids.bin")) == before:
        return tokens, {"opened_s": seconds}  # the tables existed: nothing was built
    texts = sum(t.texts for t in tokens.tables)
    return tokens, {"seconds": seconds, "texts_per_s": texts / seconds, "pairs_per_s": len(train) / seconds}


def pipeline(train, objective, batch: int, steps: int, workers: int, tokens=None) -> dict:
    """pairs/s of the input pipeline alone: sampler -> memory-mapped pairs -> tokenized tensors."""
    import torch

    from babelspace.data.indexed_pairs import IndexedCorpus
    from babelspace.data.sampling import BalancedBatchSampler
    from babelspace.training.batches import step_batches
    from babelspace.training.setup.phases import DataPlan

    items = train.pairs.arrays(False, False) if isinstance(train, IndexedCorpus) else train.pairs
    sampler = BalancedBatchSampler(items, batch, bucket_by_length=True, seed=0, infinite=True)
    plan = DataPlan(train, train, sampler, steps, "")
    warm = 5
    it = step_batches(plan, objective, torch.device("cpu"), workers=workers, tokens=tokens)
    for _ in range(warm):
        next(it)
    t0 = time.perf_counter()
    n = sum(1 for _ in it)
    seconds = time.perf_counter() - t0
    return {"batch": batch, "workers": workers, "steps": n, "pairs_per_s": n * batch / seconds}


def pipelines(args, tsv: Path, cache: Path) -> list[dict]:
    """`pipeline` for every corpus, token-cache setting and batch size asked for."""
    from babelspace.models.encoder import load_encoder
    from babelspace.objectives.contrastive import ContrastiveObjective

    student = load_encoder("e5-small", device="cpu", max_seq_length=128)
    objective = ContrastiveObjective(student)  # its collate: tokenize sources and targets
    out = []
    for name in args.pipeline_corpus:
        train = _train_set(name, tsv, cache)
        for mode in args.token_cache:
            tokens, build = _tokens(train, objective, cache) if mode == "on" else (None, None)
            for b in args.pipeline_batch:
                got = pipeline(train, objective, b, args.pipeline_steps, args.loader_workers, tokens)
                out.append({"corpus": name, "pairs": len(train), "token_cache": mode, "build": build, **got})
                logging.info("pipeline: %s", out[-1])
                build = None  # reported with the first batch size only
    return out


def _watch(cmd: list[str], env: dict, log: Path, cap_gb: float | None, marker: str) -> dict:
    """Run ``cmd``; seconds until ``marker`` appears in its output, peak RSS (sum over the process
    tree's largest member), and, with ``cap_gb``, kill it when its tree's RSS passes the cap."""
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        first, peak, killed = None, 0.0, False
        while proc.poll() is None:
            time.sleep(0.5)
            try:
                tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
                rss = [p.memory_info().rss / 2**30 for p in tree]
            except psutil.Error:
                continue
            peak = max(peak, max(rss))
            if first is None and marker in log.read_text(errors="replace"):
                first = time.perf_counter() - t0
            if cap_gb is not None and max(rss) > cap_gb:
                killed = True
                for p in reversed(tree):
                    p.kill()
    text = log.read_text(errors="replace")
    if first is None and marker in text:
        first = time.perf_counter() - t0
    last = [ln for ln in text.splitlines() if ln.strip()][-3:]
    return {
        "rc": proc.returncode,
        "seconds": time.perf_counter() - t0,
        "first_step_s": first,
        "peak_rss_gb_sampled": peak,
        "killed_at_cap": killed,
        "last_lines": last,
    }


def _summary_peak_mb(log: Path) -> float | None:
    """The ``peak RSS N MB`` of a run's summary line."""
    found = re.findall(r"peak RSS (\d+) MB", log.read_text(errors="replace"))
    return float(found[-1]) if found else None


def rss_table(sizes: Sequence[int], folder: Path, env: dict) -> list[dict]:
    """Peak RSS of the 3-step ``--student teacher`` run for each corpus size, printed side by side."""
    full = folder / f"pairs-{max(sizes)}.tsv"
    if not full.is_file():
        generate(full, max(sizes))
    rows = []
    for n in sizes:
        tsv = folder / f"rss-{n}.tsv"
        with full.open("rb") as src, tsv.open("wb") as dst:  # the first n lines
            for _, line in zip(range(n), src, strict=False):
                dst.write(line)
        flags = ["--student", "teacher", "--batch-size", "8"]
        cmd = [
            sys.executable,
            "-m",
            "babelspace",
            *train_cmd(tsv, folder / "out-rss", folder / "cache", 3, extra=flags),
        ]
        log = folder / f"rss-{n}.log"
        got = _watch(cmd, env, log, None, "step 0 dev")
        rows.append(
            {
                "pairs": n,
                "rc": got["rc"],
                "peak_rss_mb": _summary_peak_mb(log),
                "sampled_gb": got["peak_rss_gb_sampled"],
            }
        )
        tsv.unlink()
        logging.info("rss: %s", rows[-1])
    print(f"{'pairs':>10}  {'peak RSS (summary)':>18}  {'sampled':>8}")
    for r in rows:
        print(f"{r['pairs']:>10,}  {r['peak_rss_mb'] or 0:>15.0f} MB  {r['sampled_gb']:>6.2f} GB")
    return rows


def train_cmd(
    tsv: Path, out: Path, cache: Path, steps: int, out_flag: str = "--out", extra: Sequence[str] = ()
) -> list[str]:
    return [
        *("train", "--data", str(tsv), "--max-steps", str(steps), "--test-sentences", "0"),
        *(out_flag, str(out), "--cache-dir", str(cache), "--overwrite", *extra),
    ]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folder", type=Path, help="where the TSV and caches go (default: <cache>/bench-scale)")
    ap.add_argument("--pairs", type=int, default=20_000_000)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--stages", default="generate,convert,pipeline,train,torchrun")
    ap.add_argument("--pipeline-batch", type=int, nargs="+", default=[16, 256])
    ap.add_argument("--pipeline-steps", type=int, default=200)
    ap.add_argument("--loader-workers", type=int, default=2)
    ap.add_argument("--pipeline-corpus", nargs="+", choices=["tsv", "bible", "mix"], default=["tsv"])
    ap.add_argument("--token-cache", nargs="+", choices=["off", "on"], default=["off"])
    ap.add_argument("--main-src", type=Path, help="the src folder of the code to compare (stage main)")
    ap.add_argument("--rss-cap-gb", type=float, default=8.0)
    ap.add_argument(
        "--rss-pairs",
        type=int,
        nargs="+",
        default=[80_000, 800_000, 8_000_000],
        help="corpus sizes of stage rss",
    )
    ap.add_argument("--keep", action="store_true", help="keep the TSV and the caches")
    ap.add_argument(
        "--train-flag",
        action="append",
        default=[],
        help="a flag added to the train and torchrun stages' command, e.g. --train-flag=--gradient-checkpointing",
    )
    return ap


def main() -> None:
    args = _parser().parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from babelspace.resources import cache_dir

    folder = args.folder or cache_dir() / "bench-scale"
    folder.mkdir(parents=True, exist_ok=True)
    tsv, cache = folder / f"pairs-{args.pairs}.tsv", folder / "cache"
    stages = args.stages.split(",")
    results: dict = {"pairs": args.pairs}
    if "generate" in stages and not tsv.is_file():
        generate(tsv, args.pairs)
    results["tsv_gb"] = tsv.stat().st_size / 1e9 if tsv.is_file() else None
    if "convert" in stages:
        results["convert"] = convert(tsv, cache)
        logging.info("convert: %s", results["convert"])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    marker = "step 0 dev"
    bs = [sys.executable, "-m", "babelspace"]
    if "train" in stages:
        cmd = bs + train_cmd(tsv, folder / "out", cache, args.steps, extra=args.train_flag)
        results["train"] = _watch(cmd, env, folder / "train.log", None, marker)
        logging.info("train: %s", results["train"])
    if "main" in stages:
        main_env = {**env, "PYTHONPATH": str(args.main_src)}
        # --output: the spelling of the code before the Arrow cache (the current code spells it --out)
        cmd = bs + train_cmd(tsv, folder / "out-main", folder / "cache-main", args.steps, "--output")
        results["main"] = _watch(cmd, main_env, folder / "main.log", args.rss_cap_gb, marker)
        logging.info("main: %s", results["main"])
    if "pipeline" in stages:
        results["pipeline"] = pipelines(args, tsv, cache)
    if "torchrun" in stages:
        tr = [str(Path(sys.executable).parent / "torchrun"), "--nproc_per_node", "2", "-m", "babelspace"]
        cmd = tr + train_cmd(tsv, folder / "out2", cache, args.steps, extra=args.train_flag)
        results["torchrun"] = _watch(cmd, env, folder / "torchrun.log", None, marker)
        logging.info("torchrun: %s", results["torchrun"])
    if "rss" in stages:
        results["rss"] = rss_table(args.rss_pairs, folder, env)
    print(json.dumps(results, indent=1))
    if not args.keep:
        tsv.unlink(missing_ok=True)
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
