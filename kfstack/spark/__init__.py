"""Generic Spark support: a team's own PySpark application run the same way on both platforms.

- :mod:`.driver`: the wrapper every run's driver executes, which runs the team's file or module
  as ``__main__`` and hands its report (``KFSTACK_REPORT_PATH``) back to the step;
- :mod:`.local`: the embedded platform's ``spark-submit --master local[N]`` of that wrapper, its
  process group stopped as one on cancel;
- :mod:`.class_archive`: where the driver JVM's class-data archive lives, which a local driver
  maps to start faster;
- :mod:`.quality`: validate-and-quarantine helpers a team's job may call (pyspark needed).

Nothing here knows a pipeline or a data set; ``kfstack.components.data.spark_job`` is the
component on top.
"""
