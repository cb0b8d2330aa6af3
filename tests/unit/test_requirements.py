"""kfstack's requirements install beside a team's: ranges with reasons, and no second distribution
of a library a team has (pyproject.toml; docs/installing.md)."""

from __future__ import annotations

import re
import tomllib

import pytest

from kfstack import distributions
from kfstack.errors import PlatformNotAvailableError
from tests.conftest import REPO_ROOT

PYPROJECT = (REPO_ROOT / "pyproject.toml").read_text()
PROJECT = tomllib.loads(PYPROJECT)["project"]
EXTRAS = PROJECT["optional-dependencies"]
# The CI habits pin exactly on purpose (a new ruff or mypy is a change of its own).
LINT_TOOLS = {"ruff", "mypy", "import-linter"}
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _name(requirement: str) -> str:
    match = NAME.match(requirement)
    assert match, requirement
    return match.group(1).lower().replace("_", "-")


def _library_requirements() -> list[tuple[str, str]]:
    """(where, requirement) of the core and every extra but the development tools."""
    found = [("dependencies", r) for r in PROJECT["dependencies"]]
    for extra, requirements in EXTRAS.items():
        found += [(f"[{extra}]", r) for r in requirements if _name(r) != "kfstack"]
    return found


def test_every_library_requirement_is_a_range_with_a_floor():
    exact = [
        f"{where} {r}"
        for where, r in _library_requirements()
        if ("==" in r or "~=" in r) and _name(r) not in LINT_TOOLS
    ]
    assert exact == []
    unbounded = [
        f"{where} {r}"
        for where, r in _library_requirements()
        if ">=" not in r and _name(r) not in LINT_TOOLS | {"types-pyyaml", "grpcio-tools", "aiobotocore"}
    ]
    # grpcio-tools is capped (not floored) against protobuf 7, aiobotocore only asks for its boto3
    # extra, types-PyYAML follows PyYAML: each says so beside it.
    assert unbounded == []


def test_every_requirement_says_why():
    """Each requirement of pyproject.toml's [project] tables has a comment above it, with no blank
    line between; consecutive requirements share the comment of their group."""
    project = PYPROJECT[PYPROJECT.index("[project]") : PYPROJECT.index("[project.scripts]")]
    commented, uncommented = False, []
    for line in project.splitlines():
        stripped = line.strip()
        if not stripped or stripped == "]":
            commented = False
        elif stripped.startswith("#"):
            commented = True
        elif stripped.startswith('"') or re.match(r"[a-z0-9-]+ = \[", stripped):
            requirements = re.findall(r'"([^"]+)"', stripped.partition("= [")[2] or stripped)
            own = [r for r in requirements if _name(r) != "kfstack" and re.search(r"[<>=~]", r)]
            if own and not commented:
                uncommented.append(stripped)
    assert uncommented == []


@pytest.mark.parametrize("module", sorted(distributions.DISTRIBUTIONS))
def test_a_library_of_several_distributions_is_only_ever_its_own_extras(module):
    """No feature extra requires onnxruntime, tensorflow(-cpu) or xgboost(-cpu): beside a team's
    GPU build it would install the CPU one over it. Each distribution is an extra of its name."""
    names = set(distributions.DISTRIBUTIONS[module])
    holders = {extra for extra, requirements in EXTRAS.items() for r in requirements if _name(r) in names} | {
        "core" for r in PROJECT["dependencies"] if _name(r) in names
    }
    assert holders == names
    for extra in names:
        assert _name(EXTRAS[extra][-1]) == extra


def test_requiring_a_missing_library_names_the_extras_that_provide_it(monkeypatch):
    monkeypatch.setattr(distributions.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(PlatformNotAvailableError) as err:
        distributions.require("onnxruntime", "the onnx model server")
    assert str(err.value) == (
        "the onnx model server needs onnxruntime, and no distribution of it is installed: pip install "
        '"kfstack[onnxruntime]" or "kfstack[onnxruntime-gpu]" (the first is the CPU build; keep the '
        "one your environment already has)"
    )


def test_requiring_an_installed_library_imports_it():
    assert distributions.require("onnxruntime", "a test").__name__ == "onnxruntime"
