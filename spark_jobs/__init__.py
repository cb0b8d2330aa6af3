"""Spark applications kfstack ships as ``kfstack.spark_jobs``: none of its own today.

The generic Spark step (``components/data/spark_job``) runs a team's own PySpark application as
``spark-submit`` would, through the driver wrapper of :mod:`kfstack.spark.driver`; the
validate-and-quarantine helpers such an application calls are in :mod:`kfstack.spark.quality`.
The examples' applications live with the examples (``examples/kfstack_examples``).
"""
