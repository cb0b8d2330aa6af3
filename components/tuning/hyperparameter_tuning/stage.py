"""Tuning a team's own training code: a Katib Experiment, or the embedded tuner with its semantics.

Each trial is the generic training step (:mod:`..training.distributed_training.stage`) with every
tuned hyperparameter set to ``${trialParameters.<name>}`` and its model and logs under the
trial's name (``${trialSpec.Name}``, so parallel trials never resume from each other's
checkpoints). On Kubernetes that step's TrainJob, PyTorchJob or TFJob is the Experiment's trial
template (same image, node pool, Kueue queue, spot tolerations); locally the same replicas run
with Katib's substitution done here, and rank 0's lines are read as Katib's StdOut collector
reads them (:mod:`kfstack.tuning.local_tuner`).

The search space may name only hyperparameters the code declares, each searched as its declared
type allows, and the objective must be a metric it declares (:class:`kfstack.tuning.spec.
TuningSettings` with the declaration); a trial that never prints the objective is
``MetricsUnavailable`` and named so. The best assignment, merged into the run's own
hyperparameters and typed by the declaration, is the step's one output, which the training step
takes as its ``hyperparameters``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kfstack import contracts, object_store, progress
from kfstack.components import argument_names
from kfstack.components.training.distributed_training.stage import STAGE as TRAIN_STAGE
from kfstack.components.training.distributed_training.stage import (
    DistributedTrainingSettings,
    code_from_arguments,
)
from kfstack.components.tuning.hyperparameter_tuning.outcome import (
    experiment_result,
    experiment_variants,
    not_tuned,
    trial_experiment,
    tuned,
)
from kfstack.kubernetes.katib_experiment import (
    TRIAL_NAME,
)
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.placement import TuningPlacement
from kfstack.kubernetes.training_apis import job_kind
from kfstack.object_store import EmbeddedObjectStore
from kfstack.platforms import RUN_DIR_ENV, StageResult, Variant
from kfstack.settings import Placeholder, katib_parameter, substitute_katib_parameters
from kfstack.training.process_group import run_process_group
from kfstack.tuning.local_tuner import LocalTuner, TrialRun, TrialRunner
from kfstack.tuning.spec import TuningSettings
from kfstack.tuning.trials import TuningResult
from kfstack.uris import join

BEST = "best_hyperparameters"
# The hyperparameter that receives tuning_trial_epochs, when the code declares it.
EPOCHS = "epochs"
STATE_DIR = "state"


@dataclasses.dataclass(frozen=True)
class HyperparameterTuningSettings:
    """The tuning step.

    Attributes:
        tuning: The tuning spec, checked against the code's declaration.
        base: The run's own hyperparameters (handed on as they are when tuning is off).
        trial: The training step's settings for one trial, tuned values as Katib references.
        trials_uri: Each trial's logs (and model, when its code writes one), under
            ``<trials_uri>/<trial name>/``.
        state_dir: Local: the tuner's journal (resume).
        placement: Where the trials run and how long the Experiment may take.
    """

    tuning: TuningSettings
    base: Mapping[str, Any]
    trial: DistributedTrainingSettings
    trials_uri: str
    state_dir: str
    placement: TuningPlacement

    @property
    def code(self) -> contracts.TrainingCode:
        return self.trial.code

    def with_training_api(self, api: str) -> HyperparameterTuningSettings:
        return dataclasses.replace(self, trial=self.trial.with_training_api(api))

    def best(self, assignments: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The run's hyperparameters with the best trial's assignment over them, each typed by
        its declaration (Katib reports assignments as strings)."""
        return self.code.typed({**self.base, **(assignments or {})})

    def concrete_trial(self, run: TrialRun) -> DistributedTrainingSettings:
        """One trial's training settings with its assignment and its own directory."""
        trial_dir = join(self.trials_uri, run.name)
        assigned = {
            name: substitute_katib_parameters(value, run.assignments)
            if isinstance(value, Placeholder)
            else value
            for name, value in self.trial.hyperparameters.items()
        }
        return dataclasses.replace(
            self.trial,
            hyperparameters=self.code.typed(assigned),
            model_uri=join(trial_dir, "model"),
            logs_uri=join(trial_dir, "logs"),
            trial=run.name,
        )


class HyperparameterTuningStage:
    component = "hyperparameter-tuning"
    reference_output = "tuning_job"

    def settings(self, arguments: Mapping[str, Any]) -> HyperparameterTuningSettings:
        """The tuning spec against the declaration, and the trial as the training step's.

        Raises:
            InvalidParameterError: Whatever is wrong (an undeclared hyperparameter in the search
                space, an objective that is not a declared metric, ...), before anything runs.
        """
        code = code_from_arguments(arguments)
        tuning = argument_names.from_arguments(TuningSettings, arguments, code=code)
        base = dict(arguments.get("hyperparameters") or {})
        tuned = {p.name: katib_parameter(p.name) for p in tuning.parameters} if tuning.enabled else {}
        trial_values = {**base, **tuned}
        if EPOCHS in code.hyperparameters and tuning.enabled and EPOCHS not in tuned:
            trial_values[EPOCHS] = tuning.trial_epochs
        trials_uri = arguments["tuning_trials"]
        trial_dir = join(trials_uri, katib_parameter(TRIAL_NAME))
        trial = TRAIN_STAGE.settings(
            {
                **arguments,
                "hyperparameters": trial_values,
                "model": join(trial_dir, "model"),
                "training_logs": join(trial_dir, "logs"),
            }
        )
        # The replicas know they train a trial (contracts.TRIAL_ENV): its model is not kept.
        trial = dataclasses.replace(trial, trial=katib_parameter(TRIAL_NAME))
        run_dir = os.environ.get(RUN_DIR_ENV)
        state_dir = (
            os.path.join(run_dir, STATE_DIR, self.component) if run_dir else join(trials_uri, STATE_DIR)
        )
        settings = HyperparameterTuningSettings(
            tuning=tuning,
            base=base,
            trial=trial,
            trials_uri=trials_uri,
            state_dir=state_dir,
            placement=argument_names.from_arguments(TuningPlacement, arguments),
        )
        settings.best()  # the run's own values are declared and typed, tuned or not
        return settings

    def variants(self, settings: HyperparameterTuningSettings) -> list[Variant[HyperparameterTuningSettings]]:
        """Katib with the training step's trial kinds; with tuning off, nothing to run."""
        return experiment_variants(settings, TRAIN_STAGE.variants(settings.trial))

    def build(self, settings: HyperparameterTuningSettings, context: RunContext) -> list[dict]:
        """The Katib Experiment whose trial template is the training step's job."""
        if not settings.tuning.enabled:
            return []
        trial = settings.trial
        (trial_job,) = TRAIN_STAGE.build(trial, context)
        return [
            trial_experiment(
                context, settings.tuning, trial_job, job_kind(trial.training_api, trial.topology.framework)
            )
        ]

    def preflight(self, settings: HyperparameterTuningSettings) -> None:
        if settings.tuning.enabled:
            TRAIN_STAGE.preflight(settings.trial)

    def run_local(self, settings: HyperparameterTuningSettings) -> StageResult:
        if not settings.tuning.enabled:
            return self._skipped(settings)
        processes = len(TRAIN_STAGE.replicas(settings.trial).build(0))
        with object_store.for_step() as store:
            tuner = LocalTuner(settings.tuning, _trial_runner(settings, store), settings.state_dir, processes)
            result = tuner.run()
        return self._result(settings, result, {"kind": "LocalTuner", "state_dir": settings.state_dir})

    def collect(
        self, settings: HyperparameterTuningSettings, finished: list[dict], cluster: Cluster
    ) -> StageResult:
        if not settings.tuning.enabled:
            return self._skipped(settings)
        (experiment,) = finished
        return self._result(settings, experiment_result(experiment, cluster, settings.tuning), {})

    def _result(
        self, settings: HyperparameterTuningSettings, result: TuningResult, reference: dict
    ) -> StageResult:
        assert result.best is not None  # the tuner and the Experiment's success both ensure one
        names = [p.name for p in settings.tuning.parameters]
        return tuned(result, names, reference, {BEST: settings.best(result.best.parameters)})

    def _skipped(self, settings: HyperparameterTuningSettings) -> StageResult:
        return not_tuned({BEST: settings.best()}, "the run's own hyperparameters")


STAGE = HyperparameterTuningStage()


def _trial_runner(settings: HyperparameterTuningSettings, store: EmbeddedObjectStore | None) -> TrialRunner:
    """One trial on this machine: the training step's replicas with the trial's assignment
    (their locations in ``store`` when there is one); rank 0 (the replica Katib's
    primaryPodLabels select) is the one whose lines are read."""

    def run(run: TrialRun, line: Callable[[str], None], stop: threading.Event) -> None:
        trial = settings.concrete_trial(run)
        shutil.rmtree(join(settings.trials_uri, run.name), ignore_errors=True)  # a rerun starts afresh
        replicas = TRAIN_STAGE.replicas(trial, store)
        progress.report("trial", int(run.name.rsplit("-", 1)[1]), settings.tuning.max_trials)
        run_process_group(
            replicas.build,
            logs_dir=trial.logs_uri,
            max_restarts=trial.topology.max_restarts,
            done_when_exits=replicas.done_when_exits,
            on_output=lambda rank, text: line(text) if rank == 0 else None,
            stop=stop,
        )

    return run
