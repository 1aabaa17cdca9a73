"""A trained model's card says each thing once, in words (issue 43 item 4): languages and Bible
versions by name, the held-out task without its Python class, the table's own column labels, each
source described once, only the options that apply to the objective and only real non-defaults under
"Non-Default Hyperparameters"."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from babelspace.training.config import TrainConfig
from babelspace.training.output.model_card import hyperparameters, update_model_card

ROWS = [
    {
        "lang": lang,
        "before xx>en": 40.0,
        "before en>xx": 41.0,
        "after xx>en": 91.5,
        "after en>xx": 90.0,
        "after xx>T(en)": 88.25,
        "centred xx>T(en)": 87.0,
        "before xx>T(en)": 0.5,
        "teacher xx>en": 5.93,
        "teacher en>xx": 6.0,
    }
    for lang in ("de", "mean")
]
COMMAND = "babelspace train --max-steps 3 --langs de,fr"


def _cfg(**changes: object) -> dict:
    """A run's ``TrainConfig.to_dict()``, as ``babelspace train`` passes it to the card."""
    return TrainConfig(**{"max_steps": 3, "langs": ["de", "fr"], **changes}).to_dict()


def _card(tiny_model_dir: Path, folder: Path, cfg: dict, rows: list | None = ROWS) -> str:
    shutil.copytree(tiny_model_dir, folder)
    return update_model_card(folder, cfg, rows, COMMAND).read_text(encoding="utf-8")


def test_the_card_names_languages_versions_and_the_task_in_words(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    text = _card(tiny_model_dir, tmp_path / "m", _cfg())
    body = text.split("\n---\n", 1)[1]  # the text under the YAML metadata
    assert "- **Languages:** English, German, French" in body
    assert "Languages trained: English, German, French" in body
    assert "English: World English Bible 2000" in body and "German: Schlachter 1951" in body
    assert not re.search(r"\b(?:en|de|fr):[0-9a-z]\b", body), "a Bible version code"
    assert (
        "HeldOutTask" not in text
        and "babelspace.training" not in text
        and "babelspace.evaluation" not in text
    )
    assert "held-out table of `babelspace train`" in body
    assert (
        "column after" not in text
        and 'Tuned for: teacher space as exported (the "xx→teacher en (as exported)" column)' in body
    )
    assert "| language | xx→en | en→xx | xx→teacher en (as exported) |" in body  # the title it points at
    assert f"Trained with: `{COMMAND}`" in body


def test_each_source_is_described_once(tiny_model_dir: Path, tmp_path: Path) -> None:
    from babelspace.resources import RESOURCES

    text = _card(tiny_model_dir, tmp_path / "m", _cfg(data=["bible", "cldr:0.5"]))
    for name in ("bible", "cldr"):
        assert text.count(RESOURCES[name].description) == 1, name
    assert "#### bible\n" in text and "- bible\n" in text  # the template's dataset entries: the name only


def test_a_run_without_the_held_out_table_points_at_no_column(tiny_model_dir: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a house\tein Haus\n", encoding="utf-8")
    text = _card(
        tiny_model_dir, tmp_path / "m", _cfg(data=[str(pairs)], tgt_lang="de", langs=None), rows=None
    )
    assert (
        "Tuned for: teacher space as exported.\n" in text and "column" not in text.split("Tuned for")[1][:80]
    )


def test_only_the_objectives_options_and_real_non_defaults() -> None:
    non_default, every = hyperparameters(_cfg())
    assert set(non_default) == {"max_steps", "langs"}  # teacher, objective, recipe: defaults
    assert "teacher_contrast" in every and "english_cosine" in every  # the distillation's own
    for other in ("mask_ratio", "head_layers", "decoder_layers", "decoder_vocab", "contrastive_scale"):
        assert other not in every, other
    non_default, every = hyperparameters(_cfg(objective="mexma", lr=3e-5))
    assert "mask_ratio" in every and "teacher_contrast" not in every and "decoder_layers" not in every
    assert set(non_default) == {"objective", "max_steps", "langs", "lr"}


def test_the_rendered_hyperparameter_lists(tiny_model_dir: Path, tmp_path: Path) -> None:
    text = _card(tiny_model_dir, tmp_path / "m", _cfg())
    non_default = text.split("#### Non-Default Hyperparameters")[1].split("####")[0]
    assert "`max_steps`: 3" in non_default and "`teacher`" not in non_default
    every = text.split("#### All Hyperparameters")[1].split("</details>")[0]
    assert "`teacher_contrast`" in every and "`mask_ratio`" not in every and "`decoder_layers`" not in every


def test_a_four_column_tsv_names_its_languages(tmp_path: Path) -> None:
    """A run on a 4-column TSV (the quickstart's) listed English only: its rows name the languages."""
    from babelspace.training.output.model_card import _languages

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a house\tein Haus\ten\tde\na cat\tun chat\ten\tfr\n", encoding="utf-8")
    assert _languages({"data": [str(pairs)], "langs": None}) == ["en", "de", "fr"]
    two = tmp_path / "two.tsv"
    two.write_text("a house\tein Haus\n", encoding="utf-8")
    assert _languages({"data": [str(two)], "langs": None, "tgt_lang": "de"}) == ["en", "de"]
