"""The embedded platform's spark-submit: its command line and environment as data, then real
runs -- a failing application fails the step with its output, a cancelled step leaves no JVM."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import psutil
import pytest

from kfstack.contracts import SparkApplicationCode
from kfstack.errors import PlatformNotAvailableError, RunFailedError
from kfstack.spark import class_archive, local

SAMPLE_APP = str(pathlib.Path(__file__).with_name("sample_app.py"))


def job(**overrides) -> local.LocalSparkJob:
    fields = {
        "code": SparkApplicationCode(SAMPLE_APP, ("--label", "x")),
        "env": {"KFSTACK_OUTPUT_URI": "/data/out"},
        "cores": 2,
        "driver_memory": "3g",
    }
    fields.update(overrides)
    return local.LocalSparkJob(**fields)


def confs(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, word in enumerate(command) if word == "--conf"]
    keys = [pair.split("=", 1)[0] for pair in pairs]
    assert len(keys) == len(set(keys)), "a setting is given twice"
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_command_submits_the_wrapper_with_the_application_and_its_arguments(tmp_path):
    command = local.submit_command(job(), str(tmp_path), "/spark")
    assert command[:5] == ["/spark/bin/spark-submit", "--master", "local[2]", "--name", "sample_app"]
    assert command[-4:] == [local.DRIVER_FILE, SAMPLE_APP, "--label", "x"]
    assert local.DRIVER_FILE.endswith(os.path.join("kfstack", "spark", "driver.py"))
    conf = confs(command)
    assert conf["spark.driver.memory"] == "3g"
    assert conf["spark.pyspark.python"] == conf["spark.pyspark.driver.python"] == sys.executable
    assert conf["spark.local.dir"] == str(tmp_path)
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert (conf["spark.ui.enabled"], conf["spark.sql.adaptive.enabled"]) == ("false", "false")
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.sql.shuffle.partitions"] == "4"
    java = conf["spark.driver.extraJavaOptions"].split()
    assert f"-Djava.io.tmpdir={tmp_path}" in java
    assert {"-XX:+UseParallelGC", "-XX:CompileThresholdScaling=2"} <= set(java)


def test_every_core_is_local_star_and_a_module_is_named_for_itself(tmp_path):
    command = local.submit_command(
        job(cores=0, code=SparkApplicationCode("team.jobs.clean")), str(tmp_path), "/spark"
    )
    assert command[1:5] == ["--master", "local[*]", "--name", "team.jobs.clean"]
    assert command[-1] == "team.jobs.clean"


def test_the_teams_settings_win_over_kfstacks(tmp_path):
    conf = confs(
        local.submit_command(
            job(spark_conf={"spark.sql.adaptive.enabled": "true", "spark.executor.cores": "1"}),
            str(tmp_path),
            "/spark",
        )
    )
    assert conf["spark.sql.adaptive.enabled"] == "true"
    assert conf["spark.executor.cores"] == "1"


def test_the_teams_java_options_follow_kfstacks(tmp_path):
    """Java options add up: kfstack's scratch folder and collector stay, the team's come after
    them (and so win a flag both set)."""
    java = confs(
        local.submit_command(
            job(spark_conf={"spark.driver.extraJavaOptions": "-XX:+UseG1GC -Dteam=1"}),
            str(tmp_path),
            "/spark",
        )
    )["spark.driver.extraJavaOptions"].split()
    assert java[0] == f"-Djava.io.tmpdir={tmp_path}"
    assert java[-2:] == ["-XX:+UseG1GC", "-Dteam=1"]
    assert java.index("-XX:+UseParallelGC") < java.index("-XX:+UseG1GC")


def test_a_recorded_class_archive_is_mapped(tmp_path, monkeypatch):
    monkeypatch.setenv(class_archive.CACHE_DIR_ENV, str(tmp_path / "cache"))
    home = local.spark_home()
    archive = class_archive.archive_path(home)
    if archive is None:
        pytest.skip("no Java here: no archive can be located")
    assert (
        "SharedArchiveFile"
        not in confs(local.submit_command(job(), str(tmp_path), home))["spark.driver.extraJavaOptions"]
    )
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"an archive")
    java = confs(local.submit_command(job(), str(tmp_path), home))["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={archive}" in java.split()


def test_spark_home_is_the_installed_pyspark_package():
    home = local.spark_home()
    assert os.access(os.path.join(home, "bin", "spark-submit"), os.X_OK)
    assert os.path.isdir(os.path.join(home, "jars"))


def test_without_pyspark_the_local_platform_says_what_to_install(monkeypatch):
    monkeypatch.setattr(local.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(PlatformNotAvailableError, match=r"kfstack\[spark\]"):
        local.spark_home()


def test_the_environment_carries_spark_home_scratch_and_the_jobs_variables(tmp_path):
    base = {"PATH": "/bin", "PYSPARK_GATEWAY_PORT": "4321", "PYSPARK_GATEWAY_SECRET": "s", "TMPDIR": "/tmp"}
    env = local.submit_env(
        job(env={"KFSTACK_OUTPUT_URI": "/data/out", "TMPDIR": "/mine"}), "/s", "/spark", base
    )
    assert env["SPARK_HOME"] == "/spark" and env["PATH"] == "/bin"
    assert env["KFSTACK_OUTPUT_URI"] == "/data/out"
    assert env["TMPDIR"] == "/mine"  # the job's own variables come last
    assert env["PYTHONUNBUFFERED"] == "1" and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert "PYSPARK_GATEWAY_PORT" not in env and "PYSPARK_GATEWAY_SECRET" not in env
    assert local.submit_env(job(env={}), "/s", "/spark", base)["TMPDIR"] == "/s"
    assert (
        local.submit_env(job(), "/s", "/spark", {"SPARK_LOCAL_IP": "10.0.0.1"})["SPARK_LOCAL_IP"]
        == "10.0.0.1"
    )


def test_a_failing_application_fails_the_step_with_its_exit_status_and_output(tmp_path, monkeypatch):
    """A real spark-submit (the JVM starts, the application exits 3 before it starts Spark)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the run's scratch folder goes
    output = tmp_path / "log.txt"
    with open(output, "w") as out, pytest.raises(RunFailedError) as raised:
        local.run_local_job(job(code=SparkApplicationCode(SAMPLE_APP, ("--exit-code", "3"))), out=out)
    message = str(raised.value)
    assert "exit code 3" in message and "local[2]" in message
    assert "sample app: giving up with exit code 3" in message  # the tail of its output
    assert message.startswith(f"spark application {SAMPLE_APP} failed (exit code 3)")  # no reason given
    assert "giving up" in output.read_text()  # streamed as it ran
    assert not list(tmp_path.glob("kfstack-spark-*"))


CANCELLED_STEP = textwrap.dedent(
    """
    import sys
    from kfstack.contracts import SparkApplicationCode
    from kfstack.spark.local import LocalSparkJob, run_local_job
    run_local_job(
        LocalSparkJob(SparkApplicationCode(sys.argv[1], ("--hang-after-writing", sys.argv[2])), cores=1),
        grace_seconds=3,
    )
    """
)


def group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def test_a_cancelled_step_stops_the_jvm_and_its_python_child(tmp_path):
    """SIGTERM to the step (as KFP or the embedded runner cancels a task): the JVM's process
    group -- spark-submit's JVM and the application's Python process -- is gone after it."""
    marker = tmp_path / "started"
    step = subprocess.Popen(
        [sys.executable, "-c", CANCELLED_STEP, SAMPLE_APP, str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() or not marker.read_text():
            assert step.poll() is None, step.stdout.read().decode() if step.stdout else ""
            assert time.monotonic() < deadline, "the application never started"
            time.sleep(0.2)
        application = int(marker.read_text())
        (jvm,) = [
            child for child in psutil.Process(step.pid).children() if os.getpgid(child.pid) == child.pid
        ]
        assert application in {p.pid for p in group_members(jvm.pid)}

        step.send_signal(signal.SIGTERM)
        assert step.wait(timeout=30) != 0
        log = step.stdout.read().decode() if step.stdout else ""
        assert "CancelledError" in log
        assert group_members(jvm.pid) == []
        assert (
            not psutil.pid_exists(application) or psutil.Process(application).status() == psutil.STATUS_ZOMBIE
        )
        assert not list(tmp_path.glob("kfstack-spark-*")), "the scratch folder was left"
    finally:
        if step.poll() is None:
            step.kill()
            step.wait()
