"""The digits example's data step: a team's PySpark application as the generic Spark job runs it.

Run as ``__main__`` (``spark_application=kfstack_examples.digits.prepare``), it learns where
to write from ``KFSTACK_OUTPUT_URI`` (kfstack.contracts). It reads the 1,797 8×8 handwritten
digits scikit-learn ships (nothing is downloaded), checks every pixel is a number in 0-16 and
quarantines the rows that are not (kfstack.spark.quality), splits the rest reproducibly by a
seeded hash of the image id, and writes ``train/``, ``validation/`` and ``test/`` as Parquet
(columns ``p0``..``p63`` and ``digit``), the rejected rows with their reason to ``quarantine/``,
and its counts to ``KFSTACK_REPORT_PATH``.
"""

from __future__ import annotations

import argparse
import os

PIXELS = [f"p{i}" for i in range(64)]
LABEL = "digit"
SPLITS = ("train", "validation", "test")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="digits-prepare")
    parser.add_argument("--validation-percent", type=int, default=15)
    parser.add_argument("--test-percent", type=int, default=15)
    # A float: a pipeline that puts an int parameter into a list argument hands it over as "100.0".
    parser.add_argument("--sample-percent", type=float, default=100.0, help="share of the images kept")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if not (
        args.validation_percent > 0
        and args.test_percent > 0
        and args.validation_percent + args.test_percent < 100
    ):
        parser.error("validation and test percents must be positive and leave rows to train on")
    if not 0 < args.sample_percent <= 100:
        parser.error("--sample-percent must be in (0, 100]")
    return args


def main(argv: list[str] | None = None) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from sklearn.datasets import load_digits

    from kfstack.api import write_report
    from kfstack.api.spark import count_reasons, quarantined_rows, tag_rows, valid_rows

    args = parse_args(argv)
    output = os.environ["KFSTACK_OUTPUT_URI"]
    images, digits = load_digits(return_X_y=True)
    spark = SparkSession.builder.appName("digits-prepare").getOrCreate()
    rows = [
        (i, *map(float, image), int(digit))
        for i, (image, digit) in enumerate(zip(images, digits, strict=True))
    ]
    df = spark.createDataFrame(rows, ["id", *PIXELS, LABEL])
    bucket = F.pmod(F.xxhash64(F.col("id"), F.lit(args.seed)), F.lit(100))
    df = df.withColumn("bucket", bucket)
    if args.sample_percent < 100:
        # A second hash, so that a sample keeps the split's proportions.
        df = df.where(F.pmod(F.xxhash64(F.col("id"), F.lit(args.seed + 1)), F.lit(100)) < args.sample_percent)
    rules = [(f"bad_{name}", ~F.col(name).between(0.0, 16.0) | F.isnan(F.col(name))) for name in PIXELS]
    rules.append(("bad_digit", ~F.col(LABEL).between(0, 9)))
    tagged = tag_rows(df, rules).persist()
    counts = count_reasons(tagged)
    valid = valid_rows(tagged)
    test_from = 100 - args.test_percent
    validation_from = test_from - args.validation_percent
    where = {
        "train": F.col("bucket") < validation_from,
        "validation": (F.col("bucket") >= validation_from) & (F.col("bucket") < test_from),
        "test": F.col("bucket") >= test_from,
    }
    written = {}
    for split in SPLITS:
        part = valid.where(where[split]).select(*PIXELS, LABEL).coalesce(1)
        part.write.mode("overwrite").parquet(f"{output.rstrip('/')}/{split}")
        written[f"rows.{split}"] = spark.read.parquet(f"{output.rstrip('/')}/{split}").count()
    # Every rejected image is kept, with its reason, beside the splits (nothing is dropped silently).
    quarantined_rows(tagged).write.mode("overwrite").parquet(f"{output.rstrip('/')}/quarantine")
    counts.check(max_quarantine_fraction=0.01, where=f"{output.rstrip('/')}/quarantine")
    write_report({**counts.metrics(), **written})
    spark.stop()


if __name__ == "__main__":
    main()
