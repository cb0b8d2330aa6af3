"""Benchmark: where an embedded run's time goes, against the same work done by hand.

Each round runs the pipeline with ``kfstack run --local --no-cache`` (A), then replays the work
that run did with the plain tools (B), and the next round does the same again (A B A B: drift in
the machine's load hits both alike). Both write to plain local folders under ``--pipeline-root``.
What B replays is read from A's run directory, never guessed:

- **Spark**: the Spark step's executor input in ``logs/kfp.log`` (its application, arguments,
  ``spark_conf``, driver memory, cores) -> ``spark-submit --master local[*]`` of the same
  application with the same arguments and the same effective ``--conf`` as kfstack's own
  spark-submit (:func:`kfstack.spark.local.local_conf`: the team's ``spark_conf`` over kfstack's
  local settings), writing to a scratch folder. No driver wrapper: a module application is run by
  a two-line runpy main file (:mod:`benchmarks.by_hand.spark_main`), as ``python -m`` would.
- **Tuning trials**: ``state/hyperparameter-tuning/trials.jsonl`` (the embedded tuner's journal:
  each trial's assignments, outcome, reports and seconds) and the tuning step's executor input
  (the run's own hyperparameters, their declared types, the workers) -> each trial run again with
  the same hyperparameters (trial epochs, assignments), as many at once as the tuner ran (its
  ``parallel_trials`` capped to the cores, as :func:`kfstack.tuning.local_tuner.parallel_cap`
  does), an early-stopped (or killed) trial stopped once it printed as many metric lines as
  kfstack's did. PyTorch: ``torchrun --nproc_per_node=W`` of the flights trainer
  (``kfstack_examples.flights.training.pytorch_trainer --features-uri ... --model-uri ...
  --checkpoint-uri ... --epochs ... --batch-size ... --learning-rate ... --seed ...``);
  TensorFlow: W processes of the team's function (:mod:`benchmarks.by_hand.digits_worker`), each
  with the ``TF_CONFIG`` the TFJob operator sets. Each rank gets ``OMP_NUM_THREADS`` = cores / W,
  as kfstack's replicas do, and a trial's ranks get ``KFSTACK_TRIAL``, as kfstack's do (the
  trainers then export no model on either side). (kfstack's local PyTorch job replays a
  TrainJob: one torchrun per node, W agents of one process each, running its entrypoint wrapper;
  by hand one torchrun agent starts the W ranks of the trainer itself.)
- **Final training**: the same, with the hyperparameters recorded on kfstack's model artifact.
- **Evaluation**: the evaluation step's executor input (split, label, task, threshold, predictor)
  -> a plain script (:mod:`benchmarks.by_hand.evaluate`) scoring the same split of B's own Spark
  output with B's own model on onnxruntime (the flights records featurised by the team's
  ``FlightScorer`` in one call) and computing the same metrics with scikit-learn; B's metrics are
  reported beside kfstack's, a check that it is the same work.
- **Deployment**: both run with ``deploy=false``: kfstack's deployment and registration steps still
  run (and say skipped) and count in its wall; nothing by hand. So do its run check and cleanup.

Measures (one benchmark run; absolute walls beside the ratios): kfstack's wall (the command, start
to exit) / by hand's (the replay's steps back to back), per stage too (summary.json's seconds
against the by-hand part, with what the step says its tool took inside it -- spark-submit's
seconds, the trials' summed seconds; kfstack's other steps and its time between steps against
nothing);
for each trial kfstack's seconds (the journal) / by hand's, and the share of the by-hand trial its
epochs take (the trainer's ``seconds_per_epoch=`` lines, flights only: the digits code prints
none); the small flights run's wall as a share of the full run's.

    python -m benchmarks.run_breakdown [--config full|small|digits|all] [--rounds N]
        [--pipeline-root DIR] [--keep]

Configs (each with ``deploy=false``): ``full``: flights-training on all the data, the local
defaults; ``small``: flights-training ``sample_fraction=0.05 epochs=1 tuning_trial_epochs=1
tuning_early_stopping=none``; ``digits``: digits-training. Goals (issue): full <= 1.2, small <= 1.5.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import glob
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from benchmarks.common import machine_facts, run_locally, write_result

BY_HAND = os.path.join(os.path.dirname(os.path.abspath(__file__)), "by_hand")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMON_PARAMS = {"deploy": "false"}
CONFIGS: dict[str, tuple[str, dict[str, str]]] = {
    "full": ("flights-training", {}),
    "small": (
        "flights-training",
        {
            "sample_fraction": "0.05",
            "epochs": "1",
            "tuning_trial_epochs": "1",
            "tuning_early_stopping": "none",
        },
    ),
    "digits": ("digits-training", {}),
}
GOALS = {"full": 1.2, "small": 1.5}
# The embedded run's step names that have a by-hand part.
TUNING, TRAINING, EVALUATION = "hyperparameter-tuning", "distributed-training", "model-evaluation"
STOP_GRACE_SECONDS = 5.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# --- what the kfstack run did ----------------------------------------------------------------


@dataclasses.dataclass
class KfstackRun:
    """One ``kfstack run --local`` and what its run directory says it did."""

    wall_seconds: float
    summary: dict[str, Any]
    run_dir: str
    inputs: dict[str, dict[str, Any]]  # task -> its executor input's parameter values
    outputs: dict[str, dict[str, Any]]  # task -> its executor_output.json
    tuning_spec: dict[str, Any]
    trials: list[dict[str, Any]]  # the journal's finished trials, in start order

    def task(self, key: str) -> str:
        """The task whose executor input has parameter ``key`` (the Spark step's name varies)."""
        for name, values in self.inputs.items():
            if key in values:
                return name
        raise RuntimeError(f"no task of {self.run_dir} has the parameter {key}")


def executor_inputs(kfp_log: str) -> dict[str, dict[str, Any]]:
    """Task -> the parameter values of the executor input kfp.local logged for it."""
    with open(kfp_log, encoding="utf-8", errors="replace") as f:
        text = ANSI.sub("", f.read())
    decoder = json.JSONDecoder()
    found: dict[str, dict[str, Any]] = {}
    marker = "Got executor_input:"
    for match in re.finditer(re.escape(marker), text):
        before = re.findall(r"Executing task '([^']+)'", text[: match.start()])
        if not before:
            continue
        start = match.end()
        while text[start].isspace():
            start += 1
        value, _ = decoder.raw_decode(text, start)
        found[before[-1]] = value.get("inputs", {}).get("parameterValues", {})
    return found


def executor_outputs(run_dir: str) -> dict[str, dict[str, Any]]:
    found = {}
    for path in glob.glob(os.path.join(run_dir, "artifacts", "*", "*", "executor_output.json")):
        with open(path, encoding="utf-8") as f:
            found[os.path.basename(os.path.dirname(path))] = json.load(f)
    return found


def journal(run_dir: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The tuning spec and the finished trials (start order) of the embedded tuner's journal."""
    path = os.path.join(run_dir, "state", TUNING, "trials.jsonl")
    if not os.path.exists(path):
        return {}, []
    with open(path, encoding="utf-8") as f:
        entries = [json.loads(line) for line in f if line.strip()]
    spec: dict[str, Any] = next((e["spec"] for e in entries if e["event"] == "spec"), {})
    order = [e["name"] for e in entries if e["event"] == "started"]
    finished = {e["trial"]["name"]: e["trial"] for e in entries if e["event"] == "finished"}
    return spec, [finished[name] for name in order if name in finished]


def run_kfstack(pipeline: str, params: Mapping[str, str], root: str, log_path: str) -> KfstackRun:
    wall, summary = run_locally(pipeline, params, root, "--no-cache", log_path=log_path)
    run_dir = summary["run_dir"]
    spec, trials = journal(run_dir)
    return KfstackRun(
        wall_seconds=wall,
        summary=summary,
        run_dir=run_dir,
        inputs=executor_inputs(os.path.join(run_dir, "logs", "kfp.log")),
        outputs=executor_outputs(run_dir),
        tuning_spec=spec,
        trials=trials,
    )


# --- the same work by hand -------------------------------------------------------------------


TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def typed(values: Mapping[str, Any], types: Mapping[str, str]) -> dict[str, Any]:
    """``values`` as the code declares them (KFP hands ints over as floats, Katib as strings)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        kind = TYPES.get(types.get(name, ""))
        if kind is int:
            out[name] = int(float(value))
        elif kind is float:
            out[name] = float(value)
        elif kind is bool:
            out[name] = value if isinstance(value, bool) else str(value).lower() == "true"
        else:
            out[name] = value
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(out: str) -> dict[str, str]:
    """A by-hand rank's environment: this process's, unbuffered output, and ``<out>/tmp`` as its
    temp folder (the digits code leaves the non-chief workers' checkpoints in one), removed with
    the round's folders as kfstack's tasks keep theirs in the run directory."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": os.path.join(out, "tmp")}


def threads_per_rank(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def spark_by_hand(run: KfstackRun, out: str) -> tuple[float, str, list[str]]:
    """spark-submit of the Spark step's application as it ran (see the module docstring); returns
    its seconds, the output folder and the command line."""
    from kfstack.components.data.spark_job.stage import spark_conf
    from kfstack.contracts import SparkApplicationCode
    from kfstack.spark.local import LocalSparkJob, local_conf, spark_home

    values = run.inputs[run.task("spark_application")]
    application = values["spark_application"]
    arguments = [str(a) for a in values.get("spark_arguments") or []]
    output = os.path.join(out, "output")
    os.makedirs(out, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="spark-", dir=out)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    home = spark_home()
    locations = {"KFSTACK_OUTPUT_URI": output, "KFSTACK_REPORT_PATH": os.path.join(out, "report.json")}
    if values.get("input_uri"):
        locations["KFSTACK_INPUT_URI"] = values["input_uri"]
    env.update(SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", TMPDIR=scratch, PYTHONUNBUFFERED="1", **locations)
    for name, value in locations.items():  # an argument may name a location ($KFSTACK_OUTPUT_URI)
        arguments = [a.replace(f"${name}", value) for a in arguments]
    job = LocalSparkJob(
        code=SparkApplicationCode(application, tuple(arguments)),
        cores=int(values.get("local_cores") or 0),
        driver_memory=values.get("spark_driver_memory", "2g"),
        spark_conf=spark_conf(values.get("spark_conf") or {}),
    )
    command = [os.path.join(home, "bin", "spark-submit"), "--master", job.master, "--name", application]
    for key, value in local_conf(job, scratch, home).items():
        command += ["--conf", f"{key}={value}"]
    if application.endswith(".py"):
        command += [application, *arguments]
    else:
        command += [os.path.join(BY_HAND, "spark_main.py"), application, *arguments]
    with open(os.path.join(out, "spark-submit.log"), "w", encoding="utf-8") as log:
        started = time.perf_counter()
        code = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO).returncode
        seconds = time.perf_counter() - started
    shutil.rmtree(scratch, ignore_errors=True)
    if code != 0:
        raise SystemExit(f"by hand: spark-submit failed ({code}); see {out}/spark-submit.log")
    return seconds, output, command


@dataclasses.dataclass
class TrainerRun:
    seconds: float
    metric_lines: list[dict[str, float]]
    model_dir: str
    stopped: bool = False
    command: list[str] = dataclasses.field(default_factory=list)

    @property
    def epoch_seconds(self) -> list[float]:
        return [line["seconds_per_epoch"] for line in self.metric_lines if "seconds_per_epoch" in line]


def metric_values(line: str) -> dict[str, float] | None:
    """``epoch=3 val_auc=0.71 ... seconds_per_epoch=1.2`` -> its numbers; None for other lines."""
    text = line.strip()
    if not text.startswith("epoch="):
        return None
    values = {}
    for token in text.split():
        name, _, value = token.partition("=")
        with contextlib.suppress(ValueError):
            values[name] = float(value)
    return values


def stop_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def watch(primary: subprocess.Popen, others: list[subprocess.Popen], log_path: str, stop_after: int | None):
    """Reads the primary process's output to its end (or until it printed ``stop_after`` metric
    lines: then every process is stopped, as kfstack stops an early-stopped trial); returns the
    metric lines and whether it was stopped."""
    lines: list[dict[str, float]] = []
    stopped = False
    assert primary.stdout is not None
    with open(log_path, "w", encoding="utf-8") as log:
        for line in primary.stdout:
            log.write(line)
            values = metric_values(line)
            if values is not None:
                lines.append(values)
                if stop_after is not None and len(lines) >= stop_after:
                    stopped = True
                    break
    if stopped:
        for process in (primary, *others):
            stop_group(process)
    codes = [p.wait() for p in (primary, *others)]
    if not stopped and any(codes):
        raise SystemExit(f"by hand: a trainer process failed ({codes}); see {log_path}")
    return lines, stopped


def torchrun_flights(
    hyperparameters: Mapping[str, Any],
    features: str,
    out: str,
    workers: int,
    stop_after: int | None,
    trial: str = "",
) -> TrainerRun:
    """``torchrun --nproc_per_node=W`` of the flights PyTorch trainer with its own CLI."""
    model, checkpoints = os.path.join(out, "model"), os.path.join(out, "checkpoints")
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    command = [torchrun, f"--nproc_per_node={workers}", "--master_addr=127.0.0.1"]
    command += [f"--master_port={free_port()}", "-m", "kfstack_examples.flights.training.pytorch_trainer"]
    command += ["--features-uri", features, "--model-uri", model, "--checkpoint-uri", checkpoints]
    command += [
        "--epochs",
        str(hyperparameters["epochs"]),
        "--batch-size",
        str(hyperparameters["batch_size"]),
    ]
    command += ["--learning-rate", repr(float(hyperparameters["learning_rate"]))]
    command += ["--seed", str(hyperparameters["seed"])]
    os.makedirs(os.path.join(out, "tmp"), exist_ok=True)
    env = {**rank_env(out), "OMP_NUM_THREADS": str(threads_per_rank(workers)), **trial_env(trial)}
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        cwd=REPO,
    )
    lines, stopped = watch(process, [], os.path.join(out, "torchrun.log"), stop_after)
    return TrainerRun(time.perf_counter() - started, lines, model, stopped, command)


def tf_workers_digits(
    hyperparameters: Mapping[str, Any],
    features: str,
    out: str,
    workers: int,
    stop_after: int | None,
    trial: str = "",
) -> TrainerRun:
    """W plain processes of the team's Keras function, each with the TFJob operator's TF_CONFIG
    (MultiWorkerMirroredStrategy workers); worker 0's output is read."""
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(workers)]
    arguments = [f"--{name}={value}" for name, value in hyperparameters.items()]
    command = [sys.executable, "-m", "benchmarks.by_hand.digits_worker", *arguments]
    os.makedirs(os.path.join(out, "tmp"), exist_ok=True)
    processes = []
    logs = []
    started = time.perf_counter()
    for index in range(workers):
        model = os.path.join(out, f"model-{index}")
        os.makedirs(model, exist_ok=True)
        env = {
            **rank_env(out),
            "OMP_NUM_THREADS": str(threads_per_rank(workers)),
            "KFSTACK_INPUT_URI": features,
            "KFSTACK_MODEL_DIR": model,
            "KFSTACK_CHECKPOINT_URI": os.path.join(out, "checkpoints"),
            **trial_env(trial),
        }
        if workers > 1:
            env["TF_CONFIG"] = json.dumps(
                {
                    "cluster": {"worker": addresses},
                    "task": {"type": "worker", "index": index},
                    "environment": "cloud",
                }
            )
        if index == 0:
            stdout: Any = subprocess.PIPE
        else:
            logs.append(open(os.path.join(out, f"worker-{index}.log"), "w", encoding="utf-8"))  # noqa: SIM115
            stdout = logs[-1]
        processes.append(
            subprocess.Popen(
                command,
                env=env,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
                cwd=REPO,
            )
        )
    try:
        lines, stopped = watch(processes[0], processes[1:], os.path.join(out, "worker-0.log"), stop_after)
    finally:
        for log in logs:
            log.close()
    return TrainerRun(time.perf_counter() - started, lines, os.path.join(out, "model-0"), stopped, command)


def trial_env(trial: str) -> dict[str, str]:
    """A trial's replicas are told they train a trial, as kfstack's are (``KFSTACK_TRIAL``): the
    trainers then skip the model export nothing keeps, on both sides alike."""
    return {"KFSTACK_TRIAL": trial} if trial else {}


def trainer_for(framework: str):
    return torchrun_flights if framework == "pytorch" else tf_workers_digits


def framework_of(values: Mapping[str, Any]) -> str:
    return str(values.get("framework") or (values.get("hyperparameters") or {}).get("framework") or "pytorch")


def trials_by_hand(run: KfstackRun, features: str, out: str) -> tuple[float, list[dict[str, Any]]]:
    """Every trial of the run's journal again, with its hyperparameters, as many at once as the
    embedded tuner ran; returns the phase's seconds and each trial's figures."""
    if not run.trials:
        return 0.0, []
    values = run.inputs[TUNING]
    types = values.get("hyperparameter_types") or {}
    workers = int(float(values.get("workers", 1)))
    framework = framework_of(values)
    base = dict(values.get("hyperparameters") or {})
    searched = set(json.loads(run.tuning_spec.get("search_space") or "{}"))
    if "epochs" in types and "epochs" not in searched:
        base["epochs"] = run.tuning_spec["trial_epochs"]
    # The tuner's parallel_cap: the trials at once that fit the cores, W processes each.
    parallel = max(1, min(int(run.tuning_spec.get("parallel_trials", 1)), (os.cpu_count() or 1) // workers))
    train = trainer_for(framework)

    def one(trial: dict[str, Any]) -> dict[str, Any]:
        hyperparameters = typed({**base, **trial["parameters"]}, types)
        cut = trial["status"] in ("EarlyStopped", "Killed")
        result = train(
            hyperparameters,
            features,
            os.path.join(out, trial["name"]),
            workers,
            len(trial["history"]) if cut else None,
            trial=trial["name"],
        )
        epochs = sum(result.epoch_seconds)
        return {
            "name": trial["name"],
            "status": trial["status"],
            "parameters": trial["parameters"],
            "epochs_reported": len(trial["history"]),
            "kfstack_seconds": trial["seconds"],
            "by_hand_seconds": round(result.seconds, 2),
            "ratio": round(trial["seconds"] / result.seconds, 3),
            "by_hand_epochs_run": len(result.metric_lines),
            "by_hand_epoch_seconds": round(epochs, 3) if result.epoch_seconds else None,
            "epoch_share_of_by_hand_trial": round(epochs / result.seconds, 4)
            if result.epoch_seconds
            else None,
            "kfstack_objective": trial.get("objective"),
            "by_hand_objective": result.metric_lines[-1].get(run.tuning_spec.get("objective", ""))
            if result.metric_lines
            else None,
        }

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
        figures = list(pool.map(one, run.trials))
    return time.perf_counter() - started, figures


def training_by_hand(run: KfstackRun, features: str, out: str) -> TrainerRun:
    """The final training with the hyperparameters recorded on kfstack's model artifact."""
    values = run.inputs[TRAINING]
    model = run.outputs[TRAINING]["artifacts"]["model"]["artifacts"][0]["metadata"]
    hyperparameters = typed(model["hyperparameters"], values.get("hyperparameter_types") or {})
    workers = int(float(values.get("workers", 1)))
    return trainer_for(framework_of(values))(hyperparameters, features, out, workers, None)


def evaluation_by_hand(
    run: KfstackRun, features: str, model_dir: str, out: str
) -> tuple[float, dict, list[str]]:
    """The plain scoring script on the evaluation step's split of the by-hand data and model."""
    values = run.inputs[EVALUATION]
    split = values.get("dataset_split") or ""
    scorer = (
        "flights"
        if str(values.get("custom_predictor", "")).startswith("kfstack_examples.flights")
        else "onnx"
    )
    command = [sys.executable, "-m", "benchmarks.by_hand.evaluate", "--model-dir", model_dir]
    command += ["--dataset", os.path.join(features, split) if split else features]
    command += ["--label", values["label_column"], "--task", values["task"], "--scorer", scorer]
    command += ["--threshold", str(values.get("decision_threshold", 0.5))]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - started
    with open(os.path.join(out, "evaluate.log"), "w", encoding="utf-8") as f:
        f.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"by hand: evaluation failed:\n{proc.stderr[-3000:]}")
    return seconds, json.loads(proc.stdout.strip().splitlines()[-1]), command


def by_hand(run: KfstackRun, out: str) -> dict[str, Any]:
    """The replay of ``run`` (B), its steps back to back; its wall is theirs together."""
    os.makedirs(out, exist_ok=True)
    started = time.perf_counter()
    spark_seconds, features, spark_command = spark_by_hand(run, os.path.join(out, "spark"))
    trials_seconds, trials = trials_by_hand(run, features, os.path.join(out, "trials"))
    final = training_by_hand(run, features, os.path.join(out, "training"))
    eval_seconds, metrics, eval_command = evaluation_by_hand(run, features, final.model_dir, out)
    wall = time.perf_counter() - started
    return {
        "wall_seconds": round(wall, 2),
        "parts": {
            "spark": round(spark_seconds, 2),
            "trials": round(trials_seconds, 2),
            "training": round(final.seconds, 2),
            "evaluation": round(eval_seconds, 2),
        },
        "trials": trials,
        "training_epoch_seconds": round(sum(final.epoch_seconds), 3) if final.epoch_seconds else None,
        "evaluation_metrics": {k: v for k, v in metrics.items() if k != "confusion"},
        # What ran (each trial as the final training, with its own hyperparameters and folders).
        "commands": {"spark": spark_command, "training": final.command, "evaluation": eval_command},
    }


# --- the comparison --------------------------------------------------------------------------


def inner_seconds(run: KfstackRun) -> dict[str, float]:
    """What kfstack's steps say their tool took inside them: the Spark step's spark-submit
    (its ``spark_job`` artifact), the tuning step's trials (the journal's seconds, summed)."""
    inner = {}
    spark = run.task("spark_application")
    with contextlib.suppress(KeyError, IndexError):
        inner[spark] = float(
            run.outputs[spark]["artifacts"]["spark_job"]["artifacts"][0]["metadata"]["seconds"]
        )
    if run.trials:
        inner[TUNING] = round(sum(float(t["seconds"] or 0.0) for t in run.trials), 2)
    return inner


def stage_table(run: KfstackRun, hand: dict[str, Any]) -> list[dict[str, Any]]:
    """kfstack's stages against the by-hand parts; kfstack's other steps and its time outside
    the steps against nothing. ``kfstack_inner_seconds``: see :func:`inner_seconds`."""
    stages = {name: stage["seconds"] for name, stage in run.summary["stages"].items()}
    spark = run.task("spark_application")
    pairs = {spark: "spark", TUNING: "trials", TRAINING: "training", EVALUATION: "evaluation"}
    inner = inner_seconds(run)
    rows = []
    for name, seconds in stages.items():
        part = pairs.get(name)
        theirs = hand["parts"][part] if part else 0.0
        rows.append(
            {
                "stage": name,
                "kfstack_seconds": seconds,
                "kfstack_inner_seconds": inner.get(name),
                "by_hand": part or "-",
                "by_hand_seconds": theirs,
                "ratio": round(seconds / theirs, 3) if theirs else None,
            }
        )
    outside = run.wall_seconds - sum(stages.values())
    rows.append(
        {
            "stage": "(outside the steps: start, kfp.local between steps, summary)",
            "kfstack_seconds": round(outside, 2),
            "kfstack_inner_seconds": None,
            "by_hand": "-",
            "by_hand_seconds": 0.0,
            "ratio": None,
        }
    )
    return rows


def one_round(config: str, root: str, keep: bool, index: int) -> dict[str, Any]:
    pipeline, params = CONFIGS[config]
    params = {**params, **COMMON_PARAMS}
    work = os.path.join(root, f"{config}-{index}")
    os.makedirs(work, exist_ok=True)
    print(f"[{config} round {index}] A: kfstack run --local {pipeline} ...", flush=True)
    run = run_kfstack(pipeline, params, os.path.join(work, "runs"), os.path.join(work, "kfstack.log"))
    print(f"[{config} round {index}] A: {run.wall_seconds:.1f} s; B: by hand ...", flush=True)
    hand = by_hand(run, os.path.join(work, "by-hand"))
    print(f"[{config} round {index}] B: {hand['wall_seconds']:.1f} s", flush=True)
    metrics = run.summary.get("metrics", {})
    result = {
        "kfstack": {
            "command": f"kfstack run --local {pipeline} --no-cache "
            + " ".join(f"--param {k}={v}" for k, v in params.items()),
            "wall_seconds": round(run.wall_seconds, 2),
            "summary_wall_seconds": run.summary["wall_seconds"],
            "stages": {name: stage["seconds"] for name, stage in run.summary["stages"].items()},
            "evaluation_metrics": {
                k.removeprefix("evaluation_metrics."): v
                for k, v in metrics.items()
                if k.startswith("evaluation_metrics.")
            },
            "tuning": {k: run.tuning_spec.get(k) for k in ("max_trials", "parallel_trials", "trial_epochs")}
            | {"early_stopping": run.tuning_spec.get("early_stopping")},
        },
        "by_hand": hand,
        "ratio": round(run.wall_seconds / hand["wall_seconds"], 3),
        "stages": stage_table(run, hand),
    }
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


def summarise(config: str, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["ratio"] for r in rounds]
    trials = [t for r in rounds for t in r["by_hand"]["trials"]]
    shares = [
        t["epoch_share_of_by_hand_trial"] for t in trials if t["epoch_share_of_by_hand_trial"] is not None
    ]
    summary: dict[str, Any] = {
        "pipeline": CONFIGS[config][0],
        "params": {**CONFIGS[config][1], **COMMON_PARAMS},
        "kfstack_wall_seconds": statistics.median(r["kfstack"]["wall_seconds"] for r in rounds),
        "by_hand_wall_seconds": statistics.median(r["by_hand"]["wall_seconds"] for r in rounds),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "trial_ratio": statistics.median(t["ratio"] for t in trials) if trials else None,
        "trial_epoch_share": statistics.median(shares) if shares else None,
        "rounds": rounds,
    }
    if config in GOALS:
        summary["goal_ratio"] = GOALS[config]
        summary["meets_goal"] = summary["ratio"] <= GOALS[config]
    return summary


def markdown(results: dict[str, dict[str, Any]]) -> str:
    out = [
        "| config | kfstack s | by hand s | ratio | goal | trial ratio (median) | epoch share of a trial |"
    ]
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for config, r in results.items():
        goal = f"<= {r['goal_ratio']}" if "goal_ratio" in r else "-"
        trial = f"{r['trial_ratio']:.2f}" if r["trial_ratio"] is not None else "-"
        share = f"{100 * r['trial_epoch_share']:.1f}%" if r["trial_epoch_share"] is not None else "-"
        out.append(
            f"| {config} | {r['kfstack_wall_seconds']:.1f} | {r['by_hand_wall_seconds']:.1f} | "
            f"{r['ratio']:.2f} | {goal} | {trial} | {share} |"
        )
    for config, r in results.items():
        last = r["rounds"][-1]
        out += ["", f"{config} (last round), per stage:", ""]
        out += [
            "| kfstack stage | kfstack s | of which the tool | by hand | by hand s | ratio |",
            "|---|---:|---:|---|---:|---:|",
        ]
        for row in last["stages"]:
            ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "-"
            inner = row["kfstack_inner_seconds"]
            out.append(
                f"| {row['stage']} | {row['kfstack_seconds']:.1f} | "
                f"{'-' if inner is None else f'{inner:.1f}'} | {row['by_hand']} | "
                f"{row['by_hand_seconds']:.1f} | {ratio} |"
            )
        trials = last["by_hand"]["trials"]
        if trials:
            out += [
                "",
                "| trial | status | epochs | kfstack s | by hand s | ratio | epochs s (by hand) | share |",
            ]
            out.append("|---|---|---:|---:|---:|---:|---:|---:|")
            for t in trials:
                epochs = t["by_hand_epoch_seconds"]
                share = t["epoch_share_of_by_hand_trial"]
                out.append(
                    f"| {t['name']} | {t['status']} | {t['by_hand_epochs_run']} | "
                    f"{t['kfstack_seconds']:.1f} | {t['by_hand_seconds']:.1f} | {t['ratio']:.2f} | "
                    f"{'-' if epochs is None else f'{epochs:.2f}'} | "
                    f"{'-' if share is None else f'{100 * share:.1f}%'} |"
                )
        kf, bh = last["kfstack"]["evaluation_metrics"], last["by_hand"]["evaluation_metrics"]
        shown = [k for k in ("auc", "accuracy", "macro_f1", "log_loss") if k in kf and k in bh]
        out.append("")
        out.append(
            "evaluation, kfstack vs by hand: "
            + ", ".join(f"{k} {kf[k]:.4f} vs {bh[k]:.4f}" for k in shown if kf[k] is not None)
        )
    if "small" in results and "full" in results:
        share = results["small"]["kfstack_wall_seconds"] / results["full"]["kfstack_wall_seconds"]
        out += ["", f"small run's wall as a share of the full run's (kfstack): {100 * share:.1f}%"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=(*CONFIGS, "all"), default="all")
    parser.add_argument("--rounds", type=int, default=1, help="A B rounds per config (default 1)")
    parser.add_argument("--pipeline-root", default="", help="scratch root (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the run directories and by-hand outputs")
    args = parser.parse_args(argv)
    configs = list(CONFIGS) if args.config == "all" else [args.config]
    owned = not args.pipeline_root
    root = args.pipeline_root or tempfile.mkdtemp(prefix="kfstack-breakdown-")
    os.makedirs(root, exist_ok=True)
    try:
        rounds: dict[str, list[dict[str, Any]]] = {config: [] for config in configs}
        for index in range(args.rounds):
            for config in configs:
                rounds[config].append(one_round(config, root, args.keep, index))
    finally:
        if owned and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    results = {config: summarise(config, rounds[config]) for config in configs}
    result: dict[str, Any] = {
        "benchmark": "run_breakdown" if args.config == "all" else f"run_breakdown_{args.config}",
        "command": f"python -m benchmarks.run_breakdown --config {args.config} --rounds {args.rounds}",
        "machine": machine_facts(),
        "deployment": "not counted by hand: both sides run with deploy=false (kfstack's deployment and "
        "registration steps still run, skipped, and count in its wall)",
        "configs": results,
    }
    if "small" in results and "full" in results:
        result["small_share_of_full"] = round(
            results["small"]["kfstack_wall_seconds"] / results["full"]["kfstack_wall_seconds"], 3
        )
    path = write_result(result)
    print(markdown(results))
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
