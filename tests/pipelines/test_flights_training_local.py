"""The whole flights-training pipeline, compiled and run by kfp.local on real data.

The default suite runs it on a small sample of the real flights; the ``slow`` test is the main
job itself (``make run``): the full data, through the CLI, checked through its summary JSON.
"""

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from kfstack.app.local_run import run_pipeline_locally
from kfstack.features import FEATURE_SPEC_FILE, FeatureSpec


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    summary = run_pipeline_locally(
        "flights-training",
        {
            "platform": "local",
            "sample_fraction": 0.03,
            "num_shards": 2,
            "workers": 2,
            "epochs": 2,
            "batch_size": 256,
        },
        pipeline_root=str(root),
    )
    return summary


def test_sample_run_succeeds_through_every_stage(sample_run):
    assert sample_run.status == "SUCCEEDED", sample_run.render()
    assert list(sample_run.stages) == [
        "validate-run",
        "flights-features",
        "train-model",
        "evaluate-model",
        "cleanup-run",
    ]
    assert all(seconds > 0 for seconds in sample_run.stages.values())
    assert sample_run.peak_rss_bytes > 0


def test_sample_run_accounts_for_every_row(sample_run):
    data = sample_run.data
    assert data["rows_read"] > 5_000  # 3 % of 336,776 flights
    assert data["rows_read"] == data["rows_written"] + data["rows_quarantined"]
    per_reason = sum(v for k, v in data.items() if k.startswith("quarantined."))
    assert per_reason == data["rows_quarantined"]


def test_sample_run_learns_something_and_reports_it(sample_run):
    metrics = sample_run.metrics
    # A model that learned nothing scores 0.5; the shipped data carries real signal.
    assert metrics["test_metrics.auc"] > 0.55
    assert 0.0 < metrics["test_metrics.log_loss"] < 1.0
    assert metrics["training_metrics.val_auc"] > 0.55
    assert metrics["test_metrics.test_rows"] > 0


def test_sample_run_artifacts_are_where_the_summary_says(sample_run):
    artifacts = sample_run.artifacts
    model_dir = artifacts["model"]
    assert os.path.isfile(os.path.join(model_dir, "model.onnx"))
    spec = FeatureSpec.load(os.path.join(model_dir, FEATURE_SPEC_FILE))
    assert spec.categorical and spec.numeric
    features = artifacts["features"]
    for split in ("train", "validation", "test"):
        files = sorted(f for f in os.listdir(os.path.join(features, split)) if f.endswith(".parquet"))
        assert len(files) == 2, split
    with open(artifacts["report"], encoding="utf-8") as f:
        assert "AUC" in f.read()
    test_rows = sum(
        pq.ParquetFile(os.path.join(features, "test", f)).metadata.num_rows
        for f in os.listdir(os.path.join(features, "test"))
        if f.endswith(".parquet")
    )
    assert sample_run.metrics["test_metrics.test_rows"] == test_rows


def test_tensorflow_branch_runs_the_parameter_server_topology(tmp_path):
    summary = run_pipeline_locally(
        "flights-training",
        {
            "platform": "local",
            "framework": "tensorflow",
            "tf_topology": "parameter_server",
            "sample_fraction": 0.03,
            "num_shards": 2,
            "workers": 2,
            "epochs": 2,
            "batch_size": 256,
        },
        pipeline_root=str(tmp_path),
    )
    assert summary.status == "SUCCEEDED", summary.render()
    assert list(summary.stages) == [
        "validate-run",
        "flights-features",
        "train-model",
        "evaluate-model",
        "cleanup-run",
    ]
    assert summary.metrics["test_metrics.auc"] > 0.55
    with open(summary.artifacts["training_job"], encoding="utf-8") as f:
        reference = json.load(f)
    assert reference["topology"] == "parameter_server"
    assert reference["replicas"] == {"chief": 1, "worker": 2, "ps": 1}


def test_inconsistent_parameters_fail_before_any_stage(tmp_path):
    # No shard for the second rank: refused by the first task, before Spark starts.
    summary = run_pipeline_locally(
        "flights-training",
        {"platform": "local", "sample_fraction": 0.01, "num_shards": 1, "workers": 2},
        pipeline_root=str(tmp_path),
    )
    assert summary.status == "FAILED"
    assert list(summary.stages) == ["validate-run", "cleanup-run"]
    assert "num_shards=1 < workers=2" in summary.error


def test_a_failing_stage_fails_the_run_with_its_error(tmp_path):
    missing = tmp_path / "no-such-data"
    summary = run_pipeline_locally(
        "flights-training",
        {"platform": "local", "data_uri": str(missing), "num_shards": 2, "workers": 2},
        pipeline_root=str(tmp_path / "runs"),
    )
    assert summary.status == "FAILED"
    assert list(summary.stages) == ["validate-run", "flights-features", "cleanup-run"]
    assert "flights-features" in summary.error and str(missing) in summary.error
    assert summary.failed_task_log_tail


@pytest.mark.slow
def test_main_job_on_the_full_data(tmp_path):
    """``make run``: the CLI, the full data, the summary JSON."""
    summary_path = tmp_path / "summary.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kfstack.app.cli",
            "run",
            "--local",
            "flights-training",
            "--pipeline-root",
            str(tmp_path / "runs"),
            "--summary-json",
            str(summary_path),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    summary = json.loads(summary_path.read_text())
    for key in ("status", "wall_seconds", "stages", "metrics", "artifacts", "data"):
        assert key in summary
    assert summary["status"] == "SUCCEEDED"
    data = summary["data"]
    assert data["rows_read"] == 336_776
    assert data["rows_read"] == data["rows_written"] + data["rows_quarantined"]
    assert summary["metrics"]["test_metrics.auc"] > 0.65
