"""A class-data archive of the feature job's driver JVM (Java's AppCDS), for local sessions.

A Spark driver loads some 12,000 classes -- Spark's, Scala's, Hadoop's, Parquet's -- and the JVM
parses and verifies each on every start, while the job waits. An archive records them once, as
the JVM laid them out in memory, and later JVMs map the file instead (2 cores: the session
starts in 2.1-2.4 s instead of 4.0, and the job on x10 takes 40.9-43.3 s instead of 44.6-44.8, three
runs each, alternating: ``BENCHMARKS.md``).

:func:`record` makes one: it runs the job on a sample of the bundled flights in a JVM that writes
what it loaded when it exits (``-XX:ArchiveClassesAtExit``); ``make setup`` runs it, and
``python -m kfstack_examples.flights.features_job.class_archive`` again at any time. A local
session (:func:`.job.local_spark_session`) then maps it (:func:`java_options`) if it is there.

An archive fits one JVM build and one Spark installation (the JVM checks the class path and
refuses a mismatch, running as if there were none), so its file name carries both
(:func:`kfstack.spark.class_archive.archive_path`, where every local driver looks it up, this
job's and a team's own under the generic Spark job), under ``$KFSTACK_CACHE_DIR`` (default
``~/.cache/kfstack``); about 180 MB. A SparkApplication's image could record one at build time
the same way; that is not done: the class path of a driver pod, and so the archive's fit,
cannot be checked here.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# Where an archive lives and the option that maps it are every local driver's business
# (kfstack.spark.class_archive); they stay importable from here, where the feature job and its
# benchmark have always found them.
from kfstack.api.spark import CACHE_DIR_ENV, archive_path, cache_dir, java_options

__all__ = ["CACHE_DIR_ENV", "RECORDING_SAMPLE", "archive_path", "cache_dir", "java_options", "main", "record"]

logger = logging.getLogger(__name__)

# The share of the bundled flights the recording run reads: every class the job loads, in a
# few seconds of work.
RECORDING_SAMPLE = 0.05


def _run_and_exit_jvm(archive: Path) -> None:
    """Runs the job on a sample in a new local session whose JVM writes ``archive`` as it exits,
    then ends that JVM."""
    # The job imports this module (its local session maps the archive): imported here, when a
    # recording is asked for, rather than at import time.
    from pyspark import SparkContext

    from kfstack_examples.flights.features_job.config import FeatureJobConfig
    from kfstack_examples.flights.features_job.job import local_spark_session, run_feature_job

    # The JVM warns of each class it leaves out (generated ones, signed jars'): errors only.
    spark = local_spark_session(java_options=f"-XX:ArchiveClassesAtExit={archive} -Xlog:cds*=error")
    with tempfile.TemporaryDirectory() as out:
        try:
            config = FeatureJobConfig(
                output_uri=os.path.join(out, "features"),
                quarantine_uri=os.path.join(out, "quarantine"),
                sample_fraction=RECORDING_SAMPLE,
            )
            run_feature_job(config, spark=spark)
        finally:
            spark.stop()
            # The JVM writes the archive as it exits, which it does when its standard input
            # closes (as when this process ends): close it and wait, so the file is whole here.
            gateway = SparkContext._gateway
            if gateway is not None:
                jvm = gateway.proc
                gateway.shutdown()
                jvm.stdin.close()
                SparkContext._gateway = None
                SparkContext._jvm = None
                try:
                    exit_code = jvm.wait(timeout=300)
                except subprocess.TimeoutExpired:
                    jvm.kill()  # not left to write the file after this process gave up on it
                    jvm.wait()
                    raise RuntimeError("the JVM took over 5 minutes to write the class archive") from None
                if exit_code != 0:
                    raise RuntimeError(f"the JVM exited with {exit_code} writing the class archive")


def record() -> Path:
    """Records the archive (see the module docstring) and returns its path. Run it in a process
    of its own (``main``): it starts the process's JVM, and ends it to have the archive written.

    Raises:
        RuntimeError: No Java is found, or the JVM failed, took too long or wrote no archive.
        KfstackError: The recording run of the job failed.
    """
    target = archive_path()
    if target is None:
        raise RuntimeError("no Java found (JAVA_HOME or java on the PATH): nothing to record")
    target.parent.mkdir(parents=True, exist_ok=True)
    # A file of this process's own, renamed when whole: a run that starts meanwhile maps the
    # previous archive or none, never half of one.
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        _run_and_exit_jvm(partial)
    except BaseException:
        partial.unlink(missing_ok=True)  # what a failed run's JVM dumped is not kept
        raise
    if not partial.is_file():
        raise RuntimeError(f"the JVM wrote no class archive at {partial}")
    os.replace(partial, target)
    return target


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # An optional speed-up: any failure is one line, and the sessions go on without it.
    try:
        path = record()
    except Exception as err:
        logger.error(
            "no class archive recorded: %s: %s (local Spark sessions start without one)",
            type(err).__name__,
            err,
        )
        return 1
    logger.info("class archive recorded: %s (%.0f MB)", path, path.stat().st_size / 2**20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
