"""Property-based fuzzing of every corpus reader: random bytes, random column counts and random
Unicode give either a clean result or a ``BabelspaceError`` naming the file (and ``file:line`` for
a bad line), never another exception.

Deterministic (``derandomize=True``): the same cases run in CI every time. Cases per run:
``FUZZ_EXAMPLES`` per test (300; ``BABELSPACE_FUZZ_EXAMPLES`` sets it) x 7 tests.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from babelspace.data.pairs import ParallelCorpus  # noqa: E402
from babelspace.data.readers import load_parallel, read_aligned, read_tsv  # noqa: E402
from babelspace.errors import BabelspaceError, CorpusFormatError  # noqa: E402
from babelspace.mining.corpus import SentenceFile, read_sentences  # noqa: E402

FUZZ_EXAMPLES = int(os.environ.get("BABELSPACE_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Characters that stress line splitting, whitespace normalisation and decoding.
TRICKY = "\t\r\n\x00\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\ufeff\u200b\u00a0 \ud7ff\U0001f600éß中"
text_chars = st.one_of(st.sampled_from(list(TRICKY)), st.characters(blacklist_categories=("Cs",)))
cell = st.text(text_chars, max_size=12)
lang = st.sampled_from(["en", "de", "fr", "xx", "EN", "de-DE", "zz-Latn", "", " de ", "123"])


@st.composite
def rows(draw: st.DrawFn) -> bytes:
    """Lines of random column counts (0-6 cells), random cells and language-looking columns."""
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        n = draw(st.integers(0, 6))
        cells = [draw(cell) for _ in range(n)]
        if n == 4 and draw(st.booleans()):
            cells[2:] = [draw(lang), draw(lang)]
        lines.append("\t".join(cells))
    ending = draw(st.sampled_from(["\n", "\r\n", "\r", ""]))
    data = ending.join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    if draw(st.booleans()) and data:  # corrupt one byte
        i = draw(st.integers(0, len(data) - 1))
        data = data[:i] + bytes([draw(st.integers(0x80, 0xFF))]) + data[i + 1 :]
    return data


raw_bytes = st.binary(max_size=300)
file_content = st.one_of(rows(), raw_bytes)


def _check_error(exc: BabelspaceError, *paths: Path | str) -> None:
    msg = str(exc)
    assert "\n" not in msg.split(" (")[0], msg  # the headline is one line
    assert any(str(p) in msg for p in paths), msg
    if isinstance(exc, CorpusFormatError) and exc.line is not None:
        assert exc.line >= 1 and f"{exc.path}:{exc.line}" in msg, msg


def _check_corpus(corpus: ParallelCorpus) -> None:
    for p in corpus.pairs:
        assert p.src and p.tgt and p.src.strip() == p.src and "\n" not in p.src + p.tgt
        assert p.src_lang and p.tgt_lang


def _run(fn, *paths: Path | str) -> object | None:
    try:
        return fn()
    except BabelspaceError as exc:
        _check_error(exc, *paths)
        return None


@FUZZ
@given(data=file_content, tgt=st.sampled_from([None, "de"]), skip=st.booleans())
def test_read_tsv_fuzz(data: bytes, tgt: str | None, skip: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.tsv"
        path.write_bytes(data)
        corpus = _run(lambda: read_tsv(path, tgt_lang=tgt, skip_bad_lines=skip), path)
        if corpus is not None:
            _check_corpus(corpus)
            assert corpus.report.kept == len(corpus.pairs) <= corpus.report.read


@FUZZ
@given(a=file_content, b=file_content, skip=st.booleans())
def test_read_aligned_fuzz(a: bytes, b: bytes, skip: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        pa, pb = Path(d) / "x.en", Path(d) / "x.de"
        pa.write_bytes(a)
        pb.write_bytes(b)
        corpus = _run(lambda: read_aligned(pa, pb, skip_bad_lines=skip), pa, pb)
        if corpus is not None:
            _check_corpus(corpus)


@FUZZ
@given(data=file_content, ids=st.sampled_from([None, True, False]), skip=st.booleans())
def test_read_sentences_fuzz(data: bytes, ids: bool | None, skip: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.txt"
        path.write_bytes(data)
        found = _run(lambda: read_sentences(path, ids=ids, skip_bad_lines=skip), path)
        if found is not None:
            assert isinstance(found, SentenceFile) and found.texts
            assert len(set(found.texts)) == len(found.texts)
            assert all(t and "\n" not in t for t in found.texts)


@FUZZ
@given(
    data=file_content, name=st.sampled_from(["c.tsv", "c.txt", "c"]), langs=st.sampled_from([None, ["de"]])
)
def test_load_parallel_file_fuzz(data: bytes, name: str, langs: list[str] | None) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(data)
        corpus = _run(lambda: load_parallel(str(path), langs=langs, tgt_lang="de"), path)
        if corpus is not None:
            _check_corpus(corpus)


@FUZZ
@given(a=file_content, b=file_content)
def test_load_parallel_aligned_spec_fuzz(a: bytes, b: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        pa, pb = Path(d) / "p.en", Path(d) / "p.fr"
        pa.write_bytes(a)
        pb.write_bytes(b)
        corpus = _run(lambda: load_parallel(f"aligned:{pa}+{pb}"), pa, pb)
        if corpus is not None:
            _check_corpus(corpus)


@FUZZ
@given(src=lang, tgt=lang, data=rows())
def test_language_arguments_fuzz(src: str, tgt: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.tsv"
        path.write_bytes(data)
        # a bad language argument is named as such (no file involved)
        corpus = _run(lambda: read_tsv(path, src_lang=src or None, tgt_lang=tgt or None), path, "<argument>")
        if corpus is not None:
            _check_corpus(corpus)


@FUZZ
@given(spec=st.text(text_chars, max_size=30))
def test_load_parallel_spec_string_fuzz(spec: str) -> None:
    if spec.strip() in {"bible"} or spec.startswith(("cldr", "mono-en")):
        return
    with tempfile.TemporaryDirectory() as d:
        try:
            load_parallel(str(Path(d) / spec) if spec and "\x00" not in spec else spec)
        except BabelspaceError:
            pass
