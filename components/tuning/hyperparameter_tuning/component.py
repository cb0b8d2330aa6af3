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
    code_arguments: dict = {},  # noqa: B006
    option_style: str = "underscores",
    model_format: str = "custom",
    # Settings from the parameter catalog, written by python -m kfstack.pipelines.signatures.
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
    gpu_pool: str = "h100",
    object_store_secret: str = "kfstack-object-store",
    image_pull_secret: str = "",
    training_timeout_seconds: int = 21600,
    istio_mesh: bool = True,
    launch_namespace: str = "",
    training_api: str = "auto",
    trainer_runtime: str = "torch-distributed",
    tracking_uri: str = "",
    tracking_secret: str = "kfp-mlflow-credentials",
    # End of the catalog's settings.
    env_secrets: list = [],  # noqa: B006
    run_id: str = "",
    task_name: str = "",
    settings_overrides: dict = {},  # noqa: B006
    # Outputs as KFP reads them: inline, for the task runs this function's source alone (no
    # module around it), which mypy cannot type -- hence the ignore.
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
        tuning_trials: Each trial's logs, and its model when its code writes one (a trial's code
            is told ``KFSTACK_TRIAL`` and may skip it), by trial name.
        tuning_job: What ran the tuning: the Experiment's reference, or the local tuner.
        hyperparameter_types: As the training step: name -> ``int``, ``float``, ``str``, ``bool``.
        hyperparameters: The run's own values: the trials' for what is not tuned, and handed on
            as they are when ``tune`` is off.
        metric_names: As the training step: the metrics the code prints; the objective is one,
            the others are recorded per trial.
        code_arguments: As the training step: the code's own arguments, its locations among them.
        option_style: As the training step: ``underscores`` or ``dashes``, how options are
            spelled on the code's argv (Katib's trial template writes each trial's that way).
        model_format: As the training step (each trial's model is checked against it).
        tune: Tune the declared hyperparameters before training (a Katib Experiment on Kubernetes, the
            embedded tuner locally); false: train with the values given.
        tuning_algorithm: random, tpe, multivariate-tpe, cmaes, grid, sobol; on Kubernetes also
            bayesianoptimization (hyperband is refused: kfstack's trials have no growing resource).
        tuning_algorithm_settings: JSON object of Katib algorithm settings, e.g. {"random_state": 7}; {} for
            the defaults.
        tuning_direction: maximize or minimize.
        tuning_goal: Stop tuning once the best trial reaches it; 0 = no goal.
        tuning_require_goal: Fail when the trials end without reaching tuning_goal.
        tuning_metric_strategy: min, max or latest of a trial's reports; empty: by direction.
        tuning_early_stopping: medianstop or none.
        tuning_min_trials_required: medianstop: succeeded trials before any trial is stopped.
        tuning_start_step: medianstop: the epoch at which a trial is judged (< trial epochs; Katib's default
            is 4).
        tuning_trial_epochs: Epochs per trial.
        tuning_parallel_trials: Trials at once (capped to the cores locally).
        tuning_max_trials: Trials in all (`kfstack run --local` applies a small local budget).
        tuning_max_failed_trials: Tuning fails once this many trials failed.
        tuning_resume_policy: Kubernetes: Katib resumePolicy (Never, LongRunning, FromVolume).
        tuning_timeout_seconds: Kubernetes: longest wait for the Experiment.
        framework: ``pytorch`` (DDP; TrainJob or PyTorchJob, see training_api) or ``tensorflow`` (TFJob).
        workers: Training ranks (TrainJob: nodes; PyTorchJob: 1 Master + workers-1 Workers; TFJob: Workers).
        max_restarts: Restarts from the last checkpoint when a rank fails (a TrainJob: its runtime's, see
            trainer_runtime).
        tf_topology: TensorFlow: ``mwms`` (MultiWorkerMirroredStrategy, synchronous) or ``parameter_server``
            (chief + workers + parameter servers, asynchronous).
        tf_parameter_servers: TensorFlow ``parameter_server`` topology: PS replicas.
        elastic_min_workers: Kubernetes, PyTorch: with elastic_max_workers, run the PyTorchJob elastic between
            these replica counts (torchrun, c10d); 0 = fixed size.
        elastic_max_workers: Kubernetes, PyTorch: upper replica count of an elastic job; 0 = fixed.
        trainer_image: Kubernetes: the image of the training replicas and trials, with the team's training
            code installed; empty: kfstack's trainer image for the framework.
        env_secrets: Kubernetes: Secrets whose keys become the trials' environment.
        gpu_pool: Kubernetes: node pool of the training replicas (``cpu``, ``h100``, ``a100-mig``,
            ``h100-spot``; see kfstack/kubernetes/node_pools.yaml).
        object_store_secret: Kubernetes: name of the Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
            (and AWS_ENDPOINT_URL for MinIO) for the pods; optional.
        image_pull_secret: Kubernetes: image pull Secret of the launched jobs; empty: none.
        training_timeout_seconds: Kubernetes: the training job's activeDeadlineSeconds and the longest wait
            for it (seconds).
        istio_mesh: Kubernetes: the launch namespace is in an Istio mesh (a Kubeflow profile namespace): every
            batch pod carries the labels that keep it out of the mesh (``sidecar.istio.io/inject=false``,
            ``istio.io/dataplane-mode=none``); false: no mesh labels on them. The predictors and the
            deployment task stay in the mesh.
        launch_namespace: Kubernetes: the namespace the launchers create their jobs and the InferenceService
            in (and read back, clean up and roll back there); empty: the task pod's own. The run's service
            account needs the launcher Role there (manifests/README.md).
        training_api: Kubernetes: ``auto`` (the training API the cluster serves; Trainer v2's TrainJob when it
            serves both), ``v1`` (PyTorchJob/TFJob, training-operator v1.9) or ``trainer-v2`` (TrainJob,
            Kubeflow Trainer v2.3; PyTorch, not elastic). Locally: which contract the replicas replay.
        trainer_runtime: Kubernetes, Trainer v2: the ClusterTrainingRuntime of the TrainJob
            (``torch-distributed`` upstream; ``kfstack-torch-distributed`` restarts the whole job from its
            checkpoint, see manifests/README.md).
        tracking_uri: Kubernetes: the MLflow tracking server (``http(s)://``) the run, its tasks, their jobs
            and trials are tracked to; empty: none. Where KFP's MLflow plugin is on, its server and runs are
            used whatever this says (docs/tracking.md).
        tracking_secret: Kubernetes: the Secret the task pods and their jobs' pods read the tracking server's
            credentials from (keys MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and
            MLFLOW_TRACKING_PASSWORD; optional); by default KFP's MLflow plugin's.
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
