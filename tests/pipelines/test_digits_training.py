"""digits-training, the second example: built on the public components only.

Default suite: the pipeline compiles and renders cluster objects that validate against the
upstream CRDs (SparkApplication, Katib Experiment with a TFJob trial, TFJob, an InferenceService
on Triton); its Spark job, TensorFlow training under MultiWorkerMirroredStrategy and evaluation
run under kfp.local on a sample. ``slow``: the whole pipeline through the CLI twice -- tuning,
the first deployment, and the second run's canary.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.kfp_local import logged, run_pipeline
from tests.upstream_crds import validate_with_crds


def test_the_render_is_valid_cluster_objects(tmp_path):
    import yaml

    from kfstack.pipelines.rendering import render, write_objects

    written = write_objects(render("digits-training", {}, run_id="run-1"), str(tmp_path / "render"))
    objects = [yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8")) for path in written]
    assert sorted(o["kind"] for o in objects) == [
        "Experiment",
        "InferenceService",
        "SparkApplication",
        "TFJob",
    ]
    [tfjob] = [o for o in objects if o["kind"] == "TFJob"]
    command = tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]
    assert command[:3] == ["python", "-m", "kfstack.training.entrypoint"]
    [isvc] = [o for o in objects if o["kind"] == "InferenceService"]
    assert isvc["spec"]["predictor"]["model"]["modelFormat"] == {"name": "onnx"}
    [experiment] = [o for o in objects if o["kind"] == "Experiment"]
    assert {p["name"] for p in experiment["spec"]["parameters"]} == {"hidden_units", "dropout", "activation"}
    assert experiment["spec"]["objective"]["objectiveMetricName"] == "val_accuracy"
    trial = experiment["spec"]["trialTemplate"]["trialSpec"]
    named = {**trial, "metadata": {**trial["metadata"], "name": "kfs-tune-trial-abcdefgh"}}
    validate_with_crds(tmp_path, [o for o in objects if o["kind"] != "Experiment"] + [named])


# kfp.local warns that the component's image is not plain Python; this process has its packages.
# Slow (about 21 s, a JVM and two TensorFlow workers): the default suite keeps the render above
# and the generic steps' own runs (tests/components/), and stays under its 10 minutes.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_its_spark_job_training_and_evaluation_run_under_kfp_local(tmp_path):
    from kfp import dsl

    from kfstack.components.data.spark_job.component import spark_job
    from kfstack.components.evaluation.model_evaluation.component import model_evaluation
    from kfstack.components.training.distributed_training.component import distributed_training
    from kfstack_examples.digits.pipeline import DIGITS

    @dsl.pipeline(name="digits-sample")
    def digits_sample():
        data = spark_job(
            platform="local",
            spark_application=DIGITS.data.application,
            spark_arguments=["--sample-percent=60"],
            run_id="run-1",
            task_name="spark-job",
        )
        training = distributed_training(
            platform="local",
            data=data.outputs["output"],
            **DIGITS.training_arguments(),
            hyperparameters={"hidden_units": 64, "epochs": 10},
            workers=2,
            max_restarts=0,
        )
        model_evaluation(
            model=training.outputs["model"],
            dataset=data.outputs["output"],
            dataset_split="test",
            task="multiclass",
            label_column=DIGITS.evaluation.label,
        )

    run = run_pipeline(digits_sample, tmp_path / "root")

    report = logged(run, "spark-job", "report")
    assert report["rows_quarantined"] == 0 and 900 < report["rows_read"] < 1300
    assert report["rows.train"] + report["rows.validation"] + report["rows.test"] == report["rows_read"]
    trained = logged(run, "distributed-training", "training_metrics")
    assert trained["world_size"] == 2 and trained["val_accuracy"] > 0.85
    assert (run / "distributed-training" / "model" / "model.onnx").is_file()
    evaluated = logged(run, "model-evaluation", "evaluation_metrics")
    assert evaluated["accuracy"] > 0.85 and evaluated["macro_f1"] > 0.85


@pytest.mark.slow
def test_the_whole_pipeline_twice_first_then_a_canary(tmp_path):
    """``make run-digits`` twice: tuning, training, evaluation, a first deployment; then the
    same again, whose model goes in as a canary judged on accuracy beside the first."""

    def run() -> dict:
        summary = tmp_path / "summary.json"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "kfstack.app.cli",
                "run",
                "--local",
                "digits-training",
                "--pipeline-root",
                str(tmp_path / "runs"),
                "--summary-json",
                str(summary),
            ],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
        return json.loads(summary.read_text())

    first, second = run(), run()
    for summary in (first, second):
        assert summary["status"] == "SUCCEEDED"
        metrics = summary["metrics"]
        assert metrics["tuning_metrics.trials_run"] == 4
        assert metrics["evaluation_metrics.accuracy"] > 0.9 and metrics["evaluation_metrics.macro_f1"] > 0.9
    assert first["metrics"]["serving_metrics.decision_first"] == 1
    assert second["metrics"]["serving_metrics.decision_promote"] == 1
    assert second["metrics"]["serving_metrics.canary_accuracy"] > 0.9


@pytest.mark.slow
def test_its_trainer_resumes_from_its_checkpoints(tmp_path):
    """A second training into the same logs (a restarted job) goes on from the last epoch."""
    from kfstack.components.data.spark_job.stage import STAGE as SPARK
    from kfstack.components.training.distributed_training.stage import STAGE as TRAIN
    from kfstack_examples.digits.pipeline import DIGITS

    def run(stage, arguments):
        settings = stage.settings(arguments)
        return stage.run_local(stage.variants(settings)[0].settings)

    data = str(tmp_path / "data")
    run(
        SPARK,
        {
            "platform": "local",
            "spark_application": DIGITS.data.application,
            "spark_arguments": ["--sample-percent=50"],
            "output": data,
            "report": str(tmp_path / "report"),
            "spark_job": str(tmp_path / "spark_job"),
            "run_id": "run-1",
            "task_name": "spark-job",
        },
    )
    logs = tmp_path / "logs"

    def train(epochs: int) -> None:
        run(
            TRAIN,
            {
                "platform": "local",
                "data": data,
                "model": str(tmp_path / f"model-{epochs}"),
                "training_logs": str(logs),
                **DIGITS.training_arguments(),
                "hyperparameters": {"epochs": epochs},
                "workers": 2,
                "max_restarts": 0,
            },
        )

    train(2)
    first = (logs / "attempt-1" / "rank-0.log").read_text()
    assert "epoch=2 " in first and "epoch=3 " not in first
    train(4)  # the same logs and checkpoints: it resumes after epoch 2
    second = (logs / "attempt-1" / "rank-0.log").read_text()
    assert "epoch=1 " not in second and "epoch=3 " in second and "epoch=4 " in second


def test_its_checkpoints_outlive_a_replica_on_an_object_store():
    """TensorFlow opens no object store without tensorflow-io: the trainer mirrors a local
    checkpoint folder to the URI and pulls it back on a restart (fsspec's memory store here)."""
    from kfstack_examples.digits.trainer import _CheckpointStore

    uri = "memory://digits-test/logs/checkpoints"
    first = _CheckpointStore(uri)
    assert first.remote and os.listdir(first.directory) == []  # nothing to resume from yet
    for name, text in {
        "ckpt-1.index": "1",
        "ckpt-1.data-00000-of-00001": "w1",
        "checkpoint": "ckpt-1",
    }.items():
        with open(os.path.join(first.directory, name), "w") as f:
            f.write(text)
    first.push()
    # The manager keeps the newest two: a dropped checkpoint leaves the store as well.
    os.remove(os.path.join(first.directory, "ckpt-1.index"))
    with open(os.path.join(first.directory, "checkpoint"), "w") as f:
        f.write("ckpt-2")
    first.push()
    restarted = _CheckpointStore(uri)  # a new replica's local folder, pulled from the store
    assert sorted(os.listdir(restarted.directory)) == ["checkpoint", "ckpt-1.data-00000-of-00001"]
    with open(os.path.join(restarted.directory, "checkpoint")) as f:
        assert f.read() == "ckpt-2"
    # A path is TensorFlow's own: used as it is, nothing mirrored.
    local = _CheckpointStore("/tmp/ckpt-path")
    assert not local.remote and local.directory == "/tmp/ckpt-path"
