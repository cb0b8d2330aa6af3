"""The training split's statistics, gathered once: what the encoding and the profile are made of.

Three Spark jobs over the training split's raw features, for every feature at once:

- a global aggregation over the numeric features: per feature the count of values, their mean
  and sample variance;
- the count of every distinct value of every numeric feature: the features of flights take few
  values however many flights there are (minutes of a day, days of a year, routes' distances,
  weather readings to a tenth, a fleet's seats), 6,817 in all on ten times the bundled year.
  The quantiles (:data:`QUANTILES`, the median among them) are exact from these, the same
  however Spark partitions the rows, and so are the profile's histograms on any edges, without
  another pass. (Approximate quantile sketches took three times as long, 5.7 s against 2.0 on
  x10, and a pass of their own for the histograms.)
- one count per (categorical feature, value).

The encoding (:func:`.featurize.fit_encoding`: vocabularies, medians, mean and standard
deviation after imputation) and the profile (:mod:`.profile`) are computed from these in Python.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kfstack.errors import DataQualityError
from kfstack.flights.features import CATEGORICAL_FEATURES, NUMERIC_FEATURES

QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)
# Distinct numeric values the job accepts (all features together): ~100 times what the flights'
# features take. A feature of continuous values would need a sketch instead.
MAX_DISTINCT_VALUES = 1_000_000


@dataclasses.dataclass(frozen=True)
class NumericStatistics:
    """One numeric feature's values in the training split (missing values left out)."""

    count: int
    mean: float | None  # None: no value at all
    variance: float  # sample variance; 0 with fewer than two values
    # Every distinct value and its count, ascending (NaN, if any, last: Spark's order).
    values: tuple[tuple[float, int], ...] = ()

    @property
    def quantiles(self) -> tuple[float, ...]:
        """At :data:`QUANTILES`; empty when there is no value."""
        return tuple(quantile(self.values, q) for q in QUANTILES) if self.values else ()

    @property
    def median(self) -> float | None:
        return quantile(self.values, 0.5) if self.values else None


def quantile(values: Sequence[tuple[float, int]], q: float) -> float:
    """The smallest value of which at least a ``q`` share of ``values`` (ascending, with counts)
    are no greater: the definition Spark's ``percentile_approx`` approximates, exactly."""
    total = sum(count for _, count in values)
    seen = 0
    for value, count in values:
        seen += count
        if seen >= q * total:
            return value
    return values[-1][0]


@dataclasses.dataclass(frozen=True)
class TrainStatistics:
    """What :func:`train_statistics` gathered."""

    rows: int
    numeric: dict[str, NumericStatistics]
    # Per categorical feature, its values' counts, most frequent first (ties: by value).
    categorical: dict[str, list[tuple[str, int]]]


def _moments(train: DataFrame) -> tuple[int, dict[str, tuple[int, float | None, float]]]:
    aggregates = [F.count(F.lit(1)).alias("__rows")]
    for n in NUMERIC_FEATURES:
        aggregates += [
            F.count(n).alias(f"{n}__count"),
            F.avg(n).alias(f"{n}__mean"),
            F.var_samp(n).alias(f"{n}__variance"),
        ]
    row = train.agg(*aggregates).collect()[0].asDict()
    moments = {}
    for n in NUMERIC_FEATURES:
        variance = row[f"{n}__variance"]
        moments[n] = (
            row[f"{n}__count"],
            row[f"{n}__mean"],
            0.0 if variance is None or math.isnan(variance) else variance,
        )
    return row["__rows"], moments


def _numeric_values(train: DataFrame) -> dict[str, list[tuple[float, int]]]:
    """Per numeric feature, its distinct values with their counts, ascending.

    Raises:
        DataQualityError: More than :data:`MAX_DISTINCT_VALUES` values in all.
    """
    pairs = F.array(
        *[
            F.struct(F.lit(i).alias("feature"), F.col(n).alias("value"))
            for i, n in enumerate(NUMERIC_FEATURES)
        ]
    )
    counted = (
        train.select(F.inline(pairs))
        .where(F.col("value").isNotNull())
        .groupBy("feature", "value")
        .count()
        .collect()
    )
    # After the fact: the count is bounded by the features' domains, not by the rows; a feature
    # of continuous values added later fails here rather than slowly swamping the driver.
    if len(counted) > MAX_DISTINCT_VALUES:
        raise DataQualityError(
            f"the numeric features take more than {MAX_DISTINCT_VALUES} distinct values in the "
            "training split; their statistics are counted value by value"
        )
    values: dict[str, list[tuple[float, int]]] = {n: [] for n in NUMERIC_FEATURES}
    for row in counted:
        values[NUMERIC_FEATURES[row["feature"]]].append((row["value"], row["count"]))
    for found in values.values():
        found.sort(key=lambda value_count: (math.isnan(value_count[0]), value_count[0]))
    return values


def _categorical(train: DataFrame) -> dict[str, list[tuple[str, int]]]:
    pairs = train.select(
        F.explode(
            F.array(
                *[F.struct(F.lit(n).alias("feature"), F.col(n).alias("value")) for n in CATEGORICAL_FEATURES]
            )
        ).alias("pair")
    ).select("pair.feature", "pair.value")
    counts: dict[str, list[tuple[str, int]]] = {n: [] for n in CATEGORICAL_FEATURES}
    for row in pairs.groupBy("feature", "value").count().collect():
        counts[row["feature"]].append((row["value"], row["count"]))
    for values in counts.values():
        values.sort(key=lambda value_count: (-value_count[1], value_count[0]))
    return counts


def train_statistics(train: DataFrame) -> TrainStatistics:
    """The statistics of ``train`` (raw features of the training split); see the module docstring.

    Raises:
        DataQualityError: The numeric features take too many distinct values to count.
    """
    rows, moments = _moments(train)
    values = _numeric_values(train)
    numeric = {
        n: NumericStatistics(count=count, mean=mean, variance=variance, values=tuple(values[n]))
        for n, (count, mean, variance) in moments.items()
    }
    return TrainStatistics(rows=rows, numeric=numeric, categorical=_categorical(train))
