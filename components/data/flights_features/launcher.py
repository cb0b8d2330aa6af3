"""Runs the flights feature job on the requested platform; returns its counts as metrics.

``local``: the Spark job runs in this process (``local[*]``). ``kubernetes``: a
SparkApplication runs the same ``main(argv)`` as its driver's main file
(:data:`kfstack.images.SPARK_MAIN_FILE`); this step creates it (or adopts the one an earlier
attempt created), waits for it and reads the job's report from the output URI.
"""

from __future__ import annotations

import dataclasses
import json
import logging

import fsspec

from kfstack import images, platforms
from kfstack.features import JOB_REPORT_FILE
from kfstack.spark_jobs.flights_features.config import FeatureJobConfig
from kfstack.uris import fsspec_uri, join

logger = logging.getLogger(__name__)

NAME_PREFIX = "kfs-features"


def spark_application(*, context, config: FeatureJobConfig, resources, secrets, service_account: str) -> dict:
    """The SparkApplication this step creates (also what ``kfstack render`` writes).

    Args:
        context: :class:`kfstack.kubernetes.naming.RunContext` of the run and task.
        config: The job's parameters; its URIs must be reachable from the driver and executors.
        resources: :class:`kfstack.kubernetes.spark_application.SparkResources`.
        secrets: :class:`kfstack.kubernetes.pods.SecretRefs`.
        service_account: The driver's service account (``manifests/base``: ``kfstack-spark``).
    """
    from kfstack.kubernetes import node_pools
    from kfstack.kubernetes.spark_application import SparkApplicationRequest, build_spark_application

    config.validate()
    remote = dataclasses.replace(
        config,
        input_uri=fsspec_uri(config.input_uri) if config.input_uri else None,
        output_uri=fsspec_uri(config.output_uri),
        quarantine_uri=fsspec_uri(config.quarantine_uri),
    )
    return build_spark_application(SparkApplicationRequest(
        name=context.name(NAME_PREFIX),
        labels=context.labels(),
        image=images.image_for("spark"),
        main_file=images.SPARK_MAIN_FILE,
        arguments=remote.to_argv(),
        # Spark is CPU work: the CPU pool, whatever pool the training uses.
        profile=node_pools.get_profile(node_pools.CPU_POOL),
        secrets=secrets,
        service_account=service_account,
        resources=resources,
    ))


def launch_flights_features(
    *,
    platform: str,
    data_uri: str,
    features_uri: str,
    quarantine_uri: str,
    num_shards: int,
    max_quarantine_fraction: float,
    sample_fraction: float,
    seed: int,
    kubernetes: dict | None = None,
) -> tuple[dict[str, float], dict]:
    """Runs the feature job and returns flat, KFP-loggable counts and what ran it.

    Args:
        platform: ``local`` or ``kubernetes``.
        data_uri, features_uri, quarantine_uri: Input and outputs (remote URIs on Kubernetes).
        num_shards, max_quarantine_fraction, sample_fraction, seed: See the component.
        kubernetes: On ``kubernetes``: ``context`` (RunContext), ``resources`` (SparkResources),
            ``service_account`` and ``settings`` (:class:`~kfstack.kubernetes.launcher.LaunchSettings`).

    Returns:
        Counts (``rows_read``, ``rows_written``, ``rows_quarantined``, ``quarantined_fraction``,
        ``quarantined.<reason>``, ``rows.<split>``) and a reference to what ran the job.

    Raises:
        InvalidParameterError: A parameter is out of range (nothing was started).
        DataQualityError: Too many rows were quarantined (the quarantine is written).
        ResourceFailedError: The SparkApplication failed (state, message, driver log tail).
    """
    platforms.require_available(platform, stage="flights-features")
    config = FeatureJobConfig(
        input_uri=data_uri or None,
        output_uri=features_uri,
        quarantine_uri=quarantine_uri,
        num_shards=num_shards,
        max_quarantine_fraction=max_quarantine_fraction,
        sample_fraction=sample_fraction,
        seed=seed,
    )
    config.validate()
    if platform == platforms.KUBERNETES:
        return _run_on_kubernetes(config=config, **platforms.kubernetes_options(
            platform, kubernetes, stage="flights-features"))
    # Deferred: importing pyspark costs seconds and is not needed to compile pipelines.
    from kfstack.spark_jobs.flights_features.job import run_feature_job

    report = run_feature_job(config)
    return report_metrics(report.to_dict()), {"platform": platforms.LOCAL, "kind": "SparkSession",
                                              "master": "local[*]"}


def _run_on_kubernetes(*, config: FeatureJobConfig, context, resources, service_account: str,
                       settings) -> tuple[dict[str, float], dict]:
    from kfstack.kubernetes.launcher import launch
    from kfstack.kubernetes.resources import SPARK_APPLICATION

    body = spark_application(context=context, config=config, resources=resources,
                             secrets=settings.secrets, service_account=service_account)
    _, reference = launch(SPARK_APPLICATION, body, settings)
    with fsspec.open(join(fsspec_uri(config.output_uri), JOB_REPORT_FILE), "r") as f:
        report = json.load(f)
    return report_metrics(report), {"platform": platforms.KUBERNETES, **reference}


def kubernetes_options(*, platform: str, run_id: str, task_name: str, executors: int,
                       executor_cores: int, executor_memory: str, driver_memory: str,
                       service_account: str, object_store_secret: str, image_pull_secret: str,
                       timeout_seconds: float, poll_interval_seconds: float) -> dict | None:
    """The ``kubernetes`` argument of :func:`launch_flights_features` (``None`` off Kubernetes)."""
    if platform != platforms.KUBERNETES:
        return None
    from kfstack.kubernetes.launcher import LaunchSettings
    from kfstack.kubernetes.naming import RunContext
    from kfstack.kubernetes.spark_application import SparkResources

    return {
        "context": RunContext(run_id=run_id, task_name=task_name),
        "resources": SparkResources(executor_instances=executors, executor_cores=executor_cores,
                                    executor_memory=executor_memory, driver_memory=driver_memory),
        "service_account": service_account,
        "settings": LaunchSettings.from_parameters(
            object_store_secret=object_store_secret, image_pull_secret=image_pull_secret,
            timeout_seconds=timeout_seconds, poll_interval_seconds=poll_interval_seconds),
    }


def run_component(*, platform: str, data_uri: str, num_shards: int, max_quarantine_fraction: float,
                  sample_fraction: float, seed: int, features, quarantine, data_report, spark_job,
                  run_id: str, task_name: str, spark_executors: int, spark_executor_cores: int,
                  spark_executor_memory: str, spark_driver_memory: str, spark_service_account: str,
                  object_store_secret: str, image_pull_secret: str, timeout_seconds: float,
                  poll_interval_seconds: float) -> None:
    """The ``flights_features`` component's body: artifacts in, metrics and reference out."""
    counts, reference = launch_flights_features(
        platform=platform,
        data_uri=data_uri,
        features_uri=platforms.artifact_location(platform, features),
        quarantine_uri=platforms.artifact_location(platform, quarantine),
        num_shards=num_shards,
        max_quarantine_fraction=max_quarantine_fraction,
        sample_fraction=sample_fraction,
        seed=seed,
        kubernetes=kubernetes_options(
            platform=platform, run_id=run_id, task_name=task_name, executors=spark_executors,
            executor_cores=spark_executor_cores, executor_memory=spark_executor_memory,
            driver_memory=spark_driver_memory, service_account=spark_service_account,
            object_store_secret=object_store_secret, image_pull_secret=image_pull_secret,
            timeout_seconds=timeout_seconds, poll_interval_seconds=poll_interval_seconds,
        ),
    )
    for name, value in counts.items():
        data_report.log_metric(name, value)
    platforms.write_reference(spark_job, reference)


def report_metrics(report: dict) -> dict[str, float]:
    """Flattens a feature-job report into the scalar metrics the KFP UI shows."""
    metrics: dict[str, float] = {
        "rows_read": report["rows_read"],
        "rows_written": report["rows_written"],
        "rows_quarantined": report["rows_quarantined"],
        "quarantined_fraction": (
            report["rows_quarantined"] / report["rows_read"] if report["rows_read"] else 0.0
        ),
    }
    for reason, count in sorted(report["quarantined_by_reason"].items()):
        metrics[f"quarantined.{reason}"] = count
    for split, count in report["rows_per_split"].items():
        metrics[f"rows.{split}"] = count
    return metrics
