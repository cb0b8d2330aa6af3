"""``python -m kfstack.spark_jobs.flights_features ...``: see :mod:`.job`."""

import sys

from kfstack.spark_jobs.flights_features.job import main

sys.exit(main())
