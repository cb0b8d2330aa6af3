"""A team's PySpark application as the generic Spark job runs it: a plain file that learns where
things are from the environment (kfstack.contracts), not from kfstack.

It reads a CSV of ``id,amount`` (``KFSTACK_INPUT_URI``), quarantines the rows whose id is missing
or whose amount is not a non-negative number (kfstack.spark.quality, a convenience it may use),
writes the valid rows as Parquet to ``KFSTACK_OUTPUT_URI`` and its counts to
``KFSTACK_REPORT_PATH``. The other options make it fail or hang on purpose, before Spark starts,
for the tests of failures and cancellation.
"""

import argparse
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--label", default="")
parser.add_argument("--quarantine-uri", default="")
parser.add_argument("--exit-code", type=int, default=0)
parser.add_argument("--raise-error", action="store_true")
parser.add_argument("--hang-after-writing", default="")
parser.add_argument("--bad-report", action="store_true")
args = parser.parse_args()

if args.exit_code:
    print(f"sample app: giving up with exit code {args.exit_code}", flush=True)
    sys.exit(args.exit_code)
if args.raise_error:
    raise RuntimeError("sample app: the input is not what it expected")
if args.hang_after_writing:
    with open(args.hang_after_writing, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
if args.bad_report:
    with open(os.environ["KFSTACK_REPORT_PATH"], "w") as f:
        json.dump({"rows_read": "many"}, f)
    sys.exit(0)

from pyspark.sql import SparkSession  # noqa: E402  (after the cheap failure modes)
from pyspark.sql import functions as F  # noqa: E402

from kfstack.spark import quality  # noqa: E402

spark = SparkSession.builder.getOrCreate()
raw = spark.read.option("header", True).csv(os.environ["KFSTACK_INPUT_URI"])
parsed = raw.withColumn("amount_value", F.col("amount").try_cast("double"))
rules = [
    ("missing_id", F.col("id").isNull()),
    ("unparseable_amount", F.col("amount").isNotNull() & F.col("amount_value").isNull()),
    ("negative_amount", F.col("amount_value") < 0),
]
tagged = quality.tag_rows(parsed, rules).persist()
counts = quality.count_reasons(tagged)
if args.quarantine_uri:
    quality.quarantined_rows(tagged).write.mode("overwrite").parquet(args.quarantine_uri)
valid = quality.valid_rows(tagged).select("id", F.col("amount_value").alias("amount"))
if args.label:
    valid = valid.withColumn("label", F.lit(args.label))
valid.write.mode("overwrite").parquet(os.environ["KFSTACK_OUTPUT_URI"])
written = spark.read.parquet(os.environ["KFSTACK_OUTPUT_URI"]).count()
quality.write_report({**counts.metrics(), "rows_written": written, "argv_length": len(sys.argv)})
print(f"sample app: argv={sys.argv} main={__name__}", flush=True)
spark.stop()
