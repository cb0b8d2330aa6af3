"""``python -m kfstack_examples.flights.features_job ...``: see :mod:`.job`."""

import sys

from kfstack_examples.flights.features_job.job import main

sys.exit(main())
