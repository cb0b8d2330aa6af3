"""For a team's PySpark application: every row goes on or is quarantined with its reason, the
counts reported; the Spark driver's class archive (a faster local session start). The data window and
the data profile, which need no Spark, are in :mod:`kfstack.api`. Imports pyspark."""

from kfstack.spark.class_archive import CACHE_DIR_ENV, archive_path, cache_dir, java_options
from kfstack.spark.quality import QualityReport, Rule, count_reasons, quarantined_rows, tag_rows, valid_rows

__all__ = [
    "CACHE_DIR_ENV",
    "QualityReport",
    "Rule",
    "archive_path",
    "cache_dir",
    "count_reasons",
    "java_options",
    "quarantined_rows",
    "tag_rows",
    "valid_rows",
]
