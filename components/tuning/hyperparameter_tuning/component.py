"""KFP component: hyperparameter tuning of a team's own training code (Katib, or embedded)."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import HTML, Artifact, Dataset, Input, Markdown, Metrics, Output

from kfstack.images import COMPONENT_IMAGE


# Lists and dicts as defaults are KFP parameter defaults, compiled into the spec; the function
# body never mutates them (B006).
@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def hyperparameter_tuning(
    platform: str,
    data: Input[Dataset],
    training_code: str,
    tuning_search_space: str,
    tuning_objective: str,
    tuning_metrics: Output[Metrics],
    tuning_report: Output[Markdown],
    optimisation_plot: Output[HTML],
    tuning_trials: Output[Artifact],
    tuning_job: Output[Artifact],
    hyperparameter_types: dict = {},  # noqa: B006
    hyperparameters: dict = {},  # noqa: B006
    metric_names: list = [],  # noqa: B006
    model_format: str = "custom",
    tune: bool = True,
    tuning_algorithm: str = "tpe",
    tuning_algorithm_settings: str = "{}",
    tuning_direction: str = "maximize",
    tuning_goal: float = 0.0,
    tuning_require_goal: bool = False,
    tuning_metric_strategy: str = "",
    tuning_early_stopping: str = "medianstop",
    tuning_min_trials_required: int = 3,
    tuning_start_step: int = 2,
    tuning_trial_epochs: int = 6,
    tuning_parallel_trials: int = 3,
    tuning_max_trials: int = 12,
    tuning_max_failed_trials: int = 3,
    tuning_resume_policy: str = "Never",
    tuning_timeout_seconds: int = 86400,
    framework: str = "pytorch",
    workers: int = 2,
    max_restarts: int = 3,
    tf_topology: str = "mwms",
    tf_parameter_servers: int = 1,
    elastic_min_workers: int = 0,
    elastic_max_workers: int = 0,
    trainer_image: str = "",
    env_secrets: list = [],  # noqa: B006
    gpu_pool: str = "h100",
    object_store_secret: str = "kfstack-object-store",
    image_pull_secret: str = "",
    training_timeout_seconds: int = 21600,
    istio_mesh: bool = True,
    launch_namespace: str = "",
    training_api: str = "auto",
    trainer_runtime: str = "torch-distributed",
    run_id: str = "",
    task_name: str = "",
    # Outputs as KFP reads them: inline, for the task runs this function's source alone (no
    # module around it), which mypy cannot type -- hence the ignore.
    settings_overrides: dict = {},  # noqa: B006
) -> NamedTuple("TunedHyperparameters", [("best_hyperparameters", dict)]):  # type: ignore[valid-type]
    """Tunes a team's training code over its declared hyperparameters; hands the best on.

    Every trial is the ``distributed_training`` step with the trial's values (the same image,
    replicas, node pool and env contract); the training step takes ``best_hyperparameters`` as
    its ``hyperparameters``.

    Args:
        platform: ``kubernetes`` creates a Katib Experiment whose trials are the training step's
            TrainJob, PyTorchJob or TFJob; ``local`` runs the same trials here with Katib's
            semantics (algorithms, medianstop, failure counts).
        data: The input dataset every trial trains on.
        training_code: As the training step: ``package.module`` or ``package.module:function``.
        tuning_search_space: JSON: declared hyperparameter -> feasible space, e.g.
            ``{"depth": {"type": "int", "min": 2, "max": 8}}``; each searched as its declared
            type allows (docs/contracts.md).
        tuning_objective: A declared metric the code prints (``name=value``).
        tuning_metrics: Best objective, trials run / succeeded / failed / early-stopped.
        tuning_report: Markdown: the best trial and a table of all trials.
        optimisation_plot: HTML: objective per trial and best so far.
        tuning_trials: Each trial's model and logs, by trial name.
        tuning_job: What ran the tuning: the Experiment's reference, or the local tuner.
        hyperparameter_types: As the training step: name -> ``int``, ``float``, ``str``, ``bool``.
        hyperparameters: The run's own values: the trials' for what is not tuned, and handed on
            as they are when ``tune`` is off.
        metric_names: As the training step: the metrics the code prints; the objective is one,
            the others are recorded per trial.
        model_format: As the training step (each trial's model is checked against it).
        tune: ``false`` runs nothing and hands ``hyperparameters`` on.
        tuning_algorithm: Katib algorithm: random, tpe, multivariate-tpe, cmaes, grid, sobol
            (both platforms), bayesianoptimization (Kubernetes only).
        tuning_algorithm_settings: JSON object of the algorithm's Katib settings.
        tuning_direction: ``maximize`` or ``minimize``.
        tuning_goal: Stop once the best trial reaches it; 0 = no goal.
        tuning_require_goal: Fail when the trials end without reaching the goal.
        tuning_metric_strategy: ``min``, ``max`` or ``latest`` of a trial's reports; empty: by
            direction.
        tuning_early_stopping: ``medianstop`` or ``none``.
        tuning_min_trials_required: medianstop: succeeded trials before any is stopped (>= 1).
        tuning_start_step: medianstop: the report at which a trial is judged (< trial epochs).
        tuning_trial_epochs: The reports (epochs) a trial makes; handed to the code as its
            ``epochs`` hyperparameter when it declares one and the search space does not tune it.
        tuning_parallel_trials: Trials at once (locally capped to the cores).
        tuning_max_trials: Trials in all.
        tuning_max_failed_trials: The step fails once this many trials failed.
        tuning_resume_policy: Kubernetes: Katib resumePolicy (Never, LongRunning, FromVolume).
        tuning_timeout_seconds: Kubernetes: longest wait for the whole Experiment (seconds).
        framework: As the training step.
        workers: Replicas per trial.
        max_restarts: Restarts of a trial after a replica fails.
        tf_topology: TensorFlow topology of the trials.
        tf_parameter_servers: TensorFlow parameter servers per trial.
        elastic_min_workers: PyTorch elastic lower bound (v1 only); 0 = fixed size.
        elastic_max_workers: PyTorch elastic upper bound; 0 = fixed size.
        trainer_image: Kubernetes: the image holding the code; empty: kfstack's for the framework.
        env_secrets: Kubernetes: Secrets whose keys become the trials' environment.
        gpu_pool: Kubernetes: node pool of the trial replicas.
        object_store_secret: Kubernetes: Secret with the object-store keys; empty: none.
        image_pull_secret: Kubernetes: image pull Secret of the trials; empty: none.
        training_timeout_seconds: Kubernetes: each trial job's activeDeadlineSeconds.
        istio_mesh: Kubernetes: the launch namespace is in an Istio mesh: the launched pods
            carry its opt-out labels (``sidecar.istio.io/inject=false``,
            ``istio.io/dataplane-mode=none``); false: none.
        launch_namespace: Kubernetes: the namespace the Katib Experiment and its trials are
            created and read back in; empty: this task's own (the launcher Role must be bound
            there, manifests/README.md).
        training_api: As the training step: which API's job the trials are.
        trainer_runtime: The trials' ClusterTrainingRuntime (Trainer v2).
        run_id: The pipeline run (names the Experiment so that a retried task adopts it).
        task_name: This task's name.
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.

    Returns:
        ``best_hyperparameters``: the run's hyperparameters with the best trial's values over
        them, each of its declared type.
    """
    from kfstack.components.tuning.hyperparameter_tuning.stage import STAGE
    from kfstack.platforms import run_stage

    return (run_stage(STAGE, locals()).outputs["best_hyperparameters"],)
