"""The CLI starts without the heavy stack: building every parser (what ``--help`` and flag errors
need) imports neither torch nor sentence-transformers, transformers, datasets or faiss, so ``--help``
answers in well under a second whatever the machine is doing; ``--version`` names the package's
version."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

HEAVY = ("torch", "sentence_transformers", "transformers", "datasets", "faiss", "accelerate", "pyarrow")

_PROBE = """
import json, sys
from babelspace.cli import build_parser
parser = build_parser()
sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
for name, p in sub.choices.items():
    p.format_help()
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[1])))
print(json.dumps({"commands": sorted(sub.choices), "heavy": heavy}))
"""


def test_building_every_parser_imports_no_heavy_library():
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(HEAVY)], capture_output=True, text=True, check=True
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"train", "eval", "mine", "encode"} <= set(found["commands"])
    assert found["heavy"] == [], f"building the parsers imported {found['heavy']}"


def test_help_of_a_subcommand_imports_no_heavy_library():
    code = (
        "import sys\nfrom babelspace.cli import main\n"
        "try:\n    main(['train', '--help'])\nexcept SystemExit:\n    pass\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--max-steps" in out.stdout and "--help-all" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_version_flag_prints_the_installed_version():
    out = subprocess.run(
        [sys.executable, "-m", "babelspace", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"babelspace {version('babelspace')}"


def test_train_flags_sit_in_groups_by_concern_not_a_catch_all():
    from babelspace.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    groups = {
        g.title: [a.option_strings[0] for a in g._group_actions] for g in sub.choices["train"]._action_groups
    }
    assert groups["options"] == ["-h", "--help-all"]
    assert {"run", "data", "output", "optimisation"} <= set(groups)
    assert next(iter(groups)).startswith("positional") and list(groups)[2].startswith("essential")
    assert "--mask-ratio" in next(flags for title, flags in groups.items() if title.startswith("MEXMA"))
