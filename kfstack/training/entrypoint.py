"""Runs a team's training code in a replica, under the contract of :mod:`kfstack.contracts`.

Every replica of the generic training step -- a PyTorchJob, TFJob or TrainJob pod on a cluster,
a local process on the embedded platform -- runs ``python -m kfstack.training.entrypoint
--name=value ...`` (under torchrun for a TrainJob). This wrapper:

1. reads what the step declared (:class:`~kfstack.contracts.TrainingCode`, in
   :data:`CODE_ENV` as JSON: an env var, because Katib joins a trial's arguments unquoted into a
   shell command) and checks the ``--name=value`` arguments against it;
2. gives the code a local model directory of its own (:data:`~kfstack.contracts.MODEL_DIR_ENV`;
   every replica gets one, as TensorFlow's non-chief workers must save somewhere too) and a
   local report file (:data:`~kfstack.contracts.REPORT_PATH_ENV`);
3. runs the module as ``__main__`` with the arguments on its argv, or calls the function with
   them as keyword arguments of their declared types -- or, when the function's first parameter
   is named ``argv`` (:func:`takes_argv`), with them as its argv -- with the code's own fixed
   arguments (``TrainingCode.arguments``) after them, their ``$KFSTACK_...`` locations replaced
   here: ``$KFSTACK_INPUT_DIR`` is the input on this replica's disk (the dataset copied here first
   when it lives in an object store; its own folder when it is a local path). Options on the
   code's argv are spelled as the declaration's ``option_style`` says, whichever spelling this
   wrapper's own argv used;
4. watches what the code prints (stdout and stderr, as Katib's StdOut collector reads both) for
   the declared metrics' ``name=value`` lines, and on the chief tracks each in MLflow where the
   environment names a tracking server (:mod:`kfstack.tracking.replica`; in a tuning trial,
   into the trial's own run, which it makes before the code starts);
5. on the chief replica only (rank 0; TF's chief, or worker 0 without one), once the code
   returned: copies the model directory to :data:`MODEL_URI_ENV` and writes the step's result
   (:data:`RESULT_FILE`: the last value of each metric, the report, the seconds the code ran,
   and what the model directory lacks for its declared format) to :data:`RESULT_URI_ENV`.

The step reads that result on either platform and judges it (a model directory left empty fails
the step, naming the directory), so a broken contract is reported once, not retried as a crash.
"""

from __future__ import annotations

import importlib
import inspect
import io
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import fsspec

from kfstack import contracts
from kfstack.errors import InvalidParameterError
from kfstack.team_code import run_as_main
from kfstack.tracking.client import join_run
from kfstack.tracking.replica import ReplicaTracking
from kfstack.tuning.metric_lines import MetricReport, parse_line
from kfstack.uris import join

logger = logging.getLogger(__name__)

# Set by the training step for this wrapper only (not a team-facing contract).
CODE_ENV = "KFSTACK_TRAINING_CODE"
MODEL_FORMAT_ENV = "KFSTACK_MODEL_FORMAT"
MODEL_URI_ENV = "KFSTACK_MODEL_URI"
RESULT_URI_ENV = "KFSTACK_RESULT_URI"
RESULT_FILE = "training_result.json"
MODULE = __name__


def step_env(
    code: contracts.TrainingCode, model_format: str, model_uri: str, result_uri: str
) -> dict[str, str]:
    """The variables the training step sets for this wrapper."""
    declared = {
        "entry": code.entry,
        "hyperparameters": dict(code.hyperparameters),
        "metrics": list(code.metrics),
        # Only where the code has its own, or spells its options otherwise: a job without
        # them is written as it always was.
        **({"arguments": dict(code.arguments)} if code.arguments else {}),
        **({"option_style": code.option_style} if code.option_style != contracts.UNDERSCORES else {}),
    }
    return {
        CODE_ENV: json.dumps(declared, separators=(",", ":")),
        MODEL_FORMAT_ENV: model_format,
        MODEL_URI_ENV: model_uri,
        RESULT_URI_ENV: result_uri,
    }


def declared_code(env: Mapping[str, str]) -> contracts.TrainingCode:
    """The :class:`~kfstack.contracts.TrainingCode` the step declared.

    Raises:
        InvalidParameterError: The variable is missing or not what :func:`step_env` writes.
    """
    raw = env.get(CODE_ENV)
    if not raw:
        raise InvalidParameterError(f"{CODE_ENV} is not set: this wrapper runs inside a training step")
    try:
        declared = json.loads(raw)
        return contracts.TrainingCode(
            entry=declared["entry"],
            hyperparameters=declared.get("hyperparameters", {}),
            metrics=tuple(declared.get("metrics", ())),
            arguments=declared.get("arguments", {}),
            option_style=declared.get("option_style", contracts.UNDERSCORES),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise InvalidParameterError(f"{CODE_ENV} is not a training code declaration: {err}") from err


def is_chief(env: Mapping[str, str]) -> bool:
    """Whether this replica writes the model and the result: rank 0 of a PyTorch job (torchrun
    sets ``RANK`` per process), the chief of a TF parameter-server job, worker 0 of a TF job
    without one; a single process otherwise."""
    tf_config = env.get("TF_CONFIG")
    if tf_config:
        config = json.loads(tf_config)
        task = config.get("task", {})
        cluster = config.get("cluster", {})
        if "chief" in cluster or "master" in cluster:
            return task.get("type") in ("chief", "master")
        return task.get("type") == "worker" and int(task.get("index", 0)) == 0
    return int(env.get("RANK", "0")) == 0


class MetricWatcher(io.TextIOBase):
    """A text stream that passes everything on to ``target`` and keeps the last value of each
    declared metric printed on a whole line (Katib's StdOut collector reads lines); ``on_line``
    hears each such line with its values (the run's tracking)."""

    def __init__(
        self,
        target: TextIO,
        metrics: Sequence[str],
        last: dict[str, float],
        on_line: Callable[[str, list[MetricReport]], None] | None = None,
    ) -> None:
        self._target = target
        self._metrics = tuple(metrics)
        self._last = last
        self._on_line = on_line
        self._partial = ""

    def write(self, text: str) -> int:
        self._target.write(text)
        if self._metrics:
            lines = (self._partial + text).split("\n")
            self._partial = lines.pop()
            for line in lines:
                reports = parse_line(line, self._metrics)
                for report in reports:
                    self._last[report.name] = report.value
                if reports and self._on_line is not None:
                    self._on_line(line, reports)
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def finish(self) -> None:
        """Reads a last line the code left without a newline."""
        if self._partial:
            self.write("\n")

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", "utf-8")

    def fileno(self) -> int:
        return self._target.fileno()

    def isatty(self) -> bool:
        return False


# The first parameter that marks a function taking its hyperparameters as a command line.
ARGV_PARAMETER = "argv"


def takes_argv(function: Callable[..., Any]) -> bool:
    """Whether ``function`` takes its hyperparameters as argv: its first parameter is named
    ``argv`` and can be given by position (``def main(argv=None, *, data_dir, model_dir)``, the
    usual shape of a trainer written around argparse). Read from the function's own signature
    in the replica, so the declaration need not say it; a callable without a signature Python
    can read is called with keyword arguments."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    return (
        bool(parameters)
        and parameters[0].name == ARGV_PARAMETER
        and parameters[0].kind
        in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
    )


def _call(
    code: contracts.TrainingCode,
    function: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    how: str,
) -> None:
    """Calls ``function(*args, **kwargs)`` once its signature accepts them.

    Raises:
        InvalidParameterError: The signature refuses them (a keyword-only location that no code
            argument names, a code argument the function does not take), naming how it was called.
    """
    try:
        inspect.signature(function).bind(*args, **kwargs)
    except TypeError as err:
        raise InvalidParameterError(
            f"training code {code.entry}: {how}, which its signature refuses: {err} (the "
            f"hyperparameters are declared by hyperparameter_types, its other arguments by "
            f"code_arguments)"
        ) from err
    except ValueError:
        pass  # no signature Python can read: the call itself says what is wrong
    function(*args, **kwargs)


def run_code(code: contracts.TrainingCode, argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    """Runs the module as ``__main__`` with the hyperparameters on its argv, or calls the function
    with the typed values as keyword arguments (or, when it :func:`takes_argv`, with them on its
    argv); either way with the code's own arguments after them, located as ``env`` (default:
    this process's) says. Options are spelled as the declaration's ``option_style`` says.

    Raises:
        InvalidParameterError: An argument is undeclared or mistyped, or the function's
            signature refuses what it would be called with (before the code runs).
        SystemExit: The module exited nonzero.
    """
    values = code.parse_argv(argv)
    own = code.located(os.environ if env is None else env)
    # Written again from the values, so the code gets its own spelling whichever one came in.
    options = code.argv(values)
    if not code.function:
        run_as_main(code.module, [*options, *code.arguments_argv(own)])
        return
    function: Callable[..., Any] = getattr(importlib.import_module(code.module), code.function)
    if takes_argv(function):
        keywords = ", ".join(f"{name}=..." for name in own)
        how = f"called as {code.function}([{' '.join(options)}]{', ' if own else ''}{keywords})"
        _call(code, function, [options], own, how)
    else:
        how = f"called with keyword arguments {', '.join([*values, *own]) or 'none'}"
        _call(code, function, [], {**values, **own}, how)


def stage_input(input_uri: str, scratch: str) -> str:
    """The input as a folder on this disk: a local path (or ``file://``) as it is, anything else
    (an object store's) copied under ``scratch`` first; empty when no input was given."""
    if not input_uri:
        return ""
    fs, path = fsspec.core.url_to_fs(input_uri)
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if "file" in protocols:
        return str(path)
    local = os.path.join(scratch, "input")
    fs.get(path.rstrip("/") + "/", local + "/", recursive=True)
    return local


def _copy_dir(local_dir: str, uri: str) -> None:
    """Every file under ``local_dir`` to the same relative path under ``uri``."""
    fs, root = fsspec.core.url_to_fs(uri)
    for base, _, names in os.walk(local_dir):
        for name in names:
            source = os.path.join(base, name)
            target = join(root, os.path.relpath(source, local_dir))
            fs.makedirs(os.path.dirname(target), exist_ok=True)
            fs.put_file(source, target)


def _write_json(uri: str, document: Mapping[str, Any]) -> None:
    fs, path = fsspec.core.url_to_fs(uri)
    fs.makedirs(os.path.dirname(path), exist_ok=True)
    with fs.open(path, "w") as f:
        json.dump(document, f, indent=2)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> None:
    """The replica's whole run; see the module docstring."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # The task's MLflow run, where the embedded run was still making it when the task started.
    env = join_run(os.environ if env is None else env)
    argv = list(sys.argv[1:] if argv is None else argv)
    code = declared_code(env)
    model_format = contracts.check_model_format(env.get(MODEL_FORMAT_ENV, contracts.CUSTOM))
    chief = is_chief(env)
    last: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kfstack-replica-") as scratch:
        model_dir = os.path.join(scratch, "model")
        report_path = os.path.join(scratch, "report.json")
        os.makedirs(model_dir)
        os.environ[contracts.MODEL_DIR_ENV] = model_dir
        os.environ[contracts.REPORT_PATH_ENV] = report_path
        located = {**env, contracts.MODEL_DIR_ENV: model_dir, contracts.REPORT_PATH_ENV: report_path}
        if code.names_input_dir():
            located[contracts.INPUT_DIR_ENV] = stage_input(env.get(contracts.INPUT_URI_ENV, ""), scratch)
        # The chief tracks the metric lines (in a trial, into the trial's run it makes first).
        tracked = ReplicaTracking.for_chief(env, contracts.tuning_trial(env), argv) if chief else None
        on_line = tracked.line if tracked is not None else None
        stdout, stderr = (
            MetricWatcher(sys.stdout, code.metrics, last, on_line),
            MetricWatcher(sys.stderr, code.metrics, last, on_line),
        )
        started = time.monotonic()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = stdout, stderr
        succeeded = False
        try:
            run_code(code, argv, located)
            succeeded = True
        finally:
            stdout.finish()
            stderr.finish()
            sys.stdout, sys.stderr = saved
            if tracked is not None:
                tracked.finish(succeeded)
        seconds = time.monotonic() - started
        if not chief:
            return
        # A broken contract is recorded for the step to report, not raised: raising here would
        # fail the replica and have the operator (or the local group) retry the whole job.
        try:
            report, report_problem = contracts.read_report(report_path, f"training code {code.entry}"), None
        except contracts.ContractError as err:
            report, report_problem = {}, str(err)
        result = {
            "metrics": last,
            "report": report,
            "report_problem": report_problem,
            "training_seconds": seconds,
            "model_problem": contracts.model_dir_problem(
                model_dir, model_format, trial=bool(contracts.tuning_trial(env))
            ),
            # The processes that trained, as torch saw them (an elastic job may run on fewer
            # than it asked for); absent for TensorFlow, whose job is its replica layout.
            "world_size": int(env["WORLD_SIZE"]) if env.get("WORLD_SIZE") else None,
        }
        if env.get(MODEL_URI_ENV):
            _copy_dir(model_dir, env[MODEL_URI_ENV])
        if env.get(RESULT_URI_ENV):
            _write_json(env[RESULT_URI_ENV], result)
        logger.info("training code %s returned after %.1f s; metrics %s", code.entry, seconds, last)


if __name__ == "__main__":
    main()
