"""The local launcher's failure handling: stop the others, keep the log tail, restart the group."""

import signal
import sys
import time

import pytest

from kfstack.components.training.train_pytorch.launcher import launch_pytorch_training
from kfstack.errors import TrainingFailedError
from kfstack.training import checkpoints
from kfstack.training.process_group import ReplicaProcess, run_process_group
from tests.training.conftest import make_feature_dir
from tests.training.test_trainer import katib_metrics

SLEEPER = [sys.executable, "-c", "import time; print('waiting', flush=True); time.sleep(120)"]
FAILER = [sys.executable, "-c", "import sys; print('loading shards'); print('boom: disk full'); sys.exit(3)"]


def test_one_failing_replica_fails_the_group_with_its_log_tail(tmp_path):
    started = time.monotonic()
    with pytest.raises(TrainingFailedError) as err:
        run_process_group(
            lambda attempt: [ReplicaProcess("master-0", SLEEPER, {}), ReplicaProcess("worker-0", FAILER, {})],
            logs_dir=str(tmp_path), max_restarts=0, grace_seconds=5,
        )
    message = str(err.value)
    assert "worker-0 failed (exit code 3) on attempt 1 of 1" in message
    assert "boom: disk full" in message
    # The sleeping master was stopped, not waited for.
    assert time.monotonic() - started < 60
    assert "waiting" in (tmp_path / "attempt-1" / "master-0.log").read_text()


def test_the_group_restarts_until_an_attempt_succeeds(tmp_path):
    def replicas(attempt):
        # Fails on the first two attempts, like a pod that lost its node.
        code = 1 if attempt < 3 else 0
        return [ReplicaProcess("master-0", [sys.executable, "-c", f"raise SystemExit({code})"], {})]

    result = run_process_group(replicas, logs_dir=str(tmp_path), max_restarts=2)
    assert (result.attempts, result.restarts) == (3, 2)
    with pytest.raises(TrainingFailedError, match="attempt 2 of 2"):
        run_process_group(replicas, logs_dir=str(tmp_path / "again"), max_restarts=1)


def test_killed_rank_restarts_the_group_which_resumes_from_the_checkpoint(tmp_path):
    """The fault test: SIGKILL one DDP rank after the first checkpoint; training still finishes."""
    features = make_feature_dir(tmp_path / "features", rows=16000, shards=2, seed=1)
    logs = tmp_path / "logs"
    killed = []

    def kill_worker_after_first_checkpoint(attempt, processes):
        if attempt != 1:
            return
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and processes[1].poll() is None:
            if checkpoints.list_checkpoints(str(logs / "checkpoints")):
                processes[1].send_signal(signal.SIGKILL)
                killed.append(True)
                return
            time.sleep(0.02)

    metrics = launch_pytorch_training(
        platform="local", features_uri=features, model_uri=str(tmp_path / "model"),
        logs_uri=str(logs), epochs=5, workers=2, batch_size=32, learning_rate=0.01,
        max_restarts=2, threads_per_worker=1, on_group_started=kill_worker_after_first_checkpoint,
    )
    assert killed, "the worker finished before it could be killed"
    assert metrics["restarts"] == 1
    master_after = (logs / "attempt-2" / "master-0.log").read_text()
    assert "resumed from checkpoint of epoch" in master_after
    epochs_after = [m["epoch"] for m in katib_metrics(master_after)]
    assert epochs_after and epochs_after[0] > 1 and epochs_after[-1] == 5
    assert metrics["val_auc"] > 0.75
