"""The flights feature job as a platform stage: a SparkApplication, or Spark ``local[*]`` here.

Both run the same ``main(argv)`` (:mod:`kfstack.spark_jobs.flights_features.job`): on
Kubernetes as the SparkApplication driver's main file (:data:`kfstack.images.SPARK_MAIN_FILE`),
then this stage reads the job's report from the output URI; locally in this process.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import fsspec

from kfstack import images
from kfstack.features import JOB_REPORT_FILE
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.resources import SPARK_APPLICATION
from kfstack.kubernetes.spark_application import (
    SparkApplicationRequest,
    SparkJobPlacement,
    SparkResources,
    build_spark_application,
)
from kfstack.platforms import StageResult, Variant
from kfstack.spark_jobs.flights_features.config import SPARK_CONF, FeatureJobConfig
from kfstack.uris import fsspec_uri, join

NAME_PREFIX = "kfs-features"
DATA_REPORT = "data_report"


@dataclasses.dataclass(frozen=True)
class FeatureStageSettings:
    """The feature step: the job's parameters, its Spark sizes, its placement."""

    job: FeatureJobConfig
    resources: SparkResources
    placement: SparkJobPlacement


class FlightsFeaturesStage:
    component = "flights-features"
    reference_output = "spark_job"

    def settings(self, arguments: Mapping[str, Any]) -> FeatureStageSettings:
        return FeatureStageSettings(
            job=FeatureJobConfig.from_arguments(arguments),
            resources=SparkResources.from_arguments(arguments),
            placement=SparkJobPlacement.from_arguments(arguments),
        )

    def variants(self, settings: FeatureStageSettings) -> list[Variant[FeatureStageSettings]]:
        """One way: a SparkApplication of the spark-operator."""
        return [Variant(settings, (SPARK_APPLICATION,))]

    def preflight(self, settings: FeatureStageSettings) -> None:
        """Nothing to read first: the job checks its own tables before it starts Spark."""

    def build(self, settings: FeatureStageSettings, context: RunContext) -> list[dict]:
        """The SparkApplication; its URIs are the remote ones the driver and executors open."""
        job = settings.job
        remote = dataclasses.replace(
            job,
            input_uri=fsspec_uri(job.input_uri) if job.input_uri else None,
            output_uri=fsspec_uri(job.output_uri),
            quarantine_uri=fsspec_uri(job.quarantine_uri),
            # The champion's profile: a KFP artifact URI (minio://...) the driver opens as s3://.
            reference_profile_uri=fsspec_uri(job.reference_profile_uri) if job.reference_profile_uri else "",
        )
        placement = settings.placement
        return [
            build_spark_application(
                SparkApplicationRequest(
                    name=context.name(NAME_PREFIX),
                    labels=context.labels(),
                    image=images.image_for("spark"),
                    main_file=images.SPARK_MAIN_FILE,
                    arguments=remote.to_argv(),
                    profile=placement.profile,
                    secrets=placement.secrets,
                    service_account=placement.service_account,
                    resources=settings.resources,
                    spark_conf=SPARK_CONF,
                )
            )
        ]

    def run_local(self, settings: FeatureStageSettings) -> StageResult:
        # pyspark is imported only here: compiling or rendering pipelines must not need it.
        from kfstack.spark_jobs.flights_features.job import run_feature_job

        report = run_feature_job(settings.job)
        return StageResult(
            {DATA_REPORT: report_metrics(report.to_dict())}, {"kind": "SparkSession", "master": "local[*]"}
        )

    def collect(self, settings: FeatureStageSettings, finished: list[dict], cluster: Cluster) -> StageResult:
        with fsspec.open(join(fsspec_uri(settings.job.output_uri), JOB_REPORT_FILE), "r") as f:
            report = json.load(f)
        return StageResult({DATA_REPORT: report_metrics(report)}, {})


STAGE = FlightsFeaturesStage()


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
