"""ONNX / OpenVINO backends: same vectors as torch, export cached by content hash, `babelspace export`."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from babelspace.errors import ResourceError
from babelspace.models import backends
from babelspace.models.backends import backend_file_name, load_backend_encoder, validate_backend
from babelspace.models.encoder import encode

# Five scripts: Latin, Cyrillic, Han, Arabic, Devanagari (plus Latin with diacritics).
SENTENCES = [
    "the king and the people of the city",
    "der könig und das volk der stadt",
    "Царь и народ города",
    "国王和城里的人民",
    "الملك وشعب المدينة",
    "राजा और नगर के लोग",
]
CALIBRATION = [*SENTENCES, "hello world", "le roi est dans la maison", "god is good"] * 4


def _installed(backend: str) -> bool:
    module = {"onnx": "optimum.onnxruntime", "openvino": "optimum.intel"}[backend]
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


BACKEND_CASES = [
    pytest.param(b, q, marks=pytest.mark.skipif(not _installed(b), reason=f"{b} backend not installed"))
    for b in ("onnx", "openvino")
    for q in ("none", "int8")
]


@pytest.fixture()
def small_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenVINO int8 calibrates on a few fixed sentences instead of the Bible (speed)."""
    monkeypatch.setattr(backends, "default_calibration_texts", lambda *a, **k: list(CALIBRATION))


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(1)


@pytest.mark.parametrize(("backend", "quantize"), BACKEND_CASES)
def test_backend_vectors_match_torch(
    tiny_model_dir: Path, isolated_cache: Path, small_calibration: None, backend: str, quantize: str
) -> None:
    ref = encode(load_backend_encoder(str(tiny_model_dir)), SENTENCES)
    model = load_backend_encoder(str(tiny_model_dir), backend, quantize)
    got = encode(model, SENTENCES)
    assert got.shape == ref.shape
    floor = 0.9999 if quantize == "none" else 0.99
    assert _cosines(got, ref).min() >= floor
    # the export went into the cache, not into the model's own folder
    assert not (tiny_model_dir / "onnx").exists() and not (tiny_model_dir / "openvino").exists()
    assert list((isolated_cache / "backends").glob(f"*/{backend_file_name(backend, quantize)}"))


def _counting_exporters(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    for key, fn in list(backends._EXPORTERS.items()):

        def spy(folder: Path, work: Path, _fn=fn, _key=key) -> None:
            calls.append(_key)
            _fn(folder, work)

        monkeypatch.setitem(backends._EXPORTERS, key, spy)
    return calls


def _perturbed_copy(src: Path, dst: Path) -> Path:
    """The same model with one weight changed (same file names and sizes, other bytes)."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(src), device="cpu")
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=gen))
    model.save(str(dst))
    return dst


@pytest.mark.skipif(not _installed("openvino"), reason="openvino backend not installed")
def test_export_cache_hits_then_misses_when_weights_change(
    tiny_model_dir: Path, isolated_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_exporters(monkeypatch)
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model_dir)
    first = encode(load_backend_encoder(str(model_dir), "openvino"), SENTENCES)
    assert calls == [("openvino", "none")]
    # a second load, and a copy of the same model elsewhere, reuse the export
    load_backend_encoder(str(model_dir), "openvino")
    shutil.copytree(model_dir, tmp_path / "renamed")
    load_backend_encoder(str(tmp_path / "renamed"), "openvino")
    assert calls == [("openvino", "none")]
    # retrained in place: other weights, same path -> exported again, and the vectors follow
    shutil.rmtree(model_dir)
    _perturbed_copy(tiny_model_dir, model_dir)
    second = encode(load_backend_encoder(str(model_dir), "openvino"), SENTENCES)
    assert calls == [("openvino", "none"), ("openvino", "none")]
    assert len(list((isolated_cache / "backends").iterdir())) == 2
    assert not np.allclose(first, second, atol=1e-6)


def test_invalid_backend_combinations_are_clear_errors() -> None:
    with pytest.raises(ResourceError, match="int8 needs --backend onnx or openvino"):
        validate_backend("torch", "int8")
    with pytest.raises(ResourceError, match="unknown backend"):
        validate_backend("tensorrt", "none")
    with pytest.raises(ResourceError, match="unknown quantisation"):
        validate_backend("onnx", "int4")


def test_cli_rejects_torch_int8(tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture) -> None:
    from babelspace.cli import main

    src = tmp_path / "in.txt"
    src.write_text("hello world\n")
    rc = main(
        ["encode", str(tiny_model_dir), str(src), "--out", str(tmp_path / "v.npy"), "--quantize", "int8"]
    )
    assert rc == 2
    assert "int8 needs --backend onnx or openvino" in capsys.readouterr().err
    assert not (tmp_path / "v.npy").exists()


def test_hub_id_is_not_exportable() -> None:
    with pytest.raises(ResourceError, match="not a local sentence-transformers folder"):
        load_backend_encoder("someone/some-model", "openvino")


_PLAIN_LOAD = """
import json, sys
from sentence_transformers import SentenceTransformer
m = SentenceTransformer(sys.argv[1], backend=sys.argv[2], model_kwargs={"file_name": sys.argv[3]})
v = m.encode(json.loads(sys.argv[4]), normalize_embeddings=True)
assert not any(k.startswith("babelspace") for k in sys.modules), "babelspace was imported"
print(json.dumps(v.tolist()))
"""


@pytest.mark.skipif(not _installed("openvino"), reason="openvino backend not installed")
def test_export_command_output_loads_with_plain_sentence_transformers(
    tiny_model_dir: Path,
    isolated_cache: Path,
    small_calibration: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    from babelspace.cli import main

    out = tmp_path / "exported"
    rc = main(
        ["export", str(tiny_model_dir), "--backend", "openvino", "--quantize", "int8", "--out", str(out)]
    )
    assert rc == 0
    file_name = "openvino/openvino_model_qint8_quantized.xml"
    assert (out / file_name).is_file() and (out / "modules.json").is_file()
    assert file_name in capsys.readouterr().out
    assert not (tiny_model_dir / "openvino").exists()  # --out leaves the source untouched
    proc = subprocess.run(
        [sys.executable, "-c", _PLAIN_LOAD, str(out), "openvino", file_name, json.dumps(SENTENCES)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "TOKENIZERS_PARALLELISM": "false"},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = np.asarray(json.loads(proc.stdout.strip().splitlines()[-1]), dtype=np.float32)
    ref = encode(load_backend_encoder(str(tiny_model_dir)), SENTENCES)
    assert _cosines(got, ref).min() >= 0.99


@pytest.mark.slow
@pytest.mark.skipif(not _installed("openvino"), reason="openvino backend not installed")
@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_e5_small_on_openvino_matches_torch(tmp_path: Path, quantize: str) -> None:
    """The real student: OpenVINO fp32 and int8 (calibrated on Bible training verses) vs torch."""
    ref = encode(load_backend_encoder("e5-small"), SENTENCES)
    got = encode(load_backend_encoder("e5-small", "openvino", quantize), SENTENCES)
    floor = 0.9999 if quantize == "none" else 0.99
    assert _cosines(got, ref).min() >= floor


def test_quiet_third_party_drops_known_noise_only(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from babelspace.logging_setup import quiet_third_party

    quiet_third_party()
    quiet_third_party()  # idempotent
    hf = logging.getLogger("transformers.modeling_utils")
    st = logging.getLogger("sentence_transformers.base.model")
    with caplog.at_level(logging.WARNING):
        hf.warning(
            "BertModel LOAD REPORT from: x\nKey | Status\npooler.dense.weight | UNEXPECTED\npooler.dense.bias | UNEXPECTED"
        )
        st.warning(
            "Default prompt name is set to 'query'. This prompt will be applied to all inference calls"
        )
        st.warning("The `tokenize` method is deprecated, please use `preprocess` instead.")
        hf.warning(
            "BertModel LOAD REPORT from: x\nKey | Status\nencoder.layer.0.attention.self.query.weight | MISSING"
        )
        st.warning("something else went wrong")
        st.error("Default prompt name is set to 'query' (an error is never dropped)")
    kept = [r.getMessage() for r in caplog.records]
    assert len(kept) == 3
    assert "encoder.layer.0.attention.self.query.weight" in kept[0]
    assert kept[1] == "something else went wrong"
    assert kept[2].startswith("Default prompt name")
