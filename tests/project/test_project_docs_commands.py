"""Every ``babelspace ...`` command quoted in README.md and docs/ goes through the real parser: an
unknown flag, a bad choice or a deprecated spelling in the docs fails this test."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from babelspace.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_STOP = re.compile(r"\s(?:#|\||&&|;|>|2>)(?:\s|$)|`")  # a comment, pipe, chain or redirect ends a command


_SHELL_FENCES = {"", "bash", "sh", "shell", "console", "text"}
# where a command starts: a line's start, after `&&`, `python -m`, `time -v`, env assignments, torchrun
_START = re.compile(r"(?:^|&&\s*|\s-m\s+|\btime(?:\s+-v)?\s+|\b[A-Z_]+=\S*\s+)babelspace\s+(?=[a-z])")
_PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z0-9_]*|N|<[^>]*>)$")


def _snippets(text: str) -> list[str]:
    """Shell lines of fenced code blocks (backslash continuations joined) and inline code spans."""
    out, fence = [], None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fence = None if fence is not None else line.strip().strip("`").strip()
        elif fence is not None:
            if fence not in _SHELL_FENCES:
                i += 1
                continue
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i].strip()
            out.append(line)
        elif line.startswith("    ") and line.strip().startswith("babelspace "):  # an indented block
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i].strip()
            out.append(line)
        else:
            out.extend(re.findall(r"`([^`]+)`", line))
        i += 1
    return out


def commands_in(text: str) -> list[str]:
    """The ``babelspace`` command lines of a markdown text, without the word ``babelspace``."""
    found = []
    for snippet in _snippets(text):
        for m in _START.finditer(snippet.strip()):
            rest = snippet.strip()[m.end() :]
            stop = _STOP.search(" " + rest)
            rest = rest[: stop.start() - 1] if stop else rest
            rest = re.sub(r"\[[^\]]*\|[^\]]*\]", " ", rest)  # [a | b] alternatives: not one command
            rest = re.sub(r"<[^>]*>", "N", rest).replace("[", " ").replace("]", " ").replace("...", " ")
            found.append(" ".join(rest.split()))
    return found


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


#: Spellings an earlier version accepted (now unknown flags; named here for a clearer failure).
RETIRED = {"--output", "--json", "--quiet", "--max-len"}


def check_command(parser: argparse.ArgumentParser, command: str) -> str | None:
    """None when ``command`` parses; else why not."""
    try:
        tokens = shlex.split(command)
    except ValueError as exc:
        return f"cannot split: {exc}"
    tokens = [t.split("|")[0] if "|" in t.strip("|") else t for t in tokens]  # onnx|openvino: either
    subs = _subparsers(parser)
    if not tokens or tokens[0] not in subs:
        return f"unknown subcommand {tokens[:1]}"
    old = sorted({t.split("=")[0] for t in tokens[1:]} & RETIRED)
    if old:
        return f"retired spelling {', '.join(old)}"
    if len(tokens) == 1:
        return None  # `babelspace mine` named in prose: the subcommand exists
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(tokens)
    except SystemExit as exc:
        why = err.getvalue().strip().splitlines()[-1] if exc.code else ""
        if not why or "arguments are required" in why:
            return None  # --help, or a fragment quoted in prose (`babelspace mine --ray`)
        if "expected" in why and "argument" in why and tokens[-1].startswith("--") and tokens[-1] in why:
            return None  # prose naming a flag without its value (`babelspace train --data`)
        if any(_PLACEHOLDER.match(t) and f"'{t}'" in why for t in tokens):
            return None  # a placeholder where a number or choice goes (--workers N)
        return why
    return None


def test_the_extractor_finds_commands_and_the_check_catches_bad_ones() -> None:
    text = "run `babelspace train --max-steps 3` or\n```bash\nbabelspace mine --src a \\\n  --tgt b  # note\n```\n"
    assert commands_in(text) == ["train --max-steps 3", "mine --src a --tgt b"]
    parser = build_parser()
    assert check_command(parser, "train --max-steps 3") is None
    assert "unrecognized arguments" in check_command(parser, "train --no-such-flag 1")
    assert "invalid choice" in check_command(parser, "train --recipe nope")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_quoted_command_parses(doc: Path) -> None:
    parser = build_parser()
    bad = [
        (c, why) for c in commands_in(doc.read_text(encoding="utf-8")) if (why := check_command(parser, c))
    ]
    assert bad == [], "\n".join(f"babelspace {c}\n    -> {why}" for c, why in bad)
