"""The local launcher's failure handling: stop the others, keep the log tail, restart the group."""

import io
import os
import pathlib
import signal
import sys
import threading
import time

import psutil
import pytest

from kfstack.errors import CancelledError, TrainingFailedError
from kfstack.training.process_group import TRACK_SECONDS, ReplicaProcess, run_process_group
from kfstack_examples.flights.pipelines.steps import train_locally
from kfstack_examples.flights.training.settings import TrainingSettings
from tests.frameworks import needs_torch
from tests.training.conftest import katib_metrics, kill_after_first_checkpoint, make_feature_dir

SLEEPER = [sys.executable, "-c", "import time; print('waiting', flush=True); time.sleep(120)"]
FAILER = [sys.executable, "-c", "import sys; print('loading shards'); print('boom: disk full'); sys.exit(3)"]
SHOW_THREADS = [sys.executable, "-c", "import os; print('threads', os.environ['OMP_NUM_THREADS'])"]


def test_one_failing_replica_fails_the_group_with_its_log_tail(tmp_path):
    started_processes = []
    out = io.StringIO()
    started = time.monotonic()
    with pytest.raises(TrainingFailedError) as err:
        run_process_group(
            lambda attempt: [
                ReplicaProcess(0, SLEEPER, {}, "master-0"),
                ReplicaProcess(1, FAILER, {}, "worker-0"),
            ],
            logs_dir=str(tmp_path),
            max_restarts=0,
            grace_seconds=5,
            out=out,
            on_group_started=lambda attempt, processes: started_processes.extend(processes),
        )
    message = str(err.value)
    assert "rank 1 (worker-0) failed (exit code 3) on attempt 1 of 1" in message
    assert "boom: disk full" in message
    # The sleeping master was stopped (SIGTERM), not waited for.
    assert started_processes[0].returncode == -signal.SIGTERM
    assert time.monotonic() - started < 60
    assert "waiting" in (tmp_path / "attempt-1" / "rank-0.log").read_text()
    assert "[rank 1] boom: disk full" in out.getvalue()


def test_the_group_restarts_until_an_attempt_succeeds(tmp_path):
    def replicas(attempt):
        # Fails on the first two attempts, like a pod that lost its node.
        code = 1 if attempt < 3 else 0
        return [ReplicaProcess(0, [sys.executable, "-c", f"raise SystemExit({code})"], {})]

    result = run_process_group(replicas, logs_dir=str(tmp_path), max_restarts=2)
    assert (result.attempts, result.restarts) == (3, 2)
    assert sorted(result.attempt_logs) == [1, 2, 3]
    assert result.logs == {0: str(tmp_path / "attempt-3" / "rank-0.log")}
    with pytest.raises(TrainingFailedError, match="attempt 2 of 2"):
        run_process_group(replicas, logs_dir=str(tmp_path / "again"), max_restarts=1)


def test_each_replica_gets_its_share_of_the_cores(tmp_path):
    replicas = lambda attempt: [ReplicaProcess(r, SHOW_THREADS, {}) for r in range(2)]  # noqa: E731
    result = run_process_group(replicas, logs_dir=str(tmp_path / "default"), max_restarts=0)
    expected = max(1, (os.cpu_count() or 1) // 2)
    for path in result.logs.values():
        assert pathlib.Path(path).read_text().strip() == f"threads {expected}"
    result = run_process_group(
        replicas, logs_dir=str(tmp_path / "given"), max_restarts=0, threads_per_process=3
    )
    assert pathlib.Path(result.logs[1]).read_text().strip() == "threads 3"


# A replica that starts a process of its own in a session of its own (as torchrun starts its
# worker), writes the child's pid to a file, and waits.
PARENT_OF_DETACHED = [
    sys.executable,
    "-c",
    "import subprocess, sys, time\n"
    "sleeper = [sys.executable, '-c', 'import time; time.sleep(600)']\n"
    "child = subprocess.Popen(sleeper, start_new_session=True)\n"
    "open(sys.argv[1], 'w').write(str(child.pid))\n"
    "time.sleep(600)\n",
]


@pytest.mark.slow
def test_a_killed_replicas_own_processes_are_stopped_too(tmp_path):
    """A TrainJob node is torchrun, whose worker runs in its own session: SIGKILL the node's
    torchrun (a lost pod) and its worker must not outlive the group."""
    pid_file = tmp_path / "child.pid"

    def kill_parent(attempt, processes):
        def later():  # while the launcher polls, as a pod is lost mid-run
            deadline = time.monotonic() + 60
            while (not pid_file.exists() or not pid_file.read_text()) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(3 * TRACK_SECONDS)  # the launcher has looked the child up meanwhile
            processes[0].kill()

        threading.Thread(target=later, daemon=True).start()

    with pytest.raises(TrainingFailedError, match="killed by SIGKILL"):
        run_process_group(
            lambda attempt: [ReplicaProcess(0, [*PARENT_OF_DETACHED, str(pid_file)], {}, "node-0")],
            logs_dir=str(tmp_path / "logs"),
            max_restarts=0,
            on_group_started=kill_parent,
            grace_seconds=5,
        )
    child = int(pid_file.read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_sigterm_to_the_launcher_stops_every_replica(tmp_path):
    started_processes = []

    def cancel(attempt, processes):
        started_processes.extend(processes)
        os.kill(os.getpid(), signal.SIGTERM)  # what a cancelled KFP task gets
        time.sleep(5)  # the handler raises before this ends

    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(CancelledError):
        run_process_group(
            lambda attempt: [ReplicaProcess(0, SLEEPER, {})],
            logs_dir=str(tmp_path),
            max_restarts=3,
            on_group_started=cancel,
            grace_seconds=5,
        )
    assert started_processes[0].poll() is not None
    assert signal.getsignal(signal.SIGTERM) is previous
    assert not (tmp_path / "attempt-2").exists()  # a cancel is not a failure to retry


@pytest.mark.parametrize(
    ("training_api", "role"),
    [("v1", "worker-0"), pytest.param("trainer-v2", "node-1", marks=pytest.mark.slow)],
)
@needs_torch  # the flights PyTorch trainer
def test_a_rank_that_cannot_read_its_shard_fails_the_ddp_group(tmp_path, training_api, role):
    """A real trainer failure: rank 1's shard is corrupt; rank 0 waits in a collective. Under
    either contract: the PyTorchJob's processes, or the TrainJob's torchrun nodes."""
    features = make_feature_dir(tmp_path / "features", rows=2000, shards=2, seed=2)
    (tmp_path / "features" / "train" / "part-00001.parquet").write_bytes(b"not parquet at all")
    started_processes = []
    with pytest.raises(TrainingFailedError) as err:
        train_locally(
            TrainingSettings(epochs=1, workers=2, batch_size=64, learning_rate=0.01, max_restarts=0),
            features_uri=features,
            model_uri=str(tmp_path / "model"),
            logs_uri=str(tmp_path / "logs"),
            threads_per_worker=1,
            on_group_started=lambda attempt, processes: started_processes.extend(processes),
            training_api=training_api,
        )
    message = str(err.value)
    assert message.startswith(f"rank 1 ({role}) failed (exit code 1) on attempt 1 of 1")
    assert "part-00001.parquet is not a readable Parquet shard" in message  # from its log
    assert started_processes[0].returncode != 0  # rank 0 did not outlive the group
    assert not (tmp_path / "model" / "model.onnx").exists()


@pytest.mark.slow
def test_killed_rank_restarts_the_group_which_resumes_from_the_checkpoint(tmp_path):
    """The fault test: SIGKILL one DDP rank after the first checkpoint; training still finishes."""
    features = make_feature_dir(tmp_path / "features", rows=16000, shards=2, seed=1)
    logs = tmp_path / "logs"
    kill_worker, killed = kill_after_first_checkpoint(logs / "checkpoints")

    metrics, _ = train_locally(
        TrainingSettings(epochs=5, workers=2, batch_size=32, learning_rate=0.01, max_restarts=2),
        features_uri=features,
        model_uri=str(tmp_path / "model"),
        logs_uri=str(logs),
        threads_per_worker=1,
        on_group_started=kill_worker,
    )
    assert killed, "the worker finished before it could be killed"
    assert metrics["restarts"] == 1
    master_after = (logs / "attempt-2" / "rank-0.log").read_text()
    assert "resumed from checkpoint of epoch" in master_after
    epochs_after = [m["epoch"] for m in katib_metrics(master_after)]
    assert epochs_after and epochs_after[0] > 1 and epochs_after[-1] == 5
    assert metrics["val_auc"] > 0.75
    # The run's figures span both attempts (the checkpoint carries the first one's seconds):
    # an epoch is 8000 rows per rank in batches of 16, on 2 ranks.
    assert metrics["report.seconds_per_epoch"] * metrics["report.samples_per_second"] == pytest.approx(16000)
