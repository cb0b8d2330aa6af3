"""What every benchmark records beside its figures (the machine, the date, where results go), and
the pieces several benchmarks run: an embedded run as a user starts it, one training layout."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping

import psutil

RESULTS_DIR = os.path.join(os.path.dirname(__file__), "results")


def machine_facts() -> dict:
    return {
        "cpu": platform.processor() or platform.machine(),
        "logical_cores": psutil.cpu_count(logical=True),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
    }


def run_locally(
    pipeline: str, parameters: Mapping[str, str], pipeline_root: str, *flags: str, log_path: str = ""
) -> tuple[float, dict]:
    """``kfstack run --local PIPELINE --pipeline-root ROOT [FLAGS] --param k=v ...`` as a user
    starts it: its wall from outside (start to exit) and its summary. Its output goes to
    ``log_path`` when given.

    Raises:
        SystemExit: The run failed (the message ends with its output's tail).
    """
    command = [sys.executable, "-m", "kfstack.app.cli", "run", "--local", pipeline]
    command += ["--pipeline-root", pipeline_root, *flags]
    for name, value in parameters.items():
        command += ["--param", f"{name}={value}"]
    handle, summary_path = tempfile.mkstemp(prefix="kfstack-summary-", suffix=".json")
    os.close(handle)
    try:
        with open(log_path or os.devnull, "w", encoding="utf-8") as log:
            started = time.perf_counter()
            done = subprocess.run(
                [*command, "--summary-json", summary_path],
                stdout=log if log_path else subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            wall = time.perf_counter() - started
        if done.returncode != 0:
            if log_path:
                with open(log_path, encoding="utf-8", errors="replace") as f:
                    output = f.read()
            else:
                output = done.stdout
            raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{output[-4000:]}")
        with open(summary_path, encoding="utf-8") as f:
            return wall, json.load(f)
    finally:
        os.remove(summary_path)


def write_result(result: dict) -> str:
    """Writes ``result`` to ``benchmarks/results/<benchmark>.json`` (ignored by git)."""
    os.makedirs(RESULTS_DIR, exist_ok=True)
    path = os.path.join(RESULTS_DIR, f"{result['benchmark']}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    return path


def train_layout(
    features_uri: str, out: str, *, framework: str, workers: int, threads: int, epochs: int, batch_size: int
) -> dict:
    """One run of the real trainer through the local launcher, as the scaling benchmarks time it
    (learning rate 0.003, no restarts; model and logs under ``out``): the training step's metrics,
    the trainer's whole-run figures (its report, ``report.<name>``) under their own names."""
    from kfstack_examples.flights.pipelines.steps import train_locally
    from kfstack_examples.flights.training.settings import TrainingSettings

    metrics, _ = train_locally(
        TrainingSettings(
            framework=framework,
            epochs=epochs,
            workers=workers,
            batch_size=batch_size,
            learning_rate=0.003,
            max_restarts=0,
        ),
        features_uri=features_uri,
        model_uri=os.path.join(out, "model"),
        logs_uri=os.path.join(out, "logs"),
        threads_per_worker=threads,
    )
    return {
        **metrics,
        **{k.removeprefix("report."): v for k, v in metrics.items() if k.startswith("report.")},
    }
