"""What a tuning step runs and reports, whichever training step its trials are (a team's code
or an example's): its variants (Katib and the training step's job kind), the Experiment whose
trial template is that job, the finished Experiment read back, the best trial's figures, the
report and the plot, or the note of a step that did not tune."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kfstack.errors import TuningFailedError
from kfstack.kubernetes.katib_experiment import ExperimentRequest, build_experiment, trial_parameters
from kfstack.kubernetes.katib_result import read_trials, tuning_result
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.resources import EXPERIMENT, ResourceKind
from kfstack.platforms import StageResult, Variant
from kfstack.tuning.report import optimisation_plot_html, trials_markdown
from kfstack.tuning.spec import TuningSettings
from kfstack.tuning.trials import TuningResult

EXPERIMENT_PREFIX = "kfs-tune"
TUNING_METRICS = "tuning_metrics"
TRIALS_REPORT = "tuning_report"
OPTIMISATION_PLOT = "optimisation_plot"


def experiment_variants(settings: Any, trial_variants: Sequence[Variant[Any]]) -> list[Variant[Any]]:
    """The tuning step's ways to run: one per way its training step's trials can (Katib plus
    that job's kind, the trial settings' ``training_api`` chosen alike); with tuning off
    (``settings.tuning.enabled`` false), one that needs nothing.

    Args:
        settings: The tuning step's settings (``tuning``, ``with_training_api(api)``).
        trial_variants: The training step's variants of one trial.
    """
    if not settings.tuning.enabled:
        return [Variant(settings, requires=())]
    return [
        Variant(
            settings.with_training_api(variant.settings.training_api),
            (EXPERIMENT, *variant.requires),
            variant.choice,
        )
        for variant in trial_variants
    ]


def trial_experiment(
    context: RunContext, tuning: TuningSettings, trial_job: dict, trial_kind: ResourceKind
) -> dict:
    """The Katib Experiment of this run whose trial template is ``trial_job``."""
    request = ExperimentRequest(
        name=context.name(EXPERIMENT_PREFIX),
        labels=context.labels(),
        tuning=tuning,
        trial_job=trial_job,
        trial_kind=trial_kind,
        trial_parameters=trial_parameters(tuning),
    )
    return build_experiment(request)


def experiment_result(experiment: dict, cluster: Cluster, tuning: TuningSettings) -> TuningResult:
    """A finished Experiment's trials and best, as the embedded tuner reports its own.

    Raises:
        TuningFailedError: The goal was required and not reached.
    """
    result = tuning_result(experiment, read_trials(cluster, experiment, tuning), tuning)
    if tuning.require_goal and not result.goal_reached:
        raise TuningFailedError(
            f"Experiment {experiment['metadata']['name']} ended ({result.reason}) without reaching "
            f"tuning_goal={tuning.goal} and tuning_require_goal is set",
            result=result,
        )
    return result


def tuned(
    result: TuningResult, names: Sequence[str], reference: Mapping[str, Any], outputs: Mapping[str, Any]
) -> StageResult:
    """The step's result once trials ran: figures, best trial, report, plot and ``outputs``."""
    assert result.best is not None  # the tuner and the Experiment's success both ensure one
    return StageResult(
        metrics={TUNING_METRICS: result.metrics()},
        reference={**reference, "best_trial": result.best.name, "reason": result.reason},
        outputs=outputs,
        documents={
            TRIALS_REPORT: trials_markdown(result, list(names)),
            OPTIMISATION_PLOT: optimisation_plot_html(result),
        },
    )


def not_tuned(outputs: Mapping[str, Any], what: str) -> StageResult:
    """The step's result with ``tune=false``: nothing ran, ``outputs`` handed on."""
    note = f"# Tuning skipped\n\n`tune=false`: training takes {what}.\n"
    return StageResult(
        metrics={TUNING_METRICS: {"trials_run": 0.0}},
        reference={"kind": "none", "tune": False},
        outputs=outputs,
        documents={
            TRIALS_REPORT: note,
            OPTIMISATION_PLOT: "<html><body><p>Tuning skipped (tune=false).</p></body></html>",
        },
    )
