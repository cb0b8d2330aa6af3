"""A synthetic drift, injected on purpose so that a drift check and a retraining run can be seen.

Real data drifts slowly and the bundled flights are one year; to show both branches of a
retraining run (no drift: nothing retrained; drift: retrained, gated, canaried) a run can change
a share of its window's flights -- chosen by a seeded hash of the flight key, so the same run
changes the same flights -- the way a new schedule would:

- departure three hours later (the ``dep_hour`` and minute-of-day features move);
- a route half as long again (``distance``);
- arrival 45 minutes later (more flights are late: the label rate moves, and the new relation
  between these features and lateness is one a model trained before never saw).

Never set it on data a model is meant to learn from.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kfstack_examples.flights.features_job.validation import FLIGHT_KEY

DEPARTURE_SHIFT_HOURS = 3
DISTANCE_FACTOR = 1.5
ARRIVAL_DELAY_MINUTES = 45.0
_BUCKETS = 1_000_000


def inject_drift(flights: DataFrame, share: float, seed: int) -> DataFrame:
    """``flights`` (typed rows) with ``share`` of them changed (see the module docstring)."""
    if share <= 0.0:
        return flights
    bucket = F.pmod(F.xxhash64(*[F.col(k) for k in FLIGHT_KEY], F.lit(seed), F.lit("drift")), F.lit(_BUCKETS))
    chosen = bucket < int(share * _BUCKETS)
    departure = F.col("sched_dep_time")
    later = F.pmod(F.floor(departure / 100) + DEPARTURE_SHIFT_HOURS, F.lit(24)) * 100 + F.pmod(
        departure, F.lit(100)
    )
    return flights.withColumns(
        {
            "sched_dep_time": F.when(chosen, later.cast("double")).otherwise(departure),
            "distance": F.when(chosen, F.col("distance") * DISTANCE_FACTOR).otherwise(F.col("distance")),
            "arr_delay": F.when(chosen, F.col("arr_delay") + ARRIVAL_DELAY_MINUTES).otherwise(
                F.col("arr_delay")
            ),
        }
    )
