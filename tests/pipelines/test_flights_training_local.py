"""The whole flights-training pipeline, compiled and run by kfp.local on real data.

The default suite runs it on a small sample of the real flights; the ``slow`` test is the main
job itself (``make run``): the full data, through the CLI, checked through its summary JSON.
"""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from kfstack.app.local_run import run_pipeline_locally
from kfstack.serving.format_server import MODULE as FORMAT_SERVER
from kfstack_examples.flights.feature_spec import FEATURE_SPEC_FILE, FeatureSpec

STAGES = [
    "validate-run",
    "spark-job",
    "hyperparameter-tuning",
    "distributed-training",
    "model-evaluation",
    "model-deployment",
    "register-model",
    "cleanup-run",
]
SAMPLE_PARAMS = {
    "sample_fraction": 0.03,
    "num_shards": 2,
    "workers": 2,
    "epochs": 2,
    "batch_size": 256,
    # Smaller than the local budget `run --local` applies (4 trials of 4 epochs).
    "tuning_max_trials": 3,
    "tuning_trial_epochs": 2,
    "tuning_start_step": 1,
    # A seeded sampler: the same trials every time (unseeded, as on Katib, a run may tune to a
    # learning rate that two epochs on this small sample cannot use).
    "tuning_algorithm_settings": '{"random_state": 7}',
}


def kfstack_run(root, *params: str, tmpdir, flags: tuple[str, ...] = (), **popen) -> subprocess.Popen:
    """``kfstack run --local`` in a fresh process, with its own (empty) temp folder."""
    argv = [
        sys.executable,
        "-m",
        "kfstack.app.cli",
        "run",
        "--local",
        "flights-training",
        "--pipeline-root",
        str(root),
        *flags,
    ]
    for p in params:
        argv += ["--param", p]
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # Ctrl-C as a terminal delivers it, even when the tests themselves run as a shell's
        # background job (which starts with SIGINT ignored, and children inherit that).
        preexec_fn=_interruptible,
        **popen,
    )


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    """A real run through the CLI, as a user starts it; its output, summary and temp folder."""
    root, tmpdir = tmp_path_factory.mktemp("runs"), tmp_path_factory.mktemp("tmp")
    # On cluster-like locations: every step's code is told file:// URIs, as a cluster tells it
    # s3:// ones, so the flights code is held to treating locations as URIs.
    params = (f"{k}={v}" for k, v in SAMPLE_PARAMS.items())
    proc = kfstack_run(root, *params, tmpdir=tmpdir, flags=("--uri-locations",))
    out, err = proc.communicate(timeout=600)
    (run_dir,) = run_dirs(root)
    with open(run_dir / "summary.json", encoding="utf-8") as f:
        summary = json.load(f)
    return SimpleNamespace(
        returncode=proc.returncode, out=out, err=err, summary=summary, tmpdir=tmpdir, root=root
    )


def run_dirs(root) -> list:
    """The run directories under a pipeline root (beside them: the model registry)."""
    return sorted(p for p in root.iterdir() if (p / ".kfstack-run").exists())


@pytest.mark.slow
def test_the_first_run_deploys_its_model_straight_to_production(sample_run):
    serving = sample_run.summary["serving"]
    run_name = os.path.basename(sample_run.summary["run_dir"])
    assert serving["mode"] == "local" and serving["decision"] == "first"
    assert serving["model_version"] == serving["production_version"] == run_name
    assert serving["previous_version"] is None and serving["figures"] == {}
    production = json.loads((sample_run.root / "registry" / "flights-delay" / "production.json").read_text())
    assert production["version"] == run_name
    assert sample_run.summary["metrics"]["serving_metrics.decision_first"] == 1
    assert "serving    local: first" in sample_run.out


@pytest.mark.slow
def test_sample_run_succeeds_through_every_stage(sample_run):
    summary = sample_run.summary
    assert sample_run.returncode == 0, sample_run.out + sample_run.err
    assert summary["status"] == "SUCCEEDED"
    assert list(summary["stages"]) == STAGES
    assert all(
        stage["seconds"] > 0 and stage["status"] == "SUCCEEDED" for stage in summary["stages"].values()
    )
    assert summary["peak_rss_bytes"] > 0


@pytest.mark.slow
def test_sample_run_tunes_and_trains_with_the_best_trial(sample_run):
    tuning = sample_run.summary["tuning"]
    assert tuning["tuned"] and tuning["algorithm"] == "tpe"
    assert tuning["trials_run"] == 3
    assert tuning["trials_succeeded"] + tuning["trials_early_stopped"] + tuning["trials_failed"] == 3
    assert set(tuning["best_parameters"]) == {"learning_rate", "batch_size"}
    assert tuning["best_parameters"]["batch_size"] in (512, 1024, 2048)  # from the default space
    assert 0.5 < tuning["best_objective"]["val_auc"] <= 1.0
    # The local budget filled in what the user did not set; the user's values won.
    arguments = sample_run.summary["arguments"]
    assert arguments["tuning_parallel_trials"] == 1 and arguments["tuning_max_trials"] == 3


@pytest.mark.slow
def test_the_console_shows_task_lines_not_kfp_output(sample_run):
    # One line per task state and its reported progress; kfp.local's executor input JSON and the
    # tasks' own output are in the run directory's logs.
    console = sample_run.out + sample_run.err
    assert "executor_input" not in console and "pipelinechannel--" not in console
    assert "[rank 0]" not in console
    for task in STAGES:
        assert re.search(rf"^{task} +done +\d+\.\d s$", sample_run.err, re.MULTILINE), sample_run.err
    assert re.search(r"^spark-job +running +spark: profile 5/6$", sample_run.err, re.MULTILINE)
    assert re.search(r"^distributed-training +running +epoch 2/2$", sample_run.err, re.MULTILINE)
    logs = os.path.join(sample_run.summary["run_dir"], "logs")
    with open(os.path.join(logs, "kfp.log"), encoding="utf-8") as f:
        assert "executor_input" in f.read()
    with open(os.path.join(logs, "distributed-training.log"), encoding="utf-8") as f:
        train_log = f.read()
    assert "[rank 0] epoch=2 val_auc=" in train_log and "KFP Executor" not in train_log


@pytest.mark.slow
def test_the_summary_tells_the_truth(sample_run):
    summary = sample_run.summary
    # Every path it names exists: artifacts, logs, the run directory.
    assert os.path.isdir(summary["run_dir"])
    paths = [
        *summary["artifacts"].values(),
        *(s["log"] for s in summary["stages"].values()),
        summary["kfp_log"],
    ]
    missing = [path for path in paths if not os.path.exists(path)]
    assert not missing
    assert {"model", "output", "evaluation_report", "charts"} <= set(summary["artifacts"])
    # Metrics-only outputs are not paths: their values are under metrics.
    assert not {"evaluation_metrics", "classification", "data_report", "training_metrics"} & set(
        summary["artifacts"]
    )
    # Counts are integers; every parameter is recorded, defaults included.
    assert all(type(summary["data"][k]) is int for k in ("rows_read", "rows_written", "rows_quarantined"))
    assert type(summary["metrics"]["evaluation_metrics.rows"]) is int
    from kfstack.pipelines import load_pipeline

    assert set(summary["arguments"]) == set(load_pipeline("flights-training").component_spec.inputs)
    assert summary["arguments"]["epochs"] == 2 and summary["arguments"]["learning_rate"] == 0.003
    assert summary["arguments"]["platform"] == "local"


@pytest.mark.slow
def test_nothing_is_left_in_the_temp_folder(sample_run):
    assert sample_run.returncode == 0
    assert os.listdir(sample_run.tmpdir) == []
    assert not os.path.exists(os.path.join(sample_run.summary["run_dir"], "tmp"))


@pytest.mark.slow
def test_sample_run_accounts_for_every_row(sample_run):
    data = sample_run.summary["data"]
    assert data["rows_read"] > 5_000  # 3 % of 336,776 flights
    assert data["rows_read"] == data["rows_written"] + data["rows_quarantined"]
    per_reason = sum(v for k, v in data.items() if k.startswith("quarantined."))
    assert per_reason == data["rows_quarantined"]


@pytest.mark.slow
def test_sample_run_learns_something_and_reports_it(sample_run):
    metrics = sample_run.summary["metrics"]
    # A model that learned nothing scores 0.5; the shipped data carries real signal.
    assert metrics["evaluation_metrics.auc"] > 0.55
    assert 0.0 < metrics["evaluation_metrics.log_loss"] < 1.0
    assert metrics["training_metrics.val_auc"] > 0.55
    assert metrics["evaluation_metrics.rows"] > 0
    # Throughput of the 2 replicas, and the cost per epoch at the cpu pool's nominal price.
    per_replica = metrics["training_metrics.report.samples_per_second"] / 2
    assert metrics["training_metrics.report.samples_per_second_per_replica"] == pytest.approx(per_replica)
    assert metrics["training_metrics.report.seconds_per_epoch"] > 0
    assert metrics["training_metrics.cost_per_epoch"] > 0


@pytest.mark.slow
def test_sample_run_artifacts_are_where_the_summary_says(sample_run):
    artifacts = sample_run.summary["artifacts"]
    model_dir = artifacts["model"]
    assert os.path.isfile(os.path.join(model_dir, "model.onnx"))
    spec = FeatureSpec.load(os.path.join(model_dir, FEATURE_SPEC_FILE))
    assert spec.categorical and spec.numeric
    features = artifacts["output"]
    for split in ("train", "validation", "test"):
        files = sorted(f for f in os.listdir(os.path.join(features, split)) if f.endswith(".parquet"))
        assert len(files) == 2, split
    with open(artifacts["evaluation_report"], encoding="utf-8") as f:
        assert "| auc |" in f.read()
    with open(artifacts["charts"], encoding="utf-8") as f:
        assert f.read().count("<svg") == 2
    test_rows = sum(
        pq.ParquetFile(os.path.join(features, "test", f)).metadata.num_rows
        for f in os.listdir(os.path.join(features, "test"))
        if f.endswith(".parquet")
    )
    # Every test-split flight was scored, as a request through the predictor.
    assert sample_run.summary["metrics"]["evaluation_metrics.rows"] == test_rows


# A whole run (about 40 s): slow. The default suite trains the TensorFlow topologies directly
# (tests/training/test_tensorflow_trainer.py) and runs the pipeline with PyTorch.
@pytest.mark.slow
def test_tensorflow_branch_runs_the_parameter_server_topology(tmp_path):
    summary = run_pipeline_locally(
        "flights-training",
        {
            "platform": "local",
            "framework": "tensorflow",
            "tf_topology": "parameter_server",
            "tune": False,  # the tuning step's trials are the PyTorch sample run's
            "sample_fraction": 0.03,
            "num_shards": 2,
            "workers": 2,
            "epochs": 2,
            "batch_size": 256,
        },
        pipeline_root=str(tmp_path),
    )
    assert summary.status == "SUCCEEDED", summary.render()
    assert list(summary.stages) == STAGES
    assert summary.metrics["evaluation_metrics.auc"] > 0.55
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


@pytest.mark.slow
def test_a_failing_stage_fails_the_run_with_its_error(tmp_path):
    missing = tmp_path / "no-such-data"
    summary = run_pipeline_locally(
        "flights-training",
        {"platform": "local", "data_uri": str(missing), "num_shards": 2, "workers": 2},
        pipeline_root=str(tmp_path / "runs"),
    )
    assert summary.status == "FAILED"
    assert list(summary.stages) == ["validate-run", "spark-job", "cleanup-run"]
    assert "spark-job" in summary.error and str(missing) in summary.error
    # The tail is the task's own log (its traceback), not kfp's executor input.
    assert summary.failed_task_log_tail
    assert not any("pipelinechannel--" in line for line in summary.failed_task_log_tail)
    assert any(str(missing) in line for line in summary.failed_task_log_tail)


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
    assert summary["metrics"]["evaluation_metrics.auc"] > 0.65


@pytest.mark.slow
def test_ctrl_c_stops_every_process_and_writes_a_cancelled_summary(tmp_path):
    """A real Ctrl-C: SIGINT to the run's process group (what a terminal sends) mid-Spark."""
    import psutil

    root, tmpdir = tmp_path / "runs", tmp_path / "tmp"
    tmpdir.mkdir()
    proc = kfstack_run(root, "sample_fraction=0.05", "epochs=50", tmpdir=tmpdir, start_new_session=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "spark: read and validate" in line:
            break
    started = psutil.Process(proc.pid).children(recursive=True)
    assert "java" in {p.name() for p in started}  # Spark's JVM is up: a real tree to stop
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)

    assert proc.returncode == 130, out + err
    messages = [line for line in err.splitlines() if line.startswith("kfstack run:")]
    assert len(messages) == 1 and "cancelled" in messages[0], err
    assert "Traceback" not in out + err
    alive = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == []
    assert os.listdir(tmpdir) == []
    (run_dir,) = run_dirs(root)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "CANCELLED"
    assert summary["stages"]["validate-run"]["status"] == "SUCCEEDED"
    assert summary["stages"]["spark-job"]["status"] == "CANCELLED"
    assert "distributed-training" not in summary["stages"]
    assert not (run_dir / "tmp").exists()


# Small runs without tuning: the deployment is what these tests are about.
DEPLOY_PARAMS = {**SAMPLE_PARAMS, "tune": "false"}


@pytest.mark.slow
def test_a_second_run_canaries_against_the_first_and_decides(tmp_path):
    """The second `make run` does more than the first: it canaries against production."""
    root = tmp_path / "runs"
    params = [f"{k}={v}" for k, v in DEPLOY_PARAMS.items()]
    for _ in range(2):
        proc = kfstack_run(root, *params, tmpdir=tmp_path)
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, out + err
    first, second = (json.loads((d / "summary.json").read_text()) for d in run_dirs(root))
    assert first["serving"]["decision"] == "first"
    serving = second["serving"]
    # The same data and seed train the same model (up to float noise): a healthy canary.
    assert serving["decision"] == "promote" and serving["failed_checks"] == [], serving
    assert serving["previous_version"] == first["serving"]["model_version"]
    figures = serving["figures"]
    assert figures["stable_requests"] == figures["canary_requests"] > 0
    assert figures["stable_error_rate"] == 0.0
    # The registry says what the decision says.
    registry = root / "registry" / "flights-delay"
    production = json.loads((registry / "production.json").read_text())
    expected = serving["model_version"] if serving["decision"] == "promote" else serving["previous_version"]
    assert production["version"] == serving["production_version"] == expected
    history = [json.loads(line) for line in (registry / "history.jsonl").read_text().splitlines()]
    assert [e["event"] for e in history] == [
        "first",
        "promoted" if serving["decision"] == "promote" else "rolled_back",
    ]
    report = pathlib.Path(second["artifacts"]["deployment_report"]).read_text()
    assert "## Canary analysis" in report and "| p95 latency (ms) |" in report


@pytest.mark.slow
def test_ctrl_c_mid_analysis_rolls_back_and_leaves_no_server(tmp_path):
    """A real Ctrl-C while the canary is being analysed: the canary is rolled back, production
    is untouched, and no model server of the run is left."""
    import psutil

    root = tmp_path / "runs"
    params = [f"{k}={v}" for k, v in DEPLOY_PARAMS.items()]
    proc = kfstack_run(root, *params, tmpdir=tmp_path)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    # A long analysis: every holdout record in a request of its own.
    slow = [*params, "sample_fraction=0.2", "canary_records=5000", "canary_batch_size=1"]
    proc = kfstack_run(root, *slow, tmpdir=tmp_path, start_new_session=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "deploy: analysing" in line:
            break
    # The servers are not the runner's children (sessions of their own, owned by the run):
    # look for them by their command line instead.
    servers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if (p.info["cmdline"] or [])[1:3] == ["-m", FORMAT_SERVER]
        and str(root) in " ".join(p.info["cmdline"])
    ]
    assert len(servers) == 2  # stable and canary
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert not [p for p in servers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    first_dir, second_dir = run_dirs(root)
    summary = json.loads((second_dir / "summary.json").read_text())
    assert summary["status"] == "CANCELLED"
    assert summary["stages"]["model-deployment"]["status"] == "CANCELLED"
    registry = root / "registry" / "flights-delay"
    production = json.loads((registry / "production.json").read_text())
    assert production["version"] == first_dir.name
    last = json.loads((registry / "history.jsonl").read_text().splitlines()[-1])
    assert last["event"] == "rolled_back" and "CancelledError" in last["reason"]
