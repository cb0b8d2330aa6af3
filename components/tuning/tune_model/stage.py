"""Tuning as a platform stage: a Katib Experiment on Kubernetes, the embedded tuner locally.

Both run the *training step's own* trial: its settings with every tuned hyperparameter set to
``${trialParameters.<name>}`` and its model and checkpoints under the trial's name
(``${trialSpec.Name}``, so parallel trials never resume from each other's checkpoints). On
Kubernetes that template is the TrainJob, PyTorchJob or TFJob the training step's builders make
(same node pool, Kueue queue, spot tolerations), inside the Experiment; locally the same argv,
with Katib's substitution, runs through the training step's local replicas.

With ``tune=false`` nothing runs: the step hands the pipeline's own hyperparameters on, so the
training step reads them from this step either way (README "Joining optional or conditional
steps").
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import typing
from collections.abc import Callable, Mapping
from typing import Any

from kfstack import progress
from kfstack.components.training.train_model.stage import BACKENDS, TrainModelSettings
from kfstack.components.training.train_model.stage import STAGE as TRAIN_STAGE
from kfstack.kubernetes.katib_experiment import (
    TRIAL_NAME,
)
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.placement import TrainingPlacement, TuningPlacement
from kfstack.kubernetes.training_apis import job_kind
from kfstack.platforms import RUN_DIR_ENV, StageResult, Variant
from kfstack.settings import katib_parameter, substitute_katib_parameters
from kfstack.training.process_group import run_process_group
from kfstack.training.settings import TUNABLE_HYPERPARAMETERS, TrainingSettings
from kfstack.tuning.local_tuner import LocalTuner, TrialRun, TrialRunner
from kfstack.tuning.outcome import experiment_result, experiment_variants, not_tuned, trial_experiment, tuned
from kfstack.tuning.spec import TuningSettings
from kfstack.tuning.trials import TuningResult
from kfstack.uris import join

# Under the embedded run's directory (RUN_DIR_ENV), where the tuner keeps its journal so that
# `kfstack run --local --resume RUN_DIR` finds it.
STATE_DIR = "state"


@dataclasses.dataclass(frozen=True)
class TuneModelSettings:
    """The tuning step.

    Attributes:
        tuning: The tuning spec.
        training: The pipeline's hyperparameters (handed on as they are when tuning is off).
        trial: The training step's settings for one trial, tuned fields as Katib references.
        trials_uri: Each trial's model and checkpoints, under ``<trials_uri>/<trial name>/``.
        state_dir: Local: the tuner's journal (resume).
        placement: Where the trials run and how long the Experiment may take.
    """

    tuning: TuningSettings
    training: TrainingSettings
    trial: TrainModelSettings
    trials_uri: str
    state_dir: str
    placement: TuningPlacement

    def with_training_api(self, api: str) -> TuneModelSettings:
        return dataclasses.replace(self, trial=self.trial.with_training_api(api))

    def hyperparameters(self, assignments: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Every tunable hyperparameter for the training step, typed: the best trial's
        assignment where it has one, else the pipeline's own value."""
        types = typing.get_type_hints(TrainingSettings)
        chosen = assignments or {}
        return {
            name: types[name](chosen[name]) if name in chosen else getattr(self.training, name)
            for name in TUNABLE_HYPERPARAMETERS
        }


class TuneModelStage:
    component = "tune-model"
    reference_output = "tuning_job"

    def settings(self, arguments: Mapping[str, Any]) -> TuneModelSettings:
        tuning = TuningSettings.from_arguments(arguments)
        training = TrainingSettings.from_arguments(arguments)
        trials_uri = arguments["tuning_trials"]
        trial_dir = join(trials_uri, katib_parameter(TRIAL_NAME))
        tuned = {p.name: katib_parameter(p.name) for p in tuning.parameters} if tuning.enabled else {}
        trial = TrainModelSettings(
            training=TrainingSettings.from_arguments(arguments, epochs=tuning.trial_epochs, **tuned),
            features_uri=arguments["features"],
            model_uri=join(trial_dir, "model"),
            logs_uri=join(trial_dir, "logs"),
            placement=TrainingPlacement.from_arguments(arguments),
        )
        run_dir = os.environ.get(RUN_DIR_ENV)
        state_dir = (
            os.path.join(run_dir, STATE_DIR, self.component) if run_dir else join(trials_uri, STATE_DIR)
        )
        return TuneModelSettings(
            tuning=tuning,
            training=training,
            trial=trial,
            trials_uri=trials_uri,
            state_dir=state_dir,
            placement=TuningPlacement.from_arguments(arguments),
        )

    def variants(self, settings: TuneModelSettings) -> list[Variant[TuneModelSettings]]:
        """Katib with the training step's trial kinds (``training_api`` chooses as there);
        with tuning off, one variant that needs nothing."""
        return experiment_variants(settings, TRAIN_STAGE.variants(settings.trial))

    def build(self, settings: TuneModelSettings, context: RunContext) -> list[dict]:
        """The Katib Experiment whose trial template is the training step's job."""
        if not settings.tuning.enabled:
            return []
        trial = settings.trial
        (trial_job,) = TRAIN_STAGE.build(trial, context)
        return [
            trial_experiment(
                context, settings.tuning, trial_job, job_kind(trial.training_api, trial.training.framework)
            )
        ]

    def preflight(self, settings: TuneModelSettings) -> None:
        if settings.tuning.enabled:
            TRAIN_STAGE.preflight(settings.trial)

    def run_local(self, settings: TuneModelSettings) -> StageResult:
        if not settings.tuning.enabled:
            return self._skipped(settings)
        trial = settings.trial
        replicas = BACKENDS[trial.training.framework].local_replicas(trial.training, [], trial.training_api)
        tuner = LocalTuner(
            settings.tuning,
            _local_trial_runner(settings),
            settings.state_dir,
            processes_per_trial=len(replicas.build(0)),
        )
        return self._result(settings, tuner.run(), {"kind": "LocalTuner", "state_dir": settings.state_dir})

    def collect(self, settings: TuneModelSettings, finished: list[dict], cluster: Cluster) -> StageResult:
        if not settings.tuning.enabled:
            return self._skipped(settings)
        (experiment,) = finished
        return self._result(settings, experiment_result(experiment, cluster, settings.tuning), {})

    def _result(self, settings: TuneModelSettings, result: TuningResult, reference: dict) -> StageResult:
        assert result.best is not None  # the tuner and the Experiment's success both ensure one
        names = [p.name for p in settings.tuning.parameters]
        return tuned(result, names, reference, settings.hyperparameters(result.best.parameters))

    def _skipped(self, settings: TuneModelSettings) -> StageResult:
        return not_tuned(settings.hyperparameters(), "the pipeline's own hyperparameters")


STAGE = TuneModelStage()


def _local_trial_runner(settings: TuneModelSettings) -> TrialRunner:
    """One trial on this machine: the training step's argv with Katib's substitution, run by
    the training step's local replicas; rank 0 (the replica Katib's primaryPodLabels select)
    is the one whose lines the tuner reads."""
    trial = settings.trial
    backend = BACKENDS[trial.training.framework]

    def run(run: TrialRun, line: Callable[[str], None], stop: threading.Event) -> None:
        values = {**run.assignments, TRIAL_NAME: run.name}
        argv = [substitute_katib_parameters(arg, values) for arg in trial.trainer_argv(remote=False)]
        trial_dir = join(settings.trials_uri, run.name)
        shutil.rmtree(trial_dir, ignore_errors=True)  # a trial run again starts from scratch
        replicas = backend.local_replicas(trial.training, argv, trial.training_api)
        progress.report("trial", int(run.name.rsplit("-", 1)[1]), settings.tuning.max_trials)
        run_process_group(
            replicas.build,
            logs_dir=join(trial_dir, "logs"),
            max_restarts=trial.training.max_restarts,
            done_when_exits=replicas.done_when_exits,
            on_output=lambda rank, text: line(text) if rank == 0 else None,
            stop=stop,
        )

    return run
