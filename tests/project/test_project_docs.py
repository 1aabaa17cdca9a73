"""The product (code, docs, benchmarks) cites only what users have, and its doc links resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The development note kept outside the repository; spelled in two parts so this file does not
#: mention it either.
DEV_NOTE = "REFERENCE" + ".md"

#: ``[text](target)`` and ``![alt](target)``; the target ends at whitespace or ``)``.
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")


def _product_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder in ("src", "docs", "bench"):
        files += [p for p in sorted((ROOT / folder).rglob("*")) if p.is_file()]
    return [p for p in files if "__pycache__" not in p.parts and ".egg-info" not in str(p)]


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def relative_links(text: str) -> list[str]:
    """Targets of the markdown links in ``text`` that point into the repository: no URL scheme, no
    bare ``#anchor``, nothing inside code blocks or inline code. The ``#fragment`` is dropped."""
    text = _INLINE_CODE.sub("", _FENCE.sub("", text))
    out = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
            continue
        out.append(target.split("#", 1)[0])
    return out


def citations(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line of ``text`` that names the development note."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if DEV_NOTE in line]


def test_no_product_file_cites_the_development_note() -> None:
    offenders = []
    for path in _product_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary files (images, data) carry no citations
        offenders += [f"{path.relative_to(ROOT)}:{n}: {line}" for n, line in citations(text)]
    assert not offenders, f"{DEV_NOTE} is not shipped to users; cite docs/ or papers:\n" + "\n".join(
        offenders
    )


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_markdown_links_resolve(doc: Path) -> None:
    missing = [
        target
        for target in relative_links(doc.read_text(encoding="utf-8"))
        if not (doc.parent / target).exists()
    ]
    assert not missing, f"{doc.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_link_extraction_sees_relative_links_and_skips_the_rest() -> None:
    text = (
        "See [the recipe](distillation.md#the-default-recipe) and ![plot](img/a.png).\n"
        "[web](https://example.org/x.md), [anchor](#offline-resources), `[code](nope.md)`\n"
        "```\n[fenced](also-nope.md)\n```\n"
    )
    assert relative_links(text) == ["distillation.md", "img/a.png"]


def test_the_checks_would_catch_a_dangling_link_and_a_citation(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"[gone](missing.md) and [here](doc.md)\nsee {DEV_NOTE} §5\n", encoding="utf-8")
    links = relative_links(doc.read_text(encoding="utf-8"))
    assert [t for t in links if not (doc.parent / t).exists()] == ["missing.md"]
    assert citations(doc.read_text(encoding="utf-8")) == [(2, f"see {DEV_NOTE} §5")]
    assert citations("see docs/resources.md") == []


def test_resources_doc_describes_the_e5s1_reader() -> None:
    """docs/resources.md is what e5_small.py cites for the file format: it must keep describing it."""
    from babelspace.resources import e5_small

    doc = (ROOT / "docs" / "resources.md").read_text(encoding="utf-8")
    assert "docs/resources.md" in (e5_small.__doc__ or "")
    assert "## The E5S1 file" in doc
    for fact in ("E5S1", f"{e5_small.QK} values", "(nibble − 8)", "emb.word", "l{i}.fo.w"):
        assert fact in doc, fact


def _pip_install(text: str, before: str = "") -> str:
    """The first ``pip install ...`` command in ``text`` (that ``&& before`` follows, when given), up
    to ``&&`` or the end of the line, without ``-q``."""
    m = re.search(r"pip install ([^&\n]*)" + (rf"&& {re.escape(before)}" if before else ""), text)
    assert m, "no pip install command"
    return " ".join(w for w in m.group(1).split() if w != "-q")


def test_readme_install_is_what_ci_runs() -> None:
    """The README's install command and .ci/run install the same extras with the same constraints."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _pip_install(readme, "HF_HUB_OFFLINE=1 babelspace train") == _pip_install(ci)  # the dev line
    constraints = re.search(r"-c (\S+)", _pip_install(ci))
    assert constraints and (ROOT / constraints.group(1)).is_file()
    pins = (ROOT / constraints.group(1)).read_text(encoding="utf-8")
    assert re.search(r"^torch==\d", pins, re.M)  # the exact torch CI runs, inside pyproject's range
