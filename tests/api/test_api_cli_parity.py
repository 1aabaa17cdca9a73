"""Each ``babelspace`` command is a thin shell over its function in :mod:`babelspace.api`: the same
inputs through the command and through ``babelspace.<job>(...)`` write the same files (the vectors,
the mined/scored/aligned TSVs, the static model, the evaluation JSON) and the function's result holds
what the command prints. Tiny random models, tiny files; timings and the output folder's own path
are the only differences allowed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import babelspace
from babelspace.cli import main

EN = [
    "the king is in the house", "the people of the city", "god is good", "the lord of the land",
    "hello world", "a cat sits on the mat", "rain today is good", "one big dog", "two small cats",
    "the house of the king is big", "the day of the lord", "the city is small",
]  # fmt: skip
DE = [
    "der könig ist im haus", "das volk der stadt", "gott ist gut", "der herr des landes",
    "hallo welt", "eine katze sitzt", "regen heute ist gut", "ein großer hund", "zwei kleine katzen",
    "das haus des königs ist groß", "der tag des herrn", "die stadt ist klein",
]  # fmt: skip
VOLATILE = ("time", "peak", "per_s", "per_second")


def _lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _stable(value: Any, *dirs: Path) -> Any:
    """``value`` without timings and memory peaks, with the run's own folder spelt ``DIR``."""
    if isinstance(value, dict):
        kept = {k: v for k, v in value.items() if not k.endswith("_s") and not any(w in k for w in VOLATILE)}
        return {k: _stable(v, *dirs) for k, v in kept.items()}
    if isinstance(value, list):
        return [_stable(v, *dirs) for v in value]
    if isinstance(value, str):
        for d in dirs:
            value = value.replace(str(d), "DIR")
    return value


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    cli, py = tmp_path / "cli", tmp_path / "py"
    cli.mkdir()
    py.mkdir()
    return cli, py


def test_encode_cli_equals_api(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    cli, py = _dirs(tmp_path)
    text = _lines(tmp_path / "en.txt", [*EN, "", "god"])
    assert (
        main(["encode", str(tiny_model_dir), str(text), "--out", str(cli / "v.npy"), "--device", "cpu"]) == 0
    )
    printed = capsys.readouterr().out.strip()
    result = babelspace.encode(tiny_model_dir, text, out=py / "v.npy", device="cpu")
    assert (cli / "v.npy").read_bytes() == (py / "v.npy").read_bytes()
    assert str(result).replace(str(py), str(cli)) == printed
    assert result.blank_lines == 1 and result.vectors.shape[0] == len(EN) + 2
    # texts in, an array out; a loaded model gives the same vectors as its folder
    from sentence_transformers import SentenceTransformer

    vecs = babelspace.encode(str(tiny_model_dir), EN, device="cpu")
    loaded = babelspace.encode(SentenceTransformer(str(tiny_model_dir), device="cpu"), EN)
    assert isinstance(vecs, np.ndarray) and np.allclose(vecs, result.vectors[: len(EN)], atol=1e-6)
    assert np.allclose(loaded, vecs, atol=1e-6)


def test_evaluate_cli_equals_api(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    cli, py = _dirs(tmp_path)
    flags = ["--task", "xsim,tatoeba", "--langs", "de,fr", "--max-sentences", "20", "--device", "cpu"]
    assert main(["eval", str(tiny_model_dir), *flags, "--out", str(cli / "r.json"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    result = babelspace.evaluate(tiny_model_dir, tasks="xsim,tatoeba", langs=["de", "fr"], max_sentences=20,
                                 device="cpu", out=py / "r.json", progress=False)  # fmt: skip
    reports = [_stable(json.loads((d / "r.json").read_text()), d) for d in (cli, py)]
    assert reports[0] == reports[1]
    assert str(result).replace(str(py), str(cli)).split("\n")[-1] == printed.strip().split("\n")[-1]
    assert set(result.tasks) == {"xsim", "tatoeba"}
    # a loaded SentenceTransformer: the same figures
    from sentence_transformers import SentenceTransformer

    loaded = babelspace.evaluate(SentenceTransformer(str(tiny_model_dir), device="cpu"), tasks=["xsim"],
                                 langs=["de", "fr"], max_sentences=20, progress=False)  # fmt: skip
    assert loaded.tasks["xsim"].per_language == result.tasks["xsim"].per_language


def test_mine_cli_equals_api(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    cli, py = _dirs(tmp_path)
    src, tgt = _lines(tmp_path / "en.txt", EN), _lines(tmp_path / "de.txt", DE[::-1])
    common = ["--shard-size", "5", "--threshold", "0", "--device", "cpu", "--no-progress"]
    argv = ["mine", "--src", str(src), "--tgt", str(tgt), "--model", str(tiny_model_dir), *common]
    assert main([*argv, "--out", str(cli / "m.tsv")]) == 0
    printed = capsys.readouterr().out
    result = babelspace.mine(src, tgt, model=tiny_model_dir, out=py / "m.tsv", shard_size=5, threshold=0,
                             device="cpu", show_progress=False)  # fmt: skip
    assert (cli / "m.tsv").read_bytes() == (py / "m.tsv").read_bytes()
    summaries = [_stable(json.loads((d / "m.summary.json").read_text()), d) for d in (cli, py)]
    assert summaries[0] == summaries[1]
    assert (
        result.pairs == len((py / "m.tsv").read_text().splitlines()) and f"pairs: {result.pairs} " in printed
    )
    # a loaded model is saved beside the output (the shards are keyed by its folder): the same pairs
    from sentence_transformers import SentenceTransformer

    loaded = SentenceTransformer(str(tiny_model_dir), device="cpu")
    babelspace.mine(src, tgt, model=loaded, out=py / "l.tsv", shard_size=5, threshold=0, show_progress=False)
    assert (py / "l.tsv").read_bytes() == (py / "m.tsv").read_bytes() and (py / "l.model").is_dir()


def test_score_cli_equals_api(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    cli, py = _dirs(tmp_path)
    bitext = tmp_path / "bitext.tsv"
    bitext.write_text(
        "".join(f"{a}\t{b}\n" for a, b in [*zip(EN, DE, strict=True), (EN[0], DE[0])]), encoding="utf-8"
    )
    flags = [
        "--tgt-lang",
        "de",
        "--threshold",
        "0.5",
        "--filter-duplicates",
        "--device",
        "cpu",
        "--no-progress",
    ]
    assert (
        main(["score", str(bitext), "--model", str(tiny_model_dir), "--out", str(cli / "k.tsv"), *flags]) == 0
    )
    printed = capsys.readouterr().out
    result = babelspace.score(bitext, model=str(tiny_model_dir), out=py / "k.tsv", tgt_lang="de", threshold=0.5,
                              filter_duplicates=True, device="cpu", show_progress=False)  # fmt: skip
    for name in ("k.tsv", "k.scores.tsv"):
        assert (cli / name).read_bytes() == (py / name).read_bytes(), name
    assert result.summary["filters"]["dropped"]["duplicates"] == 1
    assert f"kept {result.kept} of " in printed


def test_align_cli_equals_api(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    cli, py = _dirs(tmp_path)
    src, tgt = _lines(tmp_path / "doc.en", EN), _lines(tmp_path / "doc.de", DE)
    argv = ["align", "--src", str(src), "--tgt", str(tgt), "--model", str(tiny_model_dir), "--tgt-lang", "de"]
    assert main([*argv, "--out", str(cli / "a.tsv"), "--device", "cpu", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    result = babelspace.align(src, tgt, model=tiny_model_dir, out=py / "a.tsv", tgt_lang="de", device="cpu",
                              show_progress=False)  # fmt: skip
    assert (cli / "a.tsv").read_bytes() == (py / "a.tsv").read_bytes()
    summaries = [_stable(json.loads(result.summary_path.read_text()), py),
                 _stable(json.loads((cli / "a.summary.json").read_text()), cli)]  # fmt: skip
    assert summaries[0] == summaries[1] and f"pairs: {result.pairs} written" in printed
    # a loaded model aligns the same; gale-church needs none
    from sentence_transformers import SentenceTransformer

    again = babelspace.align(src, tgt, model=SentenceTransformer(str(tiny_model_dir), device="cpu"),
                             out=py / "b.tsv", tgt_lang="de", show_progress=False)  # fmt: skip
    assert (py / "b.tsv").read_bytes() == (py / "a.tsv").read_bytes() and again.pairs == result.pairs
    assert babelspace.align(src, tgt, out=py / "g.tsv", method="gale-church").pairs > 0


def test_export_static_cli_equals_api(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    cli, py = _dirs(tmp_path)
    vocab = _lines(tmp_path / "vocab.txt", EN + DE)
    flags = ["--static", "--static-vocab-from", str(vocab), "--static-fit", "10", "--device", "cpu"]
    assert main(["export", str(tiny_model_dir), "--out", str(cli / "s"), *flags]) == 0
    printed = capsys.readouterr().out
    result = babelspace.export(tiny_model_dir, py / "s", static=True, static_vocab_from=[vocab], static_fit=10,
                               device="cpu")  # fmt: skip
    files = sorted(p.relative_to(cli / "s") for p in (cli / "s").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(py / "s") for p in (py / "s").rglob("*") if p.is_file())
    for f in files:
        if f.name != "README.md":  # the card names its own folder
            assert (cli / "s" / f).read_bytes() == (py / "s" / f).read_bytes(), f
    assert str(result).replace(str(py), str(cli)) == printed.strip()


def test_train_cli_equals_api(tmp_path: Path, tiny_teacher_dir: Path, tiny_nodrop_dir: Path, capsys) -> None:
    cli, py = _dirs(tmp_path)
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text(
        "".join(f"{en} {i}\t{de} {i}\n" for i in range(10) for en, de in zip(EN, DE, strict=True)),
        encoding="utf-8",
    )
    fields = dict(data=[str(tsv)], tgt_lang="de", teacher=str(tiny_teacher_dir), student=str(tiny_nodrop_dir),
                  batch_size=8, max_steps=2, eval_every=2, dev_pairs=12, max_seq_length=16,
                  projection_fit_pairs=32, cache_dir=str(tmp_path / "cache"), test_sentences=0, threads=1)  # fmt: skip
    cli_out, py_out = cli / "m", py / "m"
    argv = ["train", "--out", str(cli_out)]
    for name, value in fields.items():
        flag = "--" + name.replace("_", "-")
        argv += [flag, *value] if isinstance(value, list) else [flag, str(value)]
    assert main(argv) == 0
    capsys.readouterr()
    result = babelspace.train(output=py_out, **fields)
    assert result.config.max_steps == 2 and result.output == py_out
    assert (cli_out / "model.safetensors").read_bytes() == (py_out / "model.safetensors").read_bytes()
    logs = [json.loads((d / "babelspace_training.json").read_text()) for d in (cli_out, py_out)]
    assert logs[0]["config"] | {"output": ""} == logs[1]["config"] | {"output": ""}
    assert logs[0]["history"] == logs[1]["history"]


# ----------------------------------------------------------------------------- Python's words
def test_python_errors_speak_python(tmp_path: Path, tiny_model_dir: Path) -> None:
    src, tgt = _lines(tmp_path / "a.en", EN[:3]), _lines(tmp_path / "a.de", DE[:3])
    with pytest.raises(ValueError, match=r"align\(\) with method='embeddings' needs a model") as exc:
        babelspace.align(src, tgt, out=tmp_path / "o.tsv")
    assert "--" not in str(exc.value)
    with pytest.raises(TypeError, match="unexpected keyword argument.*max_stepz"):
        babelspace.train(max_stepz=3)
    with pytest.raises(TypeError, match="model must be a name"):
        babelspace.mine(src, tgt, model=3, out=tmp_path / "m.tsv")
    with pytest.raises(ValueError, match="backend='onnx'|'openvino' or static=True"):
        babelspace.export(tiny_model_dir, tmp_path / "x")
    with pytest.raises(TypeError, match="list of strings or the path"):
        babelspace.encode(tiny_model_dir, 42)


def test_align_texts_takes_a_model_path(tiny_model_dir: Path) -> None:
    """A path string is loaded, not mistaken for an encoder (``str`` has an ``encode`` method too)."""
    from babelspace.mining.align import align_texts
    from babelspace.mining.encode import EncodeOptions

    opts = EncodeOptions(device="cpu")
    by_path, _ = align_texts([(EN[:4], DE[:4])], model=str(tiny_model_dir), opts=opts)
    from sentence_transformers import SentenceTransformer

    loaded, _ = align_texts([(EN[:4], DE[:4])], model=SentenceTransformer(str(tiny_model_dir), device="cpu"))
    assert by_path[0].blocks == loaded[0].blocks
    with pytest.raises(ValueError, match="needs a model"):
        align_texts([(EN[:4], DE[:4])])
