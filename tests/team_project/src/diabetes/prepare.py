"""The data step: a PySpark application that takes its locations as options.

``spark-submit prepare.py --input=<CSV file or folder> --output=<folder>`` reads the patients'
rows, quarantines the malformed ones and splits the rest reproducibly into ``train/``,
``validation/`` and ``test/`` Parquet folders under ``--output`` (the ten measurements as
doubles, in :data:`diabetes.FEATURES` order, and ``target``). An empty ``--input`` reads
scikit-learn's bundled copy of the data instead (no download). A malformed row -- a value
missing or not a finite number, a ``sex`` other than 1 or 2, a target that is not positive --
goes to ``quarantine/`` with the first rule it breaks; the job fails when more than
``--max-quarantine-fraction`` of the rows were malformed, after writing them there.

Where ``KFSTACK_REPORT_PATH`` is set (a data step of kfstack's sets it), the job writes its
counts there as a JSON object of numbers, which become the step's metrics. Nothing here imports
kfstack.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# Written out here, not imported from the package: spark-submit may run this file alone, with
# its own folder on the path and the package nowhere (diabetes.FEATURES is the same list).
FEATURES = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")
LABEL = "target"
SPLITS = ("train", "validation", "test")
QUARANTINE = "quarantine"
REASON = "reason"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="diabetes-prepare", description="Quarantine malformed rows, split the rest into Parquet."
    )
    parser.add_argument(
        "--input", default="", help="a CSV file or folder with a header; empty: scikit-learn's copy"
    )
    parser.add_argument("--output", required=True, help="the folder the splits are written under")
    parser.add_argument("--validation-percent", type=int, default=20)
    parser.add_argument("--test-percent", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-quarantine-fraction", type=float, default=0.05)
    args = parser.parse_args(argv)
    if not args.output:
        parser.error("--output is empty: name the folder the splits are written under")
    if not (
        args.validation_percent > 0
        and args.test_percent > 0
        and args.validation_percent + args.test_percent < 100
    ):
        parser.error("--validation-percent and --test-percent must be positive and leave rows to train on")
    if not 0 <= args.max_quarantine_fraction <= 1:
        parser.error("--max-quarantine-fraction must be in [0, 1]")
    return args


def bundled_rows() -> list[tuple[str, ...]]:
    """scikit-learn's copy of the data, unscaled, as text rows (the CSV path's shape)."""
    from sklearn.datasets import load_diabetes

    data = load_diabetes(scaled=False)
    return [
        tuple(repr(float(v)) for v in (*row, target))
        for row, target in zip(data.data, data.target, strict=True)
    ]


def read_raw(spark, source: str):
    """The measurements and the target, every column as text first: a malformed value becomes a
    quarantined row, not a failed job (Spark 4 casts strictly) nor a silent null. A CSV's
    columns are found by their header's names, in any order, other columns ignored."""
    columns = (*FEATURES, LABEL)
    if not source:
        return spark.createDataFrame(bundled_rows(), ", ".join(f"{c} string" for c in columns))
    rows = spark.read.csv(source, header=True, mode="PERMISSIVE")  # no schema given: all text
    missing = [c for c in columns if c not in rows.columns]
    if missing:
        sys.exit(
            f"--input={source}: the CSV's header lacks {', '.join(missing)} (has {', '.join(rows.columns)})"
        )
    return rows.select(*columns)


def tag(raw):
    """``raw`` with each column typed beside its text, and ``reason``: the first rule the row
    breaks, null for a well-formed row."""
    from pyspark.sql import functions as F

    columns = (*FEATURES, LABEL)
    typed = raw.select(
        *[F.col(c).alias(f"{c}_raw") for c in columns],
        *[F.col(c).try_cast("double").alias(c) for c in columns],
    )
    rules = []
    for column in columns:
        text = F.col(f"{column}_raw")
        rules.append((f"missing_{column}", text.isNull() | (F.trim(text) == "")))
        rules.append((f"unparseable_{column}", F.col(column).isNull() | F.isnan(F.col(column))))
        rules.append((f"infinite_{column}", F.abs(F.col(column)) == float("inf")))
    rules.append(("sex_not_1_or_2", ~F.col("sex").isin(1.0, 2.0)))
    rules.append(("target_not_positive", F.col(LABEL) <= 0))
    reason = F.lit(None).cast("string")
    for name, broken in reversed(rules):  # built inside out: the first rule is checked first
        reason = F.when(broken, F.lit(name)).otherwise(reason)
    return typed.withColumn(REASON, reason)


def write_splits(spark, tagged, args: argparse.Namespace, output: str) -> dict[str, int]:
    """The quarantine and the three splits under ``output``; their counts.

    Raises:
        SystemExit: No rows, or more malformed ones than ``--max-quarantine-fraction`` allows
            (after they were written to the quarantine).
    """
    from pyspark.sql import functions as F

    columns = (*FEATURES, LABEL)
    rows_read = tagged.count()
    rejected = tagged.where(F.col(REASON).isNotNull())
    rows_quarantined = rejected.count()
    quarantine = rejected.select(REASON, *[F.col(f"{c}_raw").alias(c) for c in columns])
    quarantine.coalesce(1).write.mode("overwrite").parquet(f"{output}/{QUARANTINE}")
    if rows_read == 0:
        sys.exit(f"no rows in {args.input or 'the bundled data'}")
    if rows_quarantined > args.max_quarantine_fraction * rows_read:
        sys.exit(
            f"{rows_quarantined} of {rows_read} rows are malformed, more than "
            f"--max-quarantine-fraction={args.max_quarantine_fraction}; they are in {output}/{QUARANTINE}"
        )
    # A seeded hash of the row's values: the same row lands in the same split on every run.
    bucket = F.pmod(F.xxhash64(*[F.col(f"{c}_raw") for c in columns], F.lit(args.seed)), F.lit(100))
    valid = tagged.where(F.col(REASON).isNull()).withColumn("bucket", bucket)
    test_from = 100 - args.test_percent
    validation_from = test_from - args.validation_percent
    where = {
        "train": F.col("bucket") < validation_from,
        "validation": (F.col("bucket") >= validation_from) & (F.col("bucket") < test_from),
        "test": F.col("bucket") >= test_from,
    }
    counts = {"rows_read": rows_read, "rows_quarantined": rows_quarantined}
    for split in SPLITS:
        valid.where(where[split]).select(*columns).coalesce(1).write.mode("overwrite").parquet(
            f"{output}/{split}"
        )
        counts[f"rows_{split}"] = spark.read.parquet(f"{output}/{split}").count()
    return counts


def main(argv: list[str] | None = None) -> None:
    from pyspark.sql import SparkSession

    args = parse_args(argv)
    output = args.output.rstrip("/")
    # A session someone else started (a notebook, a test) is theirs to stop.
    started_here = SparkSession.getActiveSession() is None
    spark = SparkSession.builder.appName("diabetes-prepare").getOrCreate()
    tagged = tag(read_raw(spark, args.input)).persist()
    try:
        counts = write_splits(spark, tagged, args, output)
    finally:
        # In a session that goes on, cached rows would outlive a failed run and answer the next
        # read of the same files with these rows.
        tagged.unpersist()
    report = os.environ.get("KFSTACK_REPORT_PATH")
    if report:
        with open(report, "w") as f:
            json.dump(counts, f)
    print(" ".join(f"{name}={value}" for name, value in counts.items()))
    if started_here:
        spark.stop()


if __name__ == "__main__":
    main()
