"""Runs the flights feature job on the requested platform; returns its counts as metrics.

On ``local`` the Spark job runs in this process (``local[*]``), the same code a
SparkApplication's driver runs on a cluster: ``kfstack.spark_jobs.flights_features``.
"""

from __future__ import annotations

import logging

from kfstack import platforms

logger = logging.getLogger(__name__)


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
) -> dict[str, float]:
    """Runs the feature job and returns flat, KFP-loggable counts.

    Returns:
        ``rows_read``, ``rows_written``, ``rows_quarantined``, ``quarantined_fraction``,
        ``quarantined.<reason>`` per reason and ``rows.<split>`` per split.

    Raises:
        PlatformNotAvailableError: ``platform`` has no launcher yet (nothing was started).
        InvalidParameterError: A parameter is out of range (nothing was started).
        DataQualityError: Too many rows were quarantined (the quarantine is written).
    """
    platforms.require_available(platform, stage="flights-features")
    # Deferred: importing pyspark costs seconds and is not needed to compile pipelines.
    from kfstack.spark_jobs.flights_features.job import FeatureJobConfig, run_feature_job

    config = FeatureJobConfig(
        input_uri=data_uri or None,
        output_uri=features_uri,
        quarantine_uri=quarantine_uri,
        num_shards=num_shards,
        max_quarantine_fraction=max_quarantine_fraction,
        sample_fraction=sample_fraction,
        seed=seed,
    )
    report = run_feature_job(config)
    return report_metrics(report.to_dict())


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
