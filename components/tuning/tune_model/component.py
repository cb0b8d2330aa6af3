"""KFP component: hyperparameter tuning of the training step (Katib, or the embedded tuner)."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import HTML, Artifact, Dataset, Input, Markdown, Metrics, Output

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def tune_model(
    platform: str,
    features: Input[Dataset],
    tune: bool,
    tuning_algorithm: str,
    tuning_algorithm_settings: str,
    tuning_search_space: str,
    tuning_objective: str,
    tuning_direction: str,
    tuning_goal: float,
    tuning_require_goal: bool,
    tuning_metric_strategy: str,
    tuning_early_stopping: str,
    tuning_min_trials_required: int,
    tuning_start_step: int,
    tuning_trial_epochs: int,
    tuning_parallel_trials: int,
    tuning_max_trials: int,
    tuning_max_failed_trials: int,
    tuning_resume_policy: str,
    tuning_timeout_seconds: int,
    framework: str,
    workers: int,
    batch_size: int,
    learning_rate: float,
    max_restarts: int,
    seed: int,
    tf_topology: str,
    tf_parameter_servers: int,
    elastic_min_workers: int,
    elastic_max_workers: int,
    gpu_pool: str,
    object_store_secret: str,
    image_pull_secret: str,
    training_timeout_seconds: int,
    training_api: str,
    trainer_runtime: str,
    run_id: str,
    task_name: str,
    tuning_metrics: Output[Metrics],
    tuning_report: Output[Markdown],
    optimisation_plot: Output[HTML],
    tuning_trials: Output[Artifact],
    tuning_job: Output[Artifact],
) -> NamedTuple("TunedHyperparameters", [("learning_rate", float), ("batch_size", int)]):
    """Tunes the training step's hyperparameters and hands the best ones to training.

    Args:
        platform: ``kubernetes`` creates a Katib Experiment whose trials are the training
            step's TrainJob, PyTorchJob or TFJob; ``local`` runs the same trials here.
        features: Output of the feature job.
        tune: ``false`` runs nothing and hands on ``learning_rate`` and ``batch_size`` as given.
        tuning_algorithm: Katib algorithm: random, tpe, multivariate-tpe, cmaes, grid, sobol
            (both platforms), bayesianoptimization, hyperband (Kubernetes only).
        tuning_algorithm_settings: JSON object of the algorithm's Katib settings, e.g.
            ``{"random_state": 7}``; ``{}`` for the defaults.
        tuning_search_space: JSON: tuned trainer argument -> feasible space (see the README).
        tuning_objective: ``val_auc``, ``val_log_loss`` or ``val_accuracy`` (what the trainer
            prints each epoch).
        tuning_direction: ``maximize`` or ``minimize``.
        tuning_goal: Stop once the best trial reaches it; 0 = no goal.
        tuning_require_goal: Fail when the trials end without reaching the goal.
        tuning_metric_strategy: ``min``, ``max`` or ``latest`` value of a trial's reports; empty:
            by direction.
        tuning_early_stopping: ``medianstop`` or ``none``.
        tuning_min_trials_required: medianstop: succeeded trials before any is stopped (>= 1).
        tuning_start_step: medianstop: the epoch at which a trial is judged (< trial epochs).
        tuning_trial_epochs: Epochs per trial (the final training takes its own ``epochs``).
        tuning_parallel_trials: Trials at once (locally capped to the cores).
        tuning_max_trials: Trials in all.
        tuning_max_failed_trials: The step fails once this many trials failed.
        tuning_resume_policy: Kubernetes: Katib resumePolicy (Never, LongRunning, FromVolume).
        tuning_timeout_seconds: Kubernetes: longest wait for the whole Experiment (seconds).
        framework: As the training step (trials are training runs).
        workers: Replicas per trial.
        batch_size: The pipeline's value: the trials' when not tuned, handed on when ``tune`` is off.
        learning_rate: Likewise.
        max_restarts: Restarts of a trial from its checkpoint after a replica fails.
        seed: Seeds each trial's training (the sampler takes ``random_state`` in
            tuning_algorithm_settings).
        tf_topology: TensorFlow topology of the trials.
        tf_parameter_servers: TensorFlow parameter servers per trial.
        elastic_min_workers: PyTorch elastic lower bound (v1 only); 0 = fixed size.
        elastic_max_workers: PyTorch elastic upper bound; 0 = fixed size.
        gpu_pool: Kubernetes: node pool of the trial replicas.
        object_store_secret: Kubernetes: Secret with the object-store keys; empty: none.
        image_pull_secret: Kubernetes: image pull Secret of the trials; empty: none.
        training_timeout_seconds: Kubernetes: each trial job's activeDeadlineSeconds.
        training_api: As the training step: which API's job the trials are.
        trainer_runtime: The trials' ClusterTrainingRuntime (Trainer v2).
        run_id: The pipeline run (names the Experiment so that a retried task adopts it).
        task_name: This task's name.
        tuning_metrics: Best objective, trials run / succeeded / failed / early-stopped.
        tuning_report: Markdown: the best trial and a table of all trials.
        optimisation_plot: HTML: objective per trial and best so far (and per-epoch curves
            locally); renders in the KFP UI with no network access.
        tuning_trials: Each trial's model, checkpoints and replica logs, by trial name.
        tuning_job: What ran the tuning: the Experiment's reference, or the local tuner.

    Returns:
        The hyperparameters for the training step: the best trial's, or the given ones.
    """
    from kfstack.components.tuning.tune_model.stage import STAGE
    from kfstack.platforms import run_stage

    outputs = run_stage(STAGE, locals()).outputs
    return (outputs["learning_rate"], outputs["batch_size"])
