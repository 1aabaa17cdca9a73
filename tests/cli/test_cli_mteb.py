"""``babelspace mteb``: an MTEB task run offline from a local copy of its dataset on a tiny saved
model, MTEB's result file written, and MTEB's model-index entry added to the card beside babelspace's
own; a missing or partial local copy is one error line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import EvalResult, ModelCard

from babelspace.cli import main
from babelspace.training.output.card_results import add_card_results

REPO, REVISION = "mteb/sts17-crosslingual-sts", "faeb762787bd10488a50c8b5be4a3b82e411949c"
EN_DE = [
    ("the king is in the city", "der könig ist in der stadt", 4.8),
    ("a dog sits on the mat", "ein hund sitzt", 3.1),
    ("good day", "guten tag", 4.2),
    ("the house is big", "das haus ist klein", 1.9),
    ("one two three", "gott ist herr", 0.2),
    ("rain today", "regen heute", 4.4),
    ("the people of the land", "das volk", 2.5),
    ("a cat and a dog", "eine stadt", 0.7),
]
EN_EN = [("hello world", "hello world", 5.0), ("the cat", "a dog", 1.0), ("big", "small", 0.5)]
# The Hub dataset card's config (the layout MTEB's fast loading of STS17 reads: one `default` config,
# every subset's rows in one `test` split told apart by a `lang` column).
DATASET_CARD = """---
configs:
- config_name: default
  data_files:
  - split: test
    path: data/test-*
---
"""


def _sts17_copy(folder: Path, rows: dict[str, list[tuple[str, str, float]]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "data").mkdir(parents=True)
    (folder / "README.md").write_text(DATASET_CARD)
    table = {"sentence1": [], "sentence2": [], "score": [], "lang": []}
    for lang, triples in rows.items():
        for s1, s2, score in triples:
            table["sentence1"].append(s1)
            table["sentence2"].append(s2)
            table["score"].append(score)
            table["lang"].append(lang)
    pq.write_table(pa.table(table), folder / "data" / "test-00000-of-00001.parquet")
    return folder


def _trained_folder(tiny_model_dir: Path, folder: Path) -> Path:
    """A saved folder with babelspace's card (model-index: the held-out Bible task) and the one
    training prompt under both of MTEB's prompt names, as ``babelspace train`` saves it."""
    from babelspace.training.output.model_card import update_model_card
    from tests.training.test_training_model_card import CFG, COMMAND, FULL_ROWS

    shutil.copytree(tiny_model_dir, folder)
    cfg_path = folder / "config_sentence_transformers.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["prompts"] = {"query": "query: ", "document": "query: "}
    cfg["default_prompt_name"] = "query"
    cfg_path.write_text(json.dumps(cfg))
    update_model_card(folder, CFG, FULL_ROWS, COMMAND)
    return folder


def _spearmans(folder: Path, pairs: list[tuple[str, str, float]], prompts: list[str]) -> list[float]:
    """Spearman of the gold scores and the pairs' cosines, encoded with each of ``prompts``."""
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    out = []
    for prompt in prompts:
        a, b = (model.encode([p[i] for p in pairs], prompt=prompt) for i in (0, 1))
        cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        out.append(float(spearmanr([p[2] for p in pairs], cos).statistic))
    return out


@pytest.fixture()
def offline_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """``main`` sets these for ``mteb``; monkeypatch puts them back for the other tests."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def _model_index(readme: Path) -> list[EvalResult]:
    return ModelCard(readme.read_text()).data.eval_results


def test_mteb_writes_its_result_file_and_its_card_entry_beside_babelspaces(
    tiny_model_dir: Path, tmp_path: Path, offline_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mteb")
    folder = _trained_folder(tiny_model_dir, tmp_path / "student")
    readme = folder / "README.md"
    before = readme.read_text()
    own_before = [r for r in _model_index(readme) if r.dataset_type == "babelspace-bible-test-books"]
    data = _sts17_copy(tmp_path / "sts17", {"en-de": EN_DE, "en-en": EN_EN})
    out = tmp_path / "results"
    argv = ["mteb", str(folder), "--task", f"STS17={data}", "--languages", "deu", "--out", str(out)]
    assert main([*argv, "--update-card", "--no-progress", "--batch-size", "4", "--device", "cpu"]) == 0

    files = list(out.glob("results/local__student/*/STS17.json"))
    assert len(files) == 1, capsys.readouterr().out
    result = json.loads(files[0].read_text())
    assert result["task_name"] == "STS17" and result["dataset_revision"] == REVISION
    (scores,) = result["scores"]["test"]  # en-de only: the one subset in German
    assert scores["hf_subset"] == "en-de" and scores["main_score"] == scores["cosine_spearman"]
    want, without_prompt = _spearmans(folder, EN_DE, ["query: ", ""])
    assert scores["main_score"] == pytest.approx(want, abs=1e-5)  # MTEB encodes with the saved prompt
    assert want != pytest.approx(without_prompt, abs=1e-3)  # which changes the score
    assert (files[0].parent / "model_meta.json").is_file()

    after = readme.read_text()
    index = _model_index(readme)
    (entry,) = [r for r in index if r.dataset_type == REPO]
    assert (entry.task_type, entry.dataset_config, entry.dataset_split) == (
        "sentence-similarity",
        "en-de",
        "test",
    )
    assert entry.dataset_revision == REVISION and entry.source_name == "MTEB"
    assert entry.metric_type == "cosine_spearman" and entry.metric_value == pytest.approx(
        scores["main_score"]
    )
    assert [r for r in index if r.dataset_type == "babelspace-bible-test-books"] == own_before
    assert "mteb" in ModelCard(after).data.tags
    assert after.split("\n---\n", 1)[1] == before.split("\n---\n", 1)[1]  # the card's text, unchanged

    from babelspace.training.output.model_card import card_for_hub

    hub = ModelCard(card_for_hub(folder, "org/student")).data.eval_results  # `push` renders it again
    assert [r.dataset_type for r in hub].count(REPO) == 1
    assert [r for r in hub if r.dataset_type == "babelspace-bible-test-books"] == own_before


def test_a_missing_local_copy_is_one_line_naming_the_download(
    tiny_model_dir: Path, tmp_path: Path, offline_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mteb")
    missing = tmp_path / "sts17"
    argv = ["mteb", str(tiny_model_dir), "--task", f"STS17={missing}", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"no local copy of its data ({REPO}) at {missing}" in err
    assert f"`hf download {REPO} --repo-type dataset --revision {REVISION} --local-dir {missing}`" in err
    assert not (tmp_path / "r").exists()  # refused before anything was run or written


def test_a_copy_without_the_chosen_subsets_or_saved_to_disk_is_refused(
    tmp_path: Path, offline_env: None
) -> None:
    pytest.importorskip("mteb")
    from babelspace.errors import ResourceError
    from babelspace.integrations.mteb.local_data import TaskSource, load_task

    data = _sts17_copy(tmp_path / "sts17", {"en-de": EN_DE})
    with pytest.raises(ResourceError, match=r"STS17: the data in .* lacks ko-ko, ar-ar") as exc:
        load_task(TaskSource("STS17", data))  # every subset asked for, one in the copy
    assert f"hf download {REPO}" in str(exc.value)
    assert len(load_task(TaskSource("STS17", data), ["deu"]).dataset["en-de"]["test"]) == len(EN_DE)
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "dataset_dict.json").write_text('{"splits": ["test"]}')
    with pytest.raises(ResourceError, match="is a `save_to_disk` folder"):
        load_task(TaskSource("STS17", tmp_path / "saved"))
    with pytest.raises(ResourceError, match="Did you mean: 'STS17'"):
        load_task(TaskSource("STS171", data))


def test_a_hub_cache_is_read_at_the_revision_mteb_pins(tmp_path: Path, offline_env: None) -> None:
    pytest.importorskip("mteb")
    from babelspace.errors import ResourceError
    from babelspace.integrations.mteb.local_data import TaskSource, load_task

    repo_dir = tmp_path / "hub" / "datasets--mteb--sts17-crosslingual-sts"
    _sts17_copy(repo_dir / "snapshots" / REVISION, {"en-de": EN_DE})
    task = load_task(TaskSource("STS17", tmp_path), ["deu"])  # HF_HOME-style: <dir>/hub/datasets--...
    assert task.dataset["en-de"]["test"]["sentence2"] == [p[1] for p in EN_DE]
    (repo_dir / "snapshots" / REVISION).rename(repo_dir / "snapshots" / "0123abc")
    with pytest.raises(ResourceError, match=f"at revision\\(s\\) 0123abc, not {REVISION}"):
        load_task(TaskSource("STS17", tmp_path / "hub"), ["deu"])


def _result(config: str, value: float) -> EvalResult:
    return EvalResult(
        task_type="sentence-similarity",
        dataset_type=REPO,
        dataset_name=f"STS17 ({config})",
        dataset_config=config,
        dataset_split="test",
        dataset_revision=REVISION,
        metric_type="cosine_spearman",
        metric_value=value,
        source_name="MTEB",
        source_url="https://github.com/embeddings-benchmark/mteb/",
    )


def test_card_results_replace_the_same_entry_and_keep_the_others() -> None:
    card = "---\nlicense: mit\nfoo: [1, 2]\n---\n\n# A model\n\nits text\n"
    once = add_card_results(card, [_result("en-de", 0.1), _result("en-en", 0.2)], ["mteb"], "org/m")
    twice = add_card_results(once, [_result("en-de", 0.3)], ["mteb"])
    data = ModelCard(twice).data
    assert sorted((r.dataset_config, r.metric_value) for r in data.eval_results) == [
        ("en-de", 0.3),
        ("en-en", 0.2),
    ]
    assert data.tags == ["mteb"] and data.model_name == "org/m"
    assert data.license == "mit" and data.to_dict()["foo"] == [1, 2]
    assert twice.endswith("# A model\n\nits text\n")
