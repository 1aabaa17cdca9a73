"""Memory of xsim on large pools: babelspace's chunked search vs the naive full similarity matrix.

Each measurement runs in its own subprocess and reports that process's peak resident memory
(VmHWM), minus the memory of the inputs, so the figures are what the *search* adds.

    python bench/xsim_memory.py --n 100000 --naive-n 20000

The naive side (one n x n float32 cosine matrix, then margin scores, as a simple xsim would do) is
measured at ``--naive-n`` (it needs n*n*4 bytes: 40 GB at 100k, more than this machine has) and
extrapolated quadratically; the chunked side runs at ``--n``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
import numpy as np
mode, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
rng = np.random.default_rng(0)
x = rng.standard_normal((n, d), dtype=np.float32); x /= np.linalg.norm(x, axis=1, keepdims=True)
y = x + 0.5 * rng.standard_normal((n, d), dtype=np.float32) / np.sqrt(d); y /= np.linalg.norm(y, axis=1, keepdims=True)
base = hwm()
t = time.perf_counter()
if mode == "chunked":
    from babelspace.metrics.xsim import xsim_errors
    err = xsim_errors(x, y, k=4).error_rate
else:
    sim = x @ y.T                                  # n x n
    k = 4
    fwd = -np.partition(-sim, k, axis=1)[:, :k].mean(1)
    bwd = -np.partition(-sim, k, axis=0)[:k, :].mean(0)
    score = sim / ((fwd[:, None] + bwd[None, :]) / 2)
    err = 100.0 * float(np.mean(score.argmax(1) != np.arange(n)))
print(json.dumps({"mode": mode, "n": n, "seconds": time.perf_counter() - t, "peak_mb": hwm(), "inputs_mb": base, "error": err}))
"""


def run(mode: str, n: int, d: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(n), str(d)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--naive-n", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=384)
    args = ap.parse_args()
    t = time.perf_counter()
    rows = [
        run("chunked", args.naive_n, args.dim),
        run("naive", args.naive_n, args.dim),
        run("chunked", args.n, args.dim),
    ]
    print(
        f"{'method':10s} {'n x n':>15s} {'seconds':>8s} {'peak MB':>9s} {'search MB':>10s} {'xsim err%':>9s}"
    )
    for r in rows:
        print(
            f"{r['mode']:10s} {r['n']:>7d} x {r['n']:<7d} {r['seconds']:8.1f} {r['peak_mb']:9.0f} "
            f"{r['peak_mb'] - r['inputs_mb']:10.0f} {r['error']:9.2f}"
        )
    naive_small = rows[1]["peak_mb"] - rows[1]["inputs_mb"]
    scale = (args.n / args.naive_n) ** 2
    print(
        f"naive at {args.n} x {args.n}: full float32 matrix alone = {args.n * args.n * 4 / 2**30:.1f} GiB "
        f"(measured {naive_small:.0f} MB at {args.naive_n}, x{scale:.0f} quadratic = {naive_small * scale / 1024:.1f} GiB); "
        f"chunked search added {rows[2]['peak_mb'] - rows[2]['inputs_mb']:.0f} MB"
    )
    print(f"total bench time {time.perf_counter() - t:.0f}s")


if __name__ == "__main__":
    main()
