"""For a team's PySpark application: every row goes on or is quarantined with its reason, the
counts reported; the data window a run reads; the profile a drift check compares a later window with;
the Spark driver's class archive (a faster local session start). Imports pyspark."""

from kfstack.monitoring.profiling import profile_dataset
from kfstack.monitoring.window import DataWindow
from kfstack.spark.class_archive import CACHE_DIR_ENV, archive_path, cache_dir, java_options
from kfstack.spark.quality import QualityReport, Rule, count_reasons, quarantined_rows, tag_rows, valid_rows

__all__ = [
    "CACHE_DIR_ENV",
    "DataWindow",
    "QualityReport",
    "Rule",
    "archive_path",
    "cache_dir",
    "count_reasons",
    "java_options",
    "profile_dataset",
    "quarantined_rows",
    "tag_rows",
    "valid_rows",
]
