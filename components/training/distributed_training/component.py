"""KFP component: a team's own training code as a distributed PyTorch or TensorFlow job."""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


# Lists and dicts as defaults are KFP parameter defaults, compiled into the spec; the function
# body never mutates them (B006).
@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def distributed_training(
    platform: str,
    data: Input[Dataset],
    training_code: str,
    model: Output[Model],
    training_metrics: Output[Metrics],
    training_logs: Output[Artifact],
    training_job: Output[Artifact],
    hyperparameter_types: dict = {},  # noqa: B006
    hyperparameters: dict = {},  # noqa: B006
    metric_names: list = [],  # noqa: B006
    code_arguments: dict = {},  # noqa: B006
    option_style: str = "underscores",
    model_format: str = "custom",
    # Settings from the parameter catalog, written by python -m kfstack.pipelines.signatures.
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
    pipeline: str = "",
    settings_overrides: dict = {},  # noqa: B006
):
    """Runs a team's training code over ``workers`` replicas under the operator's env contract.

    The code reads its data from ``$KFSTACK_INPUT_URI``, writes its model to
    ``$KFSTACK_MODEL_DIR`` (rank 0's is kept), checkpoints to ``$KFSTACK_CHECKPOINT_URI`` and
    prints its metrics as ``name=value`` lines (docs/contracts.md).

    Args:
        platform: ``local`` starts the replicas as processes with the env their pods would get;
            ``kubernetes`` creates a TrainJob, PyTorchJob or TFJob on the ``gpu_pool`` node pool
            and waits.
        data: The input dataset, handed to the code as ``KFSTACK_INPUT_URI``.
        training_code: ``package.module`` (run as ``python -m``, hyperparameters on its argv as
            ``--name=value``) or ``package.module:function`` (called with them as keyword
            arguments of their declared types; a function whose first parameter is named
            ``argv`` gets them as its argv), importable in ``trainer_image``.
        model: The model directory rank 0 wrote, as declared by ``model_format``, with the
            step's ``lineage.json`` beside it (the dataset's lineage, the hyperparameters, the
            declared metrics).
        training_metrics: The last value of each of ``metric_names`` the code printed, its
            report (``report.<name>``), its seconds, the world size, local restarts and, where
            the node pool has a price, ``price_per_hour``, ``job_cost`` and, when the report
            holds ``seconds_per_epoch``, ``cost_per_epoch``.
        training_logs: Checkpoints (``checkpoints/``), the chief replica's result and, locally,
            one log file per replica and attempt.
        training_job: What ran the training: the job's reference, or the local process group.
        hyperparameter_types: Name -> ``int``, ``float``, ``str`` or ``bool``: every
            hyperparameter the code takes (names ``[A-Za-z_][A-Za-z0-9_-]*``).
        hyperparameters: Name -> value of this run, each declared in ``hyperparameter_types``
            (values: letters, digits and ``. _ + -``; Katib passes them through a shell).
        metric_names: The metrics the code prints as ``name=value`` lines (Katib's StdOut
            format); every one must be printed by rank 0.
        code_arguments: Name -> text: arguments the code takes on every run besides the
            hyperparameters, e.g. its locations (``{"data_dir": "$KFSTACK_INPUT_DIR"}``: each
            ``$KFSTACK_...`` location is replaced in the replica; docs/contracts.md).
        option_style: How options are spelled on the code's argv: ``underscores``
            (``--learning_rate=``) or ``dashes`` (``--learning-rate=``, as argparse code often
            names them); the hyperparameters' names stay as declared.
        model_format: ``sklearn``, ``xgboost``, ``lightgbm``, ``onnx`` (the file KServe's runtime
            for it loads must be there) or ``custom`` (any files; a team's own predictor).
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
        env_secrets: Kubernetes: Secrets whose keys become the replicas' environment
            (credentials by name, never by value; not with a TrainJob). Locally the replicas
            inherit this process's environment.
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
        run_id: The pipeline run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``); names the job.
        task_name: This task's name (``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``).
        pipeline: The pipeline this task belongs to, as ``kfstack list`` names it; recorded in
            the model's lineage, so that ``kfstack reproduce`` runs that pipeline again.
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.
    """
    from kfstack.components.training.distributed_training.stage import STAGE
    from kfstack.platforms import run_stage

    run_stage(STAGE, locals())
