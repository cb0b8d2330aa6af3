"""The spark_job component under kfp.local: the team's application runs through KFP's own
executor, its Parquet becomes the Dataset and its report the Metrics."""

from __future__ import annotations

import contextlib
import json
import pathlib

import pyarrow.parquet as pq
import pytest

SAMPLE_APP = str(pathlib.Path(__file__).with_name("sample_app.py"))


@contextlib.contextmanager
def kfp_local(tmp_path):
    """kfp.local's subprocess runner in this environment, its earlier configuration restored."""
    from kfp import local
    from kfp.local import config

    previous = config.LocalExecutionConfig.instance
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "root"))
    try:
        yield
    finally:
        config.LocalExecutionConfig.instance = previous


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_runs_a_teams_application_through_kfp_local(tmp_path):
    from kfstack.components.data.spark_job.component import spark_job

    raw = tmp_path / "raw.csv"
    raw.write_text("id,amount\n1,10.5\n2,3\n,4\n")
    with kfp_local(tmp_path):
        task = spark_job(
            platform="local",
            spark_application=SAMPLE_APP,
            spark_arguments=["--label", "kfp"],
            input_uri=str(raw),
            spark_conf={"spark.sql.shuffle.partitions": 2},
            local_cores=1,
            run_id="run-1",
            task_name="spark-job",
        )

    rows = pq.read_table(task.outputs["output"].path).to_pylist()
    assert sorted((row["id"], row["amount"], row["label"]) for row in rows) == [
        ("1", 10.5, "kfp"),
        ("2", 3.0, "kfp"),
    ]
    metrics = task.outputs["report"].metadata
    assert (metrics["rows_read"], metrics["rows_written"], metrics["quarantined.missing_id"]) == (3, 2, 1)
    # The Metrics artifact's file is the report the application wrote.
    assert json.loads(pathlib.Path(task.outputs["report"].path).read_text())["rows_read"] == 3
    reference = task.outputs["spark_job"].metadata
    assert (reference["platform"], reference["kind"], reference["master"]) == (
        "local",
        "spark-submit",
        "local[1]",
    )


# A team's existing application, as most are written: its locations are its arguments, and it
# knows nothing of kfstack.
ARGUMENTS_APP = """
import argparse
from pyspark.sql import SparkSession

parser = argparse.ArgumentParser()
parser.add_argument("--input", required=True)
parser.add_argument("--output", required=True)
args = parser.parse_args()
spark = SparkSession.builder.getOrCreate()
rows = spark.read.csv(args.input, header=True)
rows.where(rows.id.isNotNull()).write.mode("overwrite").parquet(args.output)
spark.stop()
"""


# Slow: a second Spark run under kfp.local; the default suite replaces the locations in the driver
# (test_spark_job_driver.py) and runs the component once above.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_an_application_that_takes_its_locations_as_arguments_runs_as_it_is(tmp_path):
    """``--input=$KFSTACK_INPUT_URI --output=$KFSTACK_OUTPUT_URI``: the driver puts the step's
    locations into its arguments (a space in a path included), no wrapper of the team's."""
    from kfstack.components.data.spark_job.component import spark_job

    app = tmp_path / "existing_job.py"
    app.write_text(ARGUMENTS_APP)
    raw = tmp_path / "raw data" / "raw.csv"
    raw.parent.mkdir()
    raw.write_text("id,amount\n1,10.5\n2,3\n,4\n")
    with kfp_local(tmp_path):
        task = spark_job(
            platform="local",
            spark_application=str(app),
            spark_arguments=["--input=$KFSTACK_INPUT_URI", "--output=$KFSTACK_OUTPUT_URI"],
            input_uri=str(raw),
            local_cores=1,
            run_id="run-1",
            task_name="spark-job",
        )
    rows = pq.read_table(task.outputs["output"].path).to_pylist()
    assert sorted((row["id"], row["amount"]) for row in rows) == [("1", "10.5"), ("2", "3")]
