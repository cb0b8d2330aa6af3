"""KFP component: a team's own PySpark application (a file or a module) as a pipeline step."""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Metrics, Output

from kfstack.images import COMPONENT_IMAGE


# KFP takes a parameter's default from the signature as a JSON literal and passes every argument
# on each call, so the list and dict defaults below are never shared between calls (B006).
@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def spark_job(
    platform: str,
    spark_application: str,
    run_id: str,
    task_name: str,
    output: Output[Dataset],
    report: Output[Metrics],
    spark_job: Output[Artifact],
    spark_arguments: list = [],  # noqa: B006
    # Settings from the parameter catalog, written by python -m kfstack.pipelines.signatures.
    input_uri: str = "",
    spark_image: str = "",
    spark_driver_memory: str = "2g",
    spark_executors: int = 2,
    spark_executor_cores: int = 2,
    spark_executor_memory: str = "4g",
    spark_service_account: str = "kfstack-spark",
    object_store_secret: str = "kfstack-object-store",
    image_pull_secret: str = "",
    spark_timeout_seconds: int = 7200,
    istio_mesh: bool = True,
    launch_namespace: str = "",
    tracking_uri: str = "",
    tracking_secret: str = "kfp-mlflow-credentials",
    # End of the catalog's settings.
    spark_conf: dict = {},  # noqa: B006
    env_secrets: list = [],  # noqa: B006
    spark_driver_cores: int = 1,
    spark_node_pool: str = "cpu",
    local_cores: int = 0,
    settings_overrides: dict = {},  # noqa: B006
):
    """Runs a team's PySpark application the way spark-submit runs it, on either platform.

    The application learns where things are from environment variables (``KFSTACK_INPUT_URI``,
    ``KFSTACK_OUTPUT_URI``, ``KFSTACK_REPORT_PATH``; ``docs/contracts.md``) and needs no kfstack
    import.

    Args:
        platform: ``local`` runs ``spark-submit --master local[N]`` inside this task;
            ``kubernetes`` runs a SparkApplication (spark-operator) and waits for it.
        spark_application: The application: a ``.py`` file (locally a path on this machine; on
            Kubernetes a file in the Spark image, ``local:///opt/team/job.py``) or a module
            name (``my_team.jobs.clean``, installed in the image), run as ``__main__``.
        run_id: The pipeline run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``); names the
            SparkApplication so that a retried task adopts it.
        task_name: This task's name (``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``).
        output: The dataset the application writes to ``KFSTACK_OUTPUT_URI`` (a local path
            here, ``s3a://`` on a cluster).
        report: The numbers the application wrote to ``KFSTACK_REPORT_PATH`` (a JSON object of
            numbers: rows read, written...); empty when it wrote none.
        spark_job: What ran the job; locally ``kind: spark-submit``, the master and the seconds;
            on Kubernetes the SparkApplication's apiVersion, kind, namespace, name and uid.
        spark_arguments: The application's command line (strings), after its name in
            ``sys.argv``.
        input_uri: The raw data the Spark application reads (its KFSTACK_INPUT_URI: s3://, gs://, a local
            path...); empty: none, or the application's own default.
        spark_conf: Spark settings (``spark.*`` keys), over kfstack's local defaults; on
            Kubernetes the SparkApplication's ``sparkConf``.
        env_secrets: Names of Secrets (database or feature-store credentials) whose keys become
            the driver's and executors' environment (``envFrom``); locally the job inherits this
            task's environment. Never a value.
        spark_image: Kubernetes: the image of the Spark driver and executors, with the team's application
            installed; empty: kfstack's Spark image.
        spark_driver_cores: Kubernetes: driver cores (>= 1).
        spark_driver_memory: Driver memory (Spark notation); locally the memory of the one JVM.
        spark_executors: Kubernetes: Spark executor pods.
        spark_executor_cores: Kubernetes: cores per executor.
        spark_executor_memory: Kubernetes: memory per executor (Spark notation: 4g, 512m).
        spark_node_pool: Kubernetes: node-pool profile of driver and executors
            (``node_pools.yaml``).
        spark_service_account: Kubernetes: the Spark driver's service account.
        object_store_secret: Kubernetes: name of the Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
            (and AWS_ENDPOINT_URL for MinIO) for the pods; optional.
        image_pull_secret: Kubernetes: image pull Secret of the launched jobs; empty: none.
        spark_timeout_seconds: Kubernetes: longest wait for the SparkApplication.
        istio_mesh: Kubernetes: the launch namespace is in an Istio mesh (a Kubeflow profile namespace): every
            batch pod carries the labels that keep it out of the mesh (``sidecar.istio.io/inject=false``,
            ``istio.io/dataplane-mode=none``); false: no mesh labels on them. The predictors and the
            deployment task stay in the mesh.
        launch_namespace: Kubernetes: the namespace the launchers create their jobs and the InferenceService
            in (and read back, clean up and roll back there); empty: the task pod's own. The run's service
            account needs the launcher Role there (manifests/README.md).
        tracking_uri: Kubernetes: the MLflow tracking server (``http(s)://``) the run, its tasks, their jobs
            and trials are tracked to; empty: none. Where KFP's MLflow plugin is on, its server and runs are
            used whatever this says (docs/tracking.md).
        tracking_secret: Kubernetes: the Secret the task pods and their jobs' pods read the tracking server's
            credentials from (keys MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and
            MLFLOW_TRACKING_PASSWORD; optional); by default KFP's MLflow plugin's.
        local_cores: Local: ``local[N]``; 0: every core (``local[*]``).
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.
    """
    from kfstack.components.data.spark_job.stage import STAGE
    from kfstack.platforms import run_stage

    run_stage(STAGE, locals())
