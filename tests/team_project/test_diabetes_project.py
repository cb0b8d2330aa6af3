"""A team's project as it is, run through kfstack without an adapter (``diabetes/``):

- the PySpark data step, which takes ``--input/--output``, through kfstack's Spark driver wrapper
  with a real local SparkSession: its arguments' ``$KFSTACK_...`` locations replaced by the
  wrapper, its report read as the step reads it;
- the argparse trainer ``main(argv=None, *, data_dir, model_dir)`` with dash-style options, as a
  real two-process DDP job over gloo through kfstack's training step and entrypoint
  (``option_style="dashes"``, the locations as ``code_arguments``);
- the ``kserve.Model`` serving the ONNX model that run exported, in kfstack's format server on a
  loopback port.

Each stage feeds the next (the splits train the model that is served), on small data and two
epochs; a longer run of the data step under spark-submit is marked slow.
"""

from __future__ import annotations

import json
import pathlib
import re

import httpx
import pyarrow.parquet as pq
import pytest

from kfstack import contracts
from kfstack.contracts import SparkApplicationCode
from kfstack.spark import driver
from tests.frameworks import needs_torch

PREPARE = str(pathlib.Path(__file__).with_name("src") / "diabetes" / "prepare.py")
SPARK_ARGUMENTS = ("--input=$KFSTACK_INPUT_URI", "--output=$KFSTACK_OUTPUT_URI")
# What the pipeline's page declares of the trainer.
TRAINING_CODE = contracts.TrainingCode(
    entry="diabetes.train:main",
    hyperparameters={"hidden_units": "int", "dropout": "float", "learning_rate": "float", "epochs": "int"},
    metrics=("val_rmse", "val_loss"),
    arguments={"data_dir": "$KFSTACK_INPUT_DIR", "model_dir": "$KFSTACK_MODEL_DIR"},
    option_style="dashes",
)
# The bundled data: 442 patients, all well formed.
PATIENTS = 442
MEASUREMENTS = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")
HEADER = ",".join([*MEASUREMENTS, "target"])


def prepare(spark, monkeypatch, output, input_uri: str = "") -> dict[str, float]:
    """The data step as kfstack's driver wrapper runs it, in this process's SparkSession: the
    locations in the environment a step gives the driver, the report read back."""
    monkeypatch.setenv(contracts.OUTPUT_URI_ENV, str(output))
    if input_uri:
        monkeypatch.setenv(contracts.INPUT_URI_ENV, input_uri)
    else:
        monkeypatch.delenv(contracts.INPUT_URI_ENV, raising=False)
    return driver.run(SparkApplicationCode(PREPARE, SPARK_ARGUMENTS))


@pytest.fixture(scope="module")
def splits(spark, tmp_path_factory) -> pathlib.Path:
    """The bundled data prepared once, for the trainer and the server."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        output = tmp_path_factory.mktemp("diabetes") / "splits"
        report = prepare(spark, monkeypatch, output)
    assert report["rows_read"] == PATIENTS
    return output


def test_the_data_step_splits_the_bundled_data_through_the_driver_wrapper(splits):
    counts = {split: pq.read_table(splits / split).num_rows for split in ("train", "validation", "test")}
    assert sum(counts.values()) == PATIENTS and min(counts.values()) > 40
    train = pq.read_table(splits / "train")
    assert train.column_names == [*MEASUREMENTS, "target"]
    assert all(str(field.type) == "double" for field in train.schema)
    assert pq.read_table(splits / "quarantine").num_rows == 0


def test_a_csv_input_has_its_malformed_rows_quarantined(spark, monkeypatch, tmp_path):
    rows = [
        "59,2,32.1,101,157,93.2,38,4,4.8598,87,151",
        "48,1,21.6,87,183,103.2,70,3,3.8918,69,75",
        "72,3,30.5,93,156,93.6,41,4,4.6728,85,141",  # sex 3
        "24,1,,84,198,131.4,40,5,4.8903,89,206",  # bmi missing
        "50,1,23,101,192,125.4,52,4,4.2905,80,abc",  # target not a number
    ] * 20
    raw = tmp_path / "raw data" / "patients.csv"  # a space in the location, kept whole
    raw.parent.mkdir()
    raw.write_text("\n".join([HEADER, *rows]) + "\n")
    output = tmp_path / "out"
    with pytest.raises(SystemExit, match="60 of 100 rows are malformed"):
        prepare(spark, monkeypatch, output, str(raw))
    reasons = sorted(row["reason"] for row in pq.read_table(output / "quarantine").to_pylist())
    assert set(reasons) == {"sex_not_1_or_2", "missing_bmi", "unparseable_target"}
    raw.write_text("\n".join([HEADER, *rows[:2] * 30, rows[2]]) + "\n")
    report = prepare(spark, monkeypatch, output, str(raw))
    assert report == {
        "rows_read": 61,
        "rows_quarantined": 1,
        **{
            f"rows_{split}": pq.read_table(output / split).num_rows
            for split in ("train", "validation", "test")
        },
    }


def test_a_csv_without_the_columns_is_named(spark, monkeypatch, tmp_path):
    raw = tmp_path / "patients.csv"
    raw.write_text("age,sex\n1,2\n")
    with pytest.raises(SystemExit, match="the CSV's header lacks bmi, bp"):
        prepare(spark, monkeypatch, tmp_path / "out", str(raw))


@pytest.fixture(scope="module")
def trained(diabetes_project, splits, tmp_path_factory) -> dict:
    """Two processes train the regressor together (DDP over gloo) through kfstack's training
    step, under a PyTorchJob's env: each replica's entrypoint calls ``main(["--hidden-units=16",
    "--dropout=0.0", "--learning-rate=0.05", "--epochs=2"], data_dir=..., model_dir=...)``."""
    from kfstack.components.training.distributed_training.stage import train_locally
    from kfstack.training.settings import JobTopology

    root = tmp_path_factory.mktemp("trained")
    metrics, reference = train_locally(
        TRAINING_CODE,
        {"hidden_units": 16, "dropout": 0.0, "learning_rate": 0.05, "epochs": 2},
        data_uri=str(splits),
        model_uri=str(root / "model"),
        logs_uri=str(root / "logs"),
        topology=JobTopology(workers=2, max_restarts=0),
        model_format=contracts.ONNX,
        training_api="v1",
    )
    return {"metrics": metrics, "reference": reference, "model": root / "model", "logs": root / "logs"}


@needs_torch
def test_the_argparse_trainer_trains_in_ddp_with_dash_style_options(trained):
    metrics = trained["metrics"]
    assert metrics["world_size"] == 2
    # Two epochs of a small network: far better than predicting the mean (the target's standard
    # deviation is about 77), not yet good.
    assert 30 < metrics["val_rmse"] < 75
    assert metrics["val_loss"] == pytest.approx((metrics["val_rmse"] / 77) ** 2, rel=0.35)
    assert sorted(p.name for p in trained["model"].iterdir()) == ["lineage.json", "model.onnx"]
    rank_1 = (trained["logs"] / "attempt-1" / "rank-1.log").read_text()
    assert "Traceback" not in rank_1
    lineage = json.loads((trained["model"] / "lineage.json").read_text())
    assert lineage["parameters"]["hidden_units"] == 16 and lineage["parameters"]["learning_rate"] == 0.05


@needs_torch
def test_in_a_tuning_trial_the_trainer_prints_its_metrics_and_exports_nothing(
    diabetes_project, splits, tmp_path, monkeypatch, capsys
):
    """One process, called as a trial's entrypoint calls it: its metric lines, and no model
    (nothing keeps a trial's)."""
    from diabetes.train import main

    monkeypatch.setenv(contracts.TRIAL_ENV, "kfs-tune-abc-1")
    for name in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    main(
        ["--hidden-units=8", "--learning-rate=0.05", "--epochs=1"],
        data_dir=str(splits),
        model_dir=str(tmp_path),
    )
    assert re.fullmatch(r"epoch=1 val_rmse=\d+\.\d{4} val_loss=\d+\.\d{4}\n", capsys.readouterr().out)
    assert list(tmp_path.iterdir()) == []


@needs_torch
def test_the_predictor_serves_the_exported_model_on_loopback(trained, tmp_path):
    from kfstack.serving import format_server, local_services

    name = "diabetes"
    service = local_services.start_service(
        str(tmp_path),
        "predictor",
        lambda port: format_server.command(
            str(trained["model"]), name, port, contracts.CUSTOM, "diabetes.predictor:DiabetesRegressor"
        ),
        ready_path=f"/v2/models/{name}/ready",
        timeout_seconds=60,
    )
    try:
        url = f"{service.url}/v1/models/{name}:predict"
        patient = [59, 2, 32.1, 101, 157, 93.2, 38, 4, 4.8598, 87]
        record = dict(zip(MEASUREMENTS, patient, strict=True))
        answer = httpx.post(url, json={"instances": [patient, {**record, "id": "p-1"}]}, timeout=30)
        assert answer.status_code == 200, answer.text
        first, second = answer.json()["predictions"]
        assert first == pytest.approx(second) and 25 < first < 350
        for body, message in (
            ({"instances": [patient[:9]]}, "instances[0]: 9 values; expected 10"),
            ({"instances": [{**record, "bmi": "high"}]}, "instances[0].bmi='high': expected a finite number"),
            ({"rows": [patient]}, "expected a V1 body"),
        ):
            refused = httpx.post(url, json=body, timeout=30)
            assert refused.status_code == 400 and message in refused.text, refused.text
    finally:
        local_services.stop_service(str(tmp_path), "predictor")


@pytest.mark.slow  # a JVM of its own; the default suite runs the same wrapper in-process above
def test_the_data_step_runs_as_a_module_under_spark_submit_as_the_embedded_step_runs_it(
    diabetes_project, tmp_path
):
    from kfstack.components.data.spark_job.component import spark_job
    from kfstack.components.data.spark_job.stage import STAGE

    arguments = {
        name: spec.default for name, spec in spark_job.component_spec.inputs.items() if spec.optional
    }
    arguments.update(
        platform="local",
        spark_application="diabetes.prepare",
        spark_arguments=list(SPARK_ARGUMENTS),
        local_cores=1,
        output=str(tmp_path / "output"),
        report=str(tmp_path / "report"),
    )
    result = STAGE.run_local(STAGE.settings(arguments))
    report = result.metrics["report"]
    assert report["rows_read"] == PATIENTS and report["rows_quarantined"] == 0
    assert pq.read_table(tmp_path / "output" / "train").num_rows == report["rows_train"]
