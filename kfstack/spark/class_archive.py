"""Where a local Spark driver's class-data archive (Java's AppCDS) lives, and the option that
maps it.

A Spark driver loads some 12,000 classes -- Spark's, Scala's, Hadoop's, Parquet's -- and the JVM
parses and verifies each on every start. An archive records them once, as the JVM laid them out
in memory, and later JVMs map the file instead: a local driver starts about 2 s sooner on two
cores (``BENCHMARKS.md``). Recording one is a job's business (it must run a workload that loads
the classes worth keeping); finding and mapping one is every local driver's, which is why the
lookup lives here and the recording with the job that records it.

An archive fits one JVM build and one Spark installation (the JVM checks the class path and
refuses a mismatch, running as if there were none), so its file name carries both
(:func:`archive_path`), under ``$KFSTACK_CACHE_DIR`` (default ``~/.cache/kfstack``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import shutil
from pathlib import Path

logger = logging.getLogger(__name__)

CACHE_DIR_ENV = "KFSTACK_CACHE_DIR"


def cache_dir() -> Path:
    """``$KFSTACK_CACHE_DIR``, else ``~/.cache/kfstack``."""
    return Path(os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "kfstack")


def _java_home() -> Path | None:
    """The Java installation Spark will start: ``$JAVA_HOME``, else the ``java`` on the path
    (with its links followed), as Spark's launcher picks it."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"]).resolve()
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def _java_runtime(java_home: Path) -> str:
    """The exact build of ``java_home`` from its ``release`` file (every JDK and JRE since 9
    carries one), e.g. ``17.0.15+6-Debian-1deb12u1``; ``""`` where there is none (its path then
    tells the archives apart alone)."""
    try:
        fields = dict(
            line.split("=", 1) for line in (java_home / "release").read_text().splitlines() if "=" in line
        )
    except OSError:
        return ""
    return fields.get("JAVA_RUNTIME_VERSION", fields.get("JAVA_VERSION", "")).strip('"')


def archive_path(spark_home: str | None = None) -> Path | None:
    """Where the archive for this JVM build and this Spark installation lives (whether or not
    it exists); None when no Java is found.

    Args:
        spark_home: The Spark installation the driver will run from; default: ``$SPARK_HOME``,
            else the installed pyspark package, as pyspark's launcher finds it.
    """
    java_home = _java_home()
    spec = importlib.util.find_spec("pyspark")
    if java_home is None or spec is None or spec.origin is None:
        return None
    identity = "|".join(
        (
            str(java_home),
            _java_runtime(java_home),
            # The Spark installation whose jars are the class path.
            spark_home or os.environ.get("SPARK_HOME") or os.path.dirname(spec.origin),
            importlib.metadata.version("pyspark"),
        )
    )
    return cache_dir() / f"spark-driver-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.jsa"


def java_options(spark_home: str | None = None) -> str:
    """The driver's Java option that maps the archive, or ``""`` when there is none -- or when
    where it would be cannot be told (no home folder, pyspark not installed as a package, an
    unreadable cache folder): the archive only speeds a driver's start, so it never stops one.

    Args:
        spark_home: See :func:`archive_path`.
    """
    try:
        path = archive_path(spark_home)
        return f"-XX:SharedArchiveFile={path}" if path is not None and path.is_file() else ""
    except (OSError, RuntimeError, importlib.metadata.PackageNotFoundError) as err:
        logger.debug("no class archive: %s", err)
        return ""
