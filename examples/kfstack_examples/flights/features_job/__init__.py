"""The flights feature job (Spark): validated, featurised Parquet shards and their feature spec.

``job`` is the entry point (``run_feature_job`` in-process, ``main(argv)`` as a script); the
steps live in ``sources`` (reading), ``validation`` (quarantine rules), ``featurize`` (joins,
features, MLlib encoding) and ``profile`` (statistics for drift checks).
"""
