"""pyproject.toml declares what the package imports, with an SPDX licence, extras that never pin the
default stack, and lower bounds that constraints/min.txt lists (issue 33 item 2)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
#: Import names whose distribution is spelled otherwise.
DISTRIBUTION = {
    "faiss": "faiss-cpu",
    "sentence_transformers": "sentence-transformers",
    "optimum": "optimum-intel",
    "yaml": "pyyaml",
}
#: Imported only inside the OpenVINO environment of README "Installing" (no extra on purpose).
SEPARATE_ENVIRONMENT = {"optimum-intel"}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imported_distributions() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "src" / "babelspace").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top != "babelspace" and top not in sys.stdlib_module_names:
                    found.add(DISTRIBUTION.get(top, top).lower().replace("_", "-"))
    return found


def test_every_imported_package_is_declared() -> None:
    declared = {_name(r) for r in PROJECT["dependencies"]}
    declared |= {_name(r) for reqs in PROJECT["optional-dependencies"].values() for r in reqs}
    missing = _imported_distributions() - declared - SEPARATE_ENVIRONMENT
    assert not missing, f"imported by src/babelspace but not in pyproject.toml: {sorted(missing)}"


def test_licence_is_an_spdx_string_with_its_file() -> None:
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["license-files"] == ["LICENSE"]
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")[:200]
    assert not any(
        c.startswith("License ::") for c in PROJECT["classifiers"]
    )  # PEP 639: the SPDX string only


def test_no_extra_pins_the_default_stack() -> None:
    stack = {_name(r) for r in PROJECT["dependencies"]}
    for extra, reqs in PROJECT["optional-dependencies"].items():
        pinned = {_name(r) for r in reqs} & stack
        assert not pinned, f"extra {extra!r} constrains {sorted(pinned)} of the default stack"
    assert (
        "openvino" not in PROJECT["optional-dependencies"] and "onnx" not in PROJECT["optional-dependencies"]
    )


def test_min_constraints_are_the_lower_bounds() -> None:
    pins = {}
    for line in (ROOT / "constraints" / "min.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[_name(name)] = version.strip()
    for requirement in PROJECT["dependencies"]:
        floor = re.search(r">=([0-9.]+)", requirement)
        assert floor, f"{requirement}: no lower bound"
        name = _name(requirement)
        assert name in pins, f"constraints/min.txt lacks {name}"
        got = [int(p) for p in pins[name].split(".")]
        want = [int(p) for p in floor.group(1).split(".")]
        assert got[: len(want)] >= want and got[: len(want) - 1] == want[:-1], (
            name,
            pins[name],
            floor.group(1),
        )


def test_readme_has_a_user_install_apart_from_the_dev_install() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    installs = re.findall(r"pip install ([^\n`&]*)", readme)
    # the two commands (tests/project/test_project_docs.py)
    assert any(cmd.strip().endswith('-e ".[offline,dev]"') for cmd in installs), installs
    assert any(cmd.strip() == '".[offline]"' for cmd in installs), installs
