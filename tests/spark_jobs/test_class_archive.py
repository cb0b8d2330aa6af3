"""The driver JVM's class archive: one per JVM build and Spark installation, mapped when there."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kfstack_examples.flights.features_job import class_archive


def fake_java_home(root, runtime_version: str):
    home = root / runtime_version
    (home / "bin").mkdir(parents=True)
    (home / "release").write_text(f'IMPLEMENTOR="Someone"\nJAVA_RUNTIME_VERSION="{runtime_version}"\n')
    return home


def test_the_archive_is_named_for_the_jvm_build_under_the_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(class_archive.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("JAVA_HOME", str(fake_java_home(tmp_path, "17.0.15+6")))
    first = class_archive.archive_path()
    assert first is not None and first.parent == tmp_path / "cache" and first.suffix == ".jsa"
    assert class_archive.archive_path() == first  # the same JVM: the same archive

    # The same installation updated in place to another build: another archive (the JVM would
    # refuse the first one).
    java_home = tmp_path / "17.0.15+6"
    (java_home / "release").write_text('JAVA_RUNTIME_VERSION="17.0.16+8"\n')
    assert class_archive.archive_path() not in (None, first)


def test_a_session_starts_without_an_archive_where_none_can_be_located(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(fake_java_home(tmp_path, "17.0.15+6")))
    monkeypatch.setenv(class_archive.CACHE_DIR_ENV, "")
    monkeypatch.delenv("HOME", raising=False)

    def no_home():
        raise RuntimeError("Could not determine home directory.")  # as pathlib says it

    monkeypatch.setattr("pathlib.Path.home", no_home)
    assert class_archive.java_options() == ""


def test_the_option_maps_the_archive_only_once_it_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv(class_archive.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(fake_java_home(tmp_path, "17.0.15+6")))
    path = class_archive.archive_path()
    assert class_archive.java_options() == ""
    path.write_bytes(b"an archive")
    assert class_archive.java_options() == f"-XX:SharedArchiveFile={path}"


def test_without_java_there_is_no_archive(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    assert class_archive.archive_path() is None
    assert class_archive.java_options() == ""


@pytest.mark.slow
def test_a_recorded_archive_is_mapped_by_the_next_local_session(tmp_path):
    """Records a real archive, then starts a default local session in a fresh process: the JVM
    logs where each class came from, and Spark's come from the archive ("top" layer)."""
    env = {**os.environ, class_archive.CACHE_DIR_ENV: str(tmp_path / "cache")}
    recorded = subprocess.run(
        [sys.executable, "-m", "kfstack_examples.flights.features_job.class_archive"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    assert len(list((tmp_path / "cache").glob("*.jsa"))) == 1

    log = tmp_path / "classes.log"
    session = (
        "from kfstack_examples.flights.features_job.job import local_spark_session\n"
        "spark = local_spark_session()\n"
        "assert spark.range(10).count() == 10\n"
        "spark.stop()\n"
    )
    # JDK_JAVA_OPTIONS: read by the java launcher itself, so the session's own options stay as
    # the job sets them.
    started = subprocess.run(
        [sys.executable, "-c", session],
        env={**env, "JDK_JAVA_OPTIONS": f"-Xlog:class+load=info:file={log}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert started.returncode == 0, started.stderr[-3000:]
    loaded = [line for line in log.read_text().splitlines() if " org.apache.spark.SparkContext " in line]
    assert loaded and "shared objects file (top)" in loaded[0], loaded
