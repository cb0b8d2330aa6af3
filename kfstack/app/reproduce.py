"""``kfstack reproduce MODEL_DIR``: train a recorded model again and compare.

A model directory carries its lineage (:mod:`kfstack.lineage`): the pipeline version, the data
window and its content hash, the feature spec's hash, the parameters and the validation
metrics. Reproducing it runs the pipeline that made it (as the record names it) on the
embedded platform with the recorded data and training parameters -- its ``tune`` and ``deploy``
switches off where it has them: the recorded hyperparameters are the ones tuning chose, and a
reproduction deploys nothing -- and compares the new model's record with the old one: the same data (content
hash, rows), the same feature spec (hash), the same parameters, and metrics within a tolerance.

It refuses, before anything runs, when the checked-out code is not the recorded pipeline
version: other code may legitimately give another model, and the comparison would say nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TextIO

from kfstack.app.local_run import run_pipeline_locally
from kfstack.app.summary import SUCCEEDED, RunSummary
from kfstack.errors import RunFailedError, UsageError
from kfstack.lineage import DEFAULT_TOLERANCE, Difference, Lineage, compare
from kfstack.pipelines import chosen, load_pipeline, rendering, run_form
from kfstack.version import DIRTY_SUFFIX, pipeline_version

MODEL_OUTPUT = "model"
# The pipeline parameters a reproduction turns off where the pipeline has them.
SWITCHED_OFF = ("tune", "deploy")


@dataclasses.dataclass(frozen=True)
class Reproduction:
    """A reproduction's run and its comparison with the record."""

    recorded: Lineage
    reproduced: Lineage
    summary: RunSummary
    differences: list[Difference]

    @property
    def matches(self) -> bool:
        return all(d.matches for d in self.differences)

    def render(self) -> str:
        width = max(len(d.item) for d in self.differences)
        lines = [f"{'item':<{width}}  {'match':<5}  recorded -> reproduced"]
        for d in self.differences:
            shown = d.recorded if d.item == "parameters" else f"{d.recorded} -> {d.reproduced}"
            detail = f"  ({d.detail})" if d.detail else ""
            lines.append(f"{d.item:<{width}}  {'yes' if d.matches else 'NO':<5}  {shown}{detail}")
        return "\n".join(lines)


def check_version(recorded: Lineage) -> None:
    """Raises unless the checked-out code is the recorded pipeline version, and that version
    names committed code (a ``-dirty`` one names changes nobody can check out again).

    Raises:
        UsageError: Naming both versions.
    """
    current = pipeline_version()
    if recorded.pipeline_version.endswith(DIRTY_SUFFIX):
        raise UsageError(
            f"the model was made by pipeline version {recorded.pipeline_version}: uncommitted changes, "
            f"which cannot be checked out again; only a model of committed code can be reproduced"
        )
    if current.endswith(DIRTY_SUFFIX):
        raise UsageError(
            f"this checkout is {current} (uncommitted changes); the model was made by "
            f"{recorded.pipeline_version}: check out that commit, clean, and run reproduce there"
        )
    if current != recorded.pipeline_version:
        raise UsageError(
            f"the model was made by pipeline version {recorded.pipeline_version}; this checkout is "
            f"{current}. Check out the recorded commit (a clean tree) and run reproduce there"
        )


def reproduction_arguments(pipeline: str, recorded: Lineage) -> dict[str, Any]:
    """The recorded parameters ``pipeline`` takes, its tuning and deployment off.

    A recorded value the pipeline does not take as a parameter (the training step records the
    job's whole shape, e.g. the framework a pipeline fixes) is the pipeline's own to set: the
    comparison of the records after the run says whether it set the same.
    """
    pipeline_func = load_pipeline(pipeline)
    known = rendering.parameter_types(pipeline_func)
    # A record written before a parameter was renamed names it as it was (with a warning).
    parameters = run_form.current_names(pipeline_func, recorded.parameters)
    taken = {name: value for name, value in parameters.items() if name in known}
    off = {name: False for name in SWITCHED_OFF if name in known}
    return {**taken, **off, "platform": "local"}


def reproduce(
    model_dir: str,
    pipeline_root: str,
    pipeline: str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    verbose: bool = False,
    console_stream: TextIO | None = None,
) -> Reproduction:
    """Trains the model of ``model_dir`` again from its record and compares (module docstring).

    ``pipeline``: the pipeline to run; by default the one the record names, else the one
    installed.

    Raises:
        InvalidParameterError: ``model_dir`` has no readable lineage record (nothing ran).
        UsageError: The checkout is another pipeline version, or the record or the checkout is of
            uncommitted code (nothing ran, no directory made); the pipeline root cannot be
            written.
        RunFailedError: The reproduction's run failed (its summary names the task).
    """
    recorded = Lineage.load(model_dir)
    check_version(recorded)
    name = chosen(pipeline or recorded.pipeline or None)
    summary = run_pipeline_locally(
        name,
        reproduction_arguments(name, recorded),
        pipeline_root=pipeline_root,
        verbose=verbose,
        console_stream=console_stream,
        cache=False,  # a reproduction computes every step again: reused outputs would prove nothing
    )
    if summary.status != SUCCEEDED or MODEL_OUTPUT not in summary.artifacts:
        raise RunFailedError(f"the reproduction run {summary.run_dir} did not finish: {summary.error}")
    reproduced = Lineage.load(summary.artifacts[MODEL_OUTPUT])
    return Reproduction(recorded, reproduced, summary, compare(recorded, reproduced, tolerance))
