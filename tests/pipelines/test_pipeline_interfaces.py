"""The compiled interface and task graph of every built-in pipeline, compared as data with the
recorded ones (``interfaces/<name>.json``).

What a pipeline version offers a person (its run form, as ``kfstack compile`` writes it: its
inputs' names, types, defaults, descriptions, optionality) and how its tasks are wired
(components, inputs, dependencies, conditions) change only on purpose. Executor commands,
embedded sources and image tags are not compared: they change with every edit of a component's
code. Descriptions are compared with runs of whitespace made one space (a docstring's line
breaks are not part of what a description says).

After an intended change, rewrite the records and review their diff:
``python -m tests.pipelines.test_pipeline_interfaces``.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys
from typing import Any

import pytest

from kfstack.pipelines import load_pipeline
from kfstack.pipelines.rendering import compiled_spec
from kfstack.pipelines.run_form import version_function

RECORDS = pathlib.Path(__file__).with_name("interfaces")
BUILT_IN = ("flights-training", "flights-retraining", "digits-training")


def interface(spec: dict[str, Any]) -> dict[str, Any]:
    """The parts of a compiled spec compared: each graph's inputs, outputs and tasks."""

    def graph(component: dict[str, Any]) -> dict[str, Any]:
        return {
            "inputDefinitions": component.get("inputDefinitions"),
            "outputDefinitions": component.get("outputDefinitions"),
            "dag": (component.get("dag") or {}).get("tasks"),
        }

    return {
        "root": graph(spec["root"]),
        "components": {name: graph(component) for name, component in spec.get("components", {}).items()},
    }


def one_spaced(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: one_spaced(item) for key, item in value.items()}
    if isinstance(value, list):
        return [one_spaced(item) for item in value]
    if isinstance(value, str):
        return re.sub(r"\s+", " ", value)
    return value


def differences(recorded: Any, compiled: Any, where: str = "") -> list[str]:
    """Every path at which the two differ (a readable failure, not a 100 KB repr)."""
    if isinstance(recorded, dict) and isinstance(compiled, dict):
        found = []
        for key in sorted(set(recorded) | set(compiled)):
            if key not in compiled:
                found.append(f"{where}/{key}: recorded, not compiled")
            elif key not in recorded:
                found.append(f"{where}/{key}: compiled, not recorded")
            else:
                found += differences(recorded[key], compiled[key], f"{where}/{key}")
        return found
    return [] if recorded == compiled else [f"{where}: recorded {recorded!r}, compiled {compiled!r}"]


@pytest.mark.parametrize("name", BUILT_IN)
def test_compiled_interface_and_graph_are_the_recorded_ones(name):
    recorded = json.loads((RECORDS / f"{name}.json").read_text(encoding="utf-8"))
    compiled = json.loads(json.dumps(interface(compiled_spec(version_function(load_pipeline(name))))))
    found = differences(one_spaced(recorded), one_spaced(compiled))
    assert not found, f"{name} differs from its record in {len(found)} places:\n" + "\n".join(found[:20])


def test_every_built_in_pipeline_has_a_record():
    assert sorted(path.stem for path in RECORDS.glob("*.json")) == sorted(BUILT_IN)


if __name__ == "__main__":
    for pipeline in sys.argv[1:] or BUILT_IN:
        record = interface(compiled_spec(version_function(load_pipeline(pipeline))))
        (RECORDS / f"{pipeline}.json").write_text(
            json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
        print(f"recorded {pipeline}")
