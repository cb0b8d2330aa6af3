"""The components' settings arguments, written from the parameter catalog: each setting's type,
default and description is declared once (:data:`kfstack.pipelines.parameters.CATALOG`, which
takes a settings class's field where one reads it) and every component that takes the setting
gets it from there.

KFP embeds a lightweight component's source in the compiled spec, and kfp.local's subprocess
runner refuses containerized components, so a component's signature stays literal Python in
its ``component.py``. This module writes the literal part that is the catalog's: the arguments
named like a catalog parameter that have a default, as one block between two marker comments,
their ``Args`` entries in the docstring, in the catalog's words, and their rows in the
component README's Inputs table.
``tests/components/test_signatures.py`` writes them again in memory and fails on any difference,
so a setting is changed in the catalog and ``python -m kfstack.pipelines.signatures`` is run.

A component takes the catalog's settings its signature names, and every setting of the settings
classes :data:`SETTINGS_CLASSES` gives it (those its stage builds whole): a field added to such a
class, with its catalog entry, reaches the component's signature, docstring and README when this
module runs, with no other edit.

An argument a component requires (``platform``, ``serving_name`` of the deployment...) is the
component's own and stays as written.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pathlib
import re
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

from kfp.components import BaseComponent

import kfstack.components
from kfstack.kubernetes.inference_service import ServingRequest
from kfstack.kubernetes.placement import Placement, ServingPlacement, TrainingPlacement, TuningPlacement
from kfstack.kubernetes.spark_application import SparkJobPlacement, SparkResources
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.gate import GateRule
from kfstack.pipelines.parameters import CATALOG, Parameter
from kfstack.serving.canary import CanaryThresholds
from kfstack.training.settings import JobTopology
from kfstack.tuning.spec import TuningSettings

BEGIN = "    # Settings from the parameter catalog, written by python -m kfstack.pipelines.signatures."
END = "    # End of the catalog's settings."
# ruff's line length (pyproject.toml): the docstring lines written here stay within it.
LINE_LENGTH = 110
_ARGUMENT_LINE = re.compile(r"^    (\w+): ")
_ENTRY = re.compile(r"^        (\w+): ")
_ROW = re.compile(r"^\| `(\w+)` \|")

# Component -> the settings classes its stage builds whole from its arguments: every catalog
# setting read from a field declared in one of them is the component's (a field inherited from
# a base class listed elsewhere is not: a deployment's pods take no image pull Secret).
SETTINGS_CLASSES: dict[str, tuple[type, ...]] = {
    "spark_job": (SparkResources, SparkJobPlacement, Placement),
    "distributed_training": (JobTopology, TrainingPlacement, Placement),
    "hyperparameter_tuning": (TuningSettings, TuningPlacement, JobTopology, TrainingPlacement, Placement),
    "model_deployment": (ServingRequest, ServingPlacement, CanaryThresholds),
    "data_drift": (DriftThresholds,),
    "gate_model": (GateRule,),
}


@dataclasses.dataclass(frozen=True)
class ComponentSource:
    """A component, its ``component.py``, and the catalog parameters it takes as settings."""

    path: pathlib.Path
    component: BaseComponent
    settings: list[Parameter]

    @property
    def function(self) -> str:
        """The component function's name."""
        return str(self.component.python_func.__name__)


def component_sources() -> Iterator[ComponentSource]:
    """Every component kfstack ships (``kfstack/components/<group>/<name>/component.py``)."""
    root = pathlib.Path(kfstack.components.__file__).parent
    for path in sorted(root.glob("*/*/component.py")):
        parts = path.relative_to(root).with_suffix("").parts
        module = importlib.import_module(".".join(("kfstack.components", *parts)))
        for value in vars(module).values():
            if isinstance(value, BaseComponent) and value.python_func.__module__ == module.__name__:
                signature = inspect.signature(value.python_func)
                settings = [
                    CATALOG[name]
                    for name, argument in signature.parameters.items()
                    if name in CATALOG and argument.default is not inspect.Parameter.empty
                ]
                classes = SETTINGS_CLASSES.get(value.python_func.__name__, ())
                settings += [p for p in CATALOG if p.owner in classes and p not in settings]
                yield ComponentSource(path, value, settings)


def literal(value: Any) -> str:
    """``value`` as ruff formats a default: text in double quotes."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def written(source: ComponentSource, text: str) -> str:
    """``text`` (the component's source) with its settings' arguments and docstring entries
    written from the catalog."""
    if not source.settings:
        return text
    lines = text.split("\n")
    start = lines.index(next(line for line in lines if line.startswith(f"def {source.function}(")))
    end = start + next(i for i, line in enumerate(lines[start:]) if line.startswith(")"))
    names = {p.name for p in source.settings}
    kept: list[str] = []
    block_at = None
    for line in lines[start + 1 : end]:
        found = _ARGUMENT_LINE.match(line)
        if line in (BEGIN, END) or (found and found.group(1) in names):
            block_at = len(kept) if block_at is None else block_at
            continue
        kept.append(line)
    block = [
        BEGIN,
        *(f"    {p.name}: {p.type.__name__} = {literal(p.default)}," for p in source.settings),
        END,
    ]
    assert block_at is not None
    signature = [*kept[:block_at], *block, *kept[block_at:]]
    lines = [*lines[: start + 1], *signature, *lines[end:]]
    return "\n".join(_with_entries(lines, {p.name: p.description for p in source.settings}))


def _with_entries(lines: list[str], descriptions: dict[str, str]) -> list[str]:
    """The docstring's ``Args`` entries of ``descriptions``' names in those words, in place."""
    out: list[str] = []
    index = 0
    missing = set(descriptions)
    while index < len(lines):
        found = _ENTRY.match(lines[index])
        if not (found and found.group(1) in descriptions):
            out.append(lines[index])
            index += 1
            continue
        name = found.group(1)
        missing.discard(name)
        out += _entry(name, descriptions[name])
        index += 1
        while index < len(lines) and lines[index].startswith(" " * 12):
            index += 1  # the entry's old continuation lines
    if missing:
        # A setting new to the component: its entry after the last of its settings' entries.
        at = max(
            (i for i, line in enumerate(out) if (m := _ENTRY.match(line)) and m.group(1) in descriptions),
            default=None,
        )
        if at is None:
            raise ValueError(f"no Args entry for {', '.join(sorted(missing))}")
        while at + 1 < len(out) and out[at + 1].startswith(" " * 12):
            at += 1
        out[at + 1 : at + 1] = [
            line for name in descriptions if name in missing for line in _entry(name, descriptions[name])
        ]
    return out


def _entry(name: str, description: str) -> list[str]:
    """An ``Args`` entry's lines, wrapped as ruff keeps them."""
    return textwrap.wrap(
        f"{name}: {description}",
        width=LINE_LENGTH,
        initial_indent=" " * 8,
        subsequent_indent=" " * 12,
        break_on_hyphens=False,
        break_long_words=False,
    )


def readme_written(source: ComponentSource, text: str) -> str:
    """``text`` (the component's README) with the Inputs rows of its settings written from the
    catalog: name, type and description, in Markdown."""
    settings = {p.name: p for p in source.settings}
    lines = text.split("\n")
    in_inputs = False
    last = None
    missing = set(settings)
    for index, line in enumerate(lines):
        if line.startswith("#"):
            in_inputs = line.strip() == "## Inputs"
            continue
        found = _ROW.match(line)
        if in_inputs and found and found.group(1) in settings:
            lines[index] = _row(settings[found.group(1)])
            missing.discard(found.group(1))
            last = index
    if missing and last is not None:  # a setting new to the component: after the last row
        lines[last + 1 : last + 1] = [_row(p) for p in source.settings if p.name in missing]
    return "\n".join(lines)


def _row(parameter: Parameter) -> str:
    meaning = parameter.description.replace("``", "`").replace("|", "\\|")
    return f"| `{parameter.name}` | `{parameter.type.__name__}` | {meaning} |"


def _files(source: ComponentSource) -> list[tuple[pathlib.Path, Any]]:
    """The files written from the catalog for ``source``, each with its writer."""
    return [(source.path, written), (source.path.with_name("README.md"), readme_written)]


def main(argv: list[str] | None = None) -> int:
    """Writes every component's settings from the catalog; ``--check``: only says which differ
    (exit 1)."""
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    stale = []
    for source in component_sources():
        for path, writer in _files(source):
            text = path.read_text(encoding="utf-8")
            new = writer(source, text)
            if new != text:
                stale.append(str(path))
                if not check:
                    path.write_text(new, encoding="utf-8")
    for name in stale:
        print(("differs from the catalog: " if check else "written: ") + name)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
