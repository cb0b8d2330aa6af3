"""The embedded platform's Spark job: ``spark-submit --master local[N]`` of the driver wrapper.

A team's application runs here exactly as a SparkApplication's driver runs it on a cluster:
``spark-submit`` (the one pyspark ships) starts a driver JVM, which starts
:mod:`kfstack.spark.driver` in a Python child, which runs the team's file or module. Nothing
runs in this process but the watch: the application cannot leave a session, a log level or a
module behind in the step, and a crash of the JVM is a failed step, not a dead one.

Process handling, as a pod's processes end with the pod:

- the JVM and its Python child form one process group of their own (``start_new_session``), so
  a cancelled step (SIGTERM, :func:`kfstack.cancellation.sigterm_raises`) stops both: SIGTERM
  to the group, SIGKILL after a grace period. Whatever the group left running when the JVM
  exited is stopped too;
- their output is streamed to this process's stdout (the task's log) and its last lines kept:
  a non-zero exit raises :class:`~kfstack.errors.RunFailedError` with the exit status and those
  lines;
- Spark's scratch files (``spark.local.dir``, the JVM's and Python's temp files) go to a folder
  of this run's own, removed whatever the outcome.

The settings (:func:`local_conf`) are those kfstack's own local Spark sessions were tuned with
on a small machine (loopback only, no UI, adaptive execution off, UTC sessions, the throughput
collector, the class-data archive when one was recorded); a team's ``spark_conf`` comes after
them and wins, but for Java options, which are kfstack's followed by the team's.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from kfstack import progress
from kfstack.cancellation import sigterm_raises
from kfstack.contracts import SparkApplicationCode
from kfstack.errors import PlatformNotAvailableError, RunFailedError
from kfstack.spark import class_archive, driver
from kfstack.team_code import local_path

logger = logging.getLogger(__name__)

# The wrapper spark-submit runs as its main file (a file of the installed package).
DRIVER_FILE = os.path.abspath(driver.__file__)
LOG_TAIL_LINES = 40
# SIGTERM to SIGKILL when a cancelled job is stopped: time for the JVM's shutdown hooks (stop
# the SparkContext, delete its folders), shorter than the embedded runner's grace for a task.
STOP_GRACE_SECONDS = 5.0
# Variables of a running pyspark gateway: a child that inherited them would attach to another
# process's JVM instead of the one spark-submit starts.
_GATEWAY_ENV = ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "_PYSPARK_DRIVER_CONN_INFO_PATH")
# The driver JVM is the only one, and its threads compete with the tasks for the few cores of
# one machine: the throughput collector rather than G1's concurrent threads, and the JIT waits
# for twice the calls before it compiles a method (BENCHMARKS.md: kfstack's own local sessions).
_LOCAL_JAVA_OPTIONS = "-XX:+UseParallelGC -XX:CompileThresholdScaling=2"
JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


@dataclasses.dataclass(frozen=True)
class LocalSparkJob:
    """One local run of a team's application.

    Attributes:
        code: The application (a ``.py`` file on this machine or a module) and its arguments.
        env: Variables the driver and its tasks get besides this process's own (the location
            contract, the report's upload path).
        cores: ``local[N]``; 0: ``local[*]``, every core.
        driver_memory: The JVM's heap, Spark notation (``2g``): locally the driver runs the
            tasks too.
        spark_conf: The team's Spark settings; they override kfstack's.
    """

    code: SparkApplicationCode
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cores: int = 0
    driver_memory: str = "2g"
    spark_conf: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def master(self) -> str:
        return f"local[{self.cores}]" if self.cores > 0 else "local[*]"

    @property
    def app_name(self) -> str:
        """What Spark calls the application (its log lines, a history server) unless the code
        names it: the file's or module's name, not the wrapper's."""
        if self.code.is_file:
            return os.path.splitext(os.path.basename(local_path(self.code.application)))[0]
        return self.code.application


def spark_home() -> str:
    """The Spark installation of the installed pyspark package (its ``bin/spark-submit`` and
    jars), found without importing pyspark.

    Raises:
        PlatformNotAvailableError: pyspark is not installed here.
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise PlatformNotAvailableError(
            "platform=local runs Spark jobs with the installed pyspark, and there is none: "
            "install kfstack[spark]"
        )
    return str(spec.submodule_search_locations[0])


def local_conf(job: LocalSparkJob, scratch_dir: str, home: str) -> dict[str, str]:
    """kfstack's Spark settings of a local run, then the team's (which win; Java options are
    kfstack's followed by the team's)."""
    cores = job.cores if job.cores > 0 else os.cpu_count() or 1
    archive = class_archive.java_options(home)
    conf = {
        "spark.driver.memory": job.driver_memory,
        # Loopback only: a step needs no listener reachable from elsewhere.
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Spark's INFO lines would bury the application's own output and traceback in the log
        # tail a failure shows.
        "spark.log.level": "WARN",
        # Adaptive execution splits every query into a job per stage: on one machine that is
        # scheduling cost, with no skew worth adapting to. Without it nothing coalesces Spark's
        # 200 shuffle partitions either, so a shuffle gets two per core.
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.shuffle.partitions": str(2 * cores),
        "spark.sql.session.timeZone": "UTC",
        "spark.local.dir": scratch_dir,
        "spark.driver.extraJavaOptions": " ".join(
            part for part in (f"-Djava.io.tmpdir={scratch_dir}", _LOCAL_JAVA_OPTIONS, archive) if part
        ),
        # The venv's interpreter for the driver and the Python workers: spark-submit would
        # otherwise look for ``python3`` on the PATH, which need not have pyspark or kfstack.
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    merged = {**conf, **job.spark_conf}
    for key in JAVA_OPTION_KEYS:
        if key in conf and key in job.spark_conf:
            # Java options add up: the team's come after kfstack's (and win a repeated flag).
            merged[key] = f"{conf[key]} {job.spark_conf[key]}"
    return merged


def submit_command(job: LocalSparkJob, scratch_dir: str, home: str) -> list[str]:
    """``spark-submit --master local[N] --conf k=v ... driver.py <application> [args...]``."""
    command = [os.path.join(home, "bin", "spark-submit"), "--master", job.master, "--name", job.app_name]
    for key, value in local_conf(job, scratch_dir, home).items():
        command += ["--conf", f"{key}={value}"]
    return [*command, DRIVER_FILE, job.code.application, *job.code.arguments]


def submit_env(
    job: LocalSparkJob, scratch_dir: str, home: str, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The process group's environment: ``base`` (this process's), Spark's home, the run's
    scratch folder as every temp folder, unbuffered Python output, and the job's variables
    (``SPARK_LOCAL_IP`` is loopback unless ``base`` sets it)."""
    inherited = os.environ if base is None else base
    env = {key: value for key, value in inherited.items() if key not in _GATEWAY_ENV}
    return {
        # Spark's own guess of the machine's address: loopback, as the driver binds there.
        "SPARK_LOCAL_IP": "127.0.0.1",
        **env,
        "SPARK_HOME": home,
        "TMPDIR": scratch_dir,
        "PYTHONUNBUFFERED": "1",
        **job.env,
    }


@dataclasses.dataclass(frozen=True)
class LocalRunResult:
    """How a local run went: its command line and wall time, and its output's last lines."""

    command: list[str]
    seconds: float
    tail: list[str]


def _pump(stream: TextIO, out: TextIO, tail: collections.deque) -> None:
    for line in stream:
        out.write(line if line.endswith("\n") else line + "\n")
        out.flush()
        tail.append(line.rstrip("\n"))


def _describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def stop_group(process: subprocess.Popen, grace_seconds: float) -> None:
    """Ends the process group ``process`` leads: SIGTERM, SIGKILL after ``grace_seconds``; then
    SIGKILL to whatever of the group outlived its leader."""
    pgid = process.pid  # a session leader's group id is its pid
    if process.poll() is None:
        _signal_group(pgid, signal.SIGTERM)
        try:
            process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            logger.warning("spark-submit (pid %d) outlived SIGTERM by %.0fs: killing it", pgid, grace_seconds)
    _signal_group(pgid, signal.SIGKILL)
    process.wait()


def run_local_job(
    job: LocalSparkJob,
    *,
    out: TextIO | None = None,
    grace_seconds: float = STOP_GRACE_SECONDS,
    on_started: Callable[[subprocess.Popen], None] | None = None,
) -> LocalRunResult:
    """Runs ``job`` with spark-submit and waits for it (see the module docstring).

    Args:
        job: What to run.
        out: Where the job's output goes (default: this process's stdout).
        grace_seconds: SIGTERM to SIGKILL when the job is stopped.
        on_started: Called with the spark-submit process once it started (tests use it).

    Returns:
        The command line, the wall time and the last lines of output.

    Raises:
        PlatformNotAvailableError: No pyspark installed here.
        RunFailedError: spark-submit exited non-zero: the application failed (its status and
            traceback are in the lines the message carries) or Spark could not start.
        CancelledError: This process got SIGTERM; the job's processes were stopped first.
    """
    out = out or sys.stdout
    home = spark_home()
    scratch_dir = tempfile.mkdtemp(prefix="kfstack-spark-")
    tail: collections.deque = collections.deque(maxlen=LOG_TAIL_LINES)
    command = submit_command(job, scratch_dir, home)
    started = time.monotonic()
    process: subprocess.Popen | None = None
    reader: threading.Thread | None = None
    progress.report(f"spark: {job.app_name}")
    try:
        with sigterm_raises():
            try:
                process = subprocess.Popen(
                    command,
                    env=submit_env(job, scratch_dir, home),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    bufsize=1,
                    start_new_session=True,
                )
                logger.info(
                    "spark-submit %s on %s: pid %d, its own process group",
                    job.app_name,
                    job.master,
                    process.pid,
                )
                assert process.stdout is not None  # started with stdout=PIPE
                reader = threading.Thread(target=_pump, args=(process.stdout, out, tail), daemon=True)
                reader.start()
                if on_started is not None:
                    on_started(process)
                code = process.wait()
            finally:
                # Also on SIGTERM or Ctrl-C of this step: never orphan the JVM or its Python child.
                if process is not None:
                    stop_group(process, grace_seconds)
                if reader is not None:
                    reader.join(timeout=5)
    finally:
        shutil.rmtree(scratch_dir, ignore_errors=True)
    seconds = time.monotonic() - started
    if code != 0:
        lines = "\n".join(tail)
        reasons = [line.split(driver.FAILURE_LINE, 1)[1] for line in tail if driver.FAILURE_LINE in line]
        reason = f": {reasons[-1]}" if reasons else ""
        raise RunFailedError(
            f"spark application {job.code.application} failed{reason} ({_describe_exit(code)}) after "
            f"{seconds:.0f}s on {job.master}. Last lines of its output:\n{lines}"
        )
    logger.info("spark application %s finished in %.1fs", job.code.application, seconds)
    return LocalRunResult(command=command, seconds=round(seconds, 2), tail=list(tail))
