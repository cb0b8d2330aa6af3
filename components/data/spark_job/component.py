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
    input_uri: str = "",
    spark_conf: dict = {},  # noqa: B006
    env_secrets: list = [],  # noqa: B006
    spark_image: str = "",
    spark_driver_cores: int = 1,
    spark_driver_memory: str = "2g",
    spark_executors: int = 2,
    spark_executor_cores: int = 2,
    spark_executor_memory: str = "4g",
    spark_node_pool: str = "cpu",
    spark_service_account: str = "kfstack-spark",
    object_store_secret: str = "kfstack-object-store",
    image_pull_secret: str = "",
    spark_timeout_seconds: int = 7200,
    istio_mesh: bool = True,
    launch_namespace: str = "",
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
        input_uri: The raw data, handed over as ``KFSTACK_INPUT_URI`` (``s3://`` and
            ``minio://`` become ``s3a://``, as Spark opens them); empty: none.
        spark_conf: Spark settings (``spark.*`` keys), over kfstack's local defaults; on
            Kubernetes the SparkApplication's ``sparkConf``.
        env_secrets: Names of Secrets (database or feature-store credentials) whose keys become
            the driver's and executors' environment (``envFrom``); locally the job inherits this
            task's environment. Never a value.
        spark_image: Kubernetes: the image of driver and executors; empty: kfstack's Spark image.
            Another image must carry kfstack and ``/opt/kfstack/jobs/kfstack_driver.py``.
        spark_driver_cores: Kubernetes: driver cores (>= 1).
        spark_driver_memory: Driver memory, Spark notation (``2g``, ``512m``); locally the heap
            of the one JVM, which runs the tasks too.
        spark_executors: Kubernetes: executor pods (>= 1).
        spark_executor_cores: Kubernetes: cores per executor (>= 1).
        spark_executor_memory: Kubernetes: memory per executor, Spark notation.
        spark_node_pool: Kubernetes: node-pool profile of driver and executors
            (``node_pools.yaml``).
        spark_service_account: Kubernetes: the driver's service account (it creates the
            executor pods).
        object_store_secret: Kubernetes: Secret with the object-store keys the Spark pods get as
            env (``AWS_ACCESS_KEY_ID``...); empty: none (workload identity).
        image_pull_secret: Kubernetes: image pull Secret; empty: none.
        spark_timeout_seconds: Kubernetes: longest wait for the SparkApplication (seconds); it is
            deleted after that.
        istio_mesh: Kubernetes: the launch namespace is in an Istio mesh: the launched pods
            carry its opt-out labels (``sidecar.istio.io/inject=false``,
            ``istio.io/dataplane-mode=none``); false: none.
        launch_namespace: Kubernetes: the namespace the SparkApplication is created and read back
            in; empty: this task's own (the launcher Role must be bound there,
            manifests/README.md).
        local_cores: Local: ``local[N]``; 0: every core (``local[*]``).
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.
    """
    from kfstack.components.data.spark_job.stage import STAGE
    from kfstack.platforms import run_stage

    run_stage(STAGE, locals())
