"""The training split's statistics, gathered once: what the encoding and the profile are made of.

One Spark job over the training split's raw features counts, for every feature at once, each of
its distinct values (missing numeric values left out) -- and the rows. The features of flights
take few values however many flights there are (minutes of a day, days of a year, routes'
distances, weather readings to a tenth, a fleet's seats, carriers): 6,817 numeric values in all
on ten times the bundled year. Everything else follows from these counts in Python, exactly and
the same however Spark partitions the rows:

- per numeric feature, the count of values, their mean and sample variance;
- its quantiles (:data:`QUANTILES`, the median among them) and the profile's histograms on any
  edges (approximate quantile sketches took three times as long, 5.7 s against 2.0 on x10, and
  a pass of their own for the histograms);
- per categorical feature, its vocabulary by frequency.

(Moments aggregated in Spark beside the counts, and the categorical counts apart, took three
jobs over a cache of the raw features: the join-and-fit phase on x10 took 14.8 s, 6.3 s now.)

The encoding (:func:`.featurize.fit_encoding`: vocabularies, medians, mean and standard
deviation after imputation) and the profile (:mod:`.profile`) are computed from these.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kfstack.api import DataQualityError
from kfstack_examples.flights.features import CATEGORICAL_FEATURES, NUMERIC_FEATURES

QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)
# Distinct numeric values the job accepts (all features together): ~100 times what the flights'
# features take. A feature of continuous values would need a sketch instead.
MAX_DISTINCT_VALUES = 1_000_000


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


def _sum(terms: Sequence[float]) -> float:
    """The correctly rounded sum where every term is finite (the result does not depend on the
    order of the values); otherwise the plain sum: NaN or infinite, as Spark's would be."""
    return math.fsum(terms) if all(math.isfinite(t) for t in terms) else sum(terms)


@dataclasses.dataclass(frozen=True)
class NumericStatistics:
    """One numeric feature's values in the training split (missing values left out): every
    distinct value and its count, ascending (NaN, if any, last)."""

    values: tuple[tuple[float, int], ...] = ()

    @property
    def count(self) -> int:
        return sum(count for _, count in self.values)

    @property
    def mean(self) -> float | None:
        """None: no value at all."""
        if not self.values:
            return None
        return _sum([value * count for value, count in self.values]) / self.count

    @property
    def variance(self) -> float:
        """The sample variance; 0 with fewer than two values (or none that is finite)."""
        mean, count = self.mean, self.count
        if mean is None or count < 2:
            return 0.0
        variance = _sum([(value - mean) ** 2 * n for value, n in self.values]) / (count - 1)
        return 0.0 if math.isnan(variance) else variance

    @property
    def quantiles(self) -> tuple[float, ...]:
        """At :data:`QUANTILES`; empty when there is no value."""
        return tuple(quantile(self.values, q) for q in QUANTILES) if self.values else ()

    @property
    def median(self) -> float | None:
        return quantile(self.values, 0.5) if self.values else None


@dataclasses.dataclass(frozen=True)
class TrainStatistics:
    """What :func:`train_statistics` gathered."""

    rows: int
    numeric: dict[str, NumericStatistics]
    # Per categorical feature, its values' counts, most frequent first (ties: by value).
    categorical: dict[str, list[tuple[str, int]]]


# The entries of the one aggregation: (feature, number, category) -> count. A row counts once
# under _ROWS; numeric features are numbered from 0, categorical ones from _CATEGORIES.
_FEATURE, _NUMBER, _CATEGORY = "feature", "number", "category"
_ROWS, _CATEGORIES = -1, len(NUMERIC_FEATURES)


def _value_counts(train: DataFrame) -> list[tuple[int, Any, Any, int]]:
    """``(feature, number, category, count)`` for every value of every feature of ``train`` and
    the rows (:data:`_ROWS`): a numeric feature's entries have a number (a float), a categorical
    feature's a category (a string).

    Raises:
        DataQualityError: More than :data:`MAX_DISTINCT_VALUES` numeric values in all.
    """
    # A numeric entry's category and a categorical one's number are blanks, not nulls: Spark's
    # first-level aggregation map (the fast one) takes no key with a null.
    no_number, no_category = F.lit(0.0), F.lit("")

    def entry(feature: int, number: Column, category: Column) -> Column:
        return F.struct(F.lit(feature).alias(_FEATURE), number.alias(_NUMBER), category.alias(_CATEGORY))

    entries = F.array(
        entry(_ROWS, no_number, no_category),
        *[entry(i, F.col(n), no_category) for i, n in enumerate(NUMERIC_FEATURES)],
        *[entry(_CATEGORIES + i, no_number, F.col(n)) for i, n in enumerate(CATEGORICAL_FEATURES)],
    )
    numeric = F.col(_FEATURE).between(0, _CATEGORIES - 1)
    counted = (
        train.select(F.inline(entries))
        .where(~numeric | F.col(_NUMBER).isNotNull())  # a missing value is no value
        # The key's own hash leads it: the fast map buckets by the low bits of a simple mix of
        # the key's fields, which the round numbers of a feature share (their doubles' low bits
        # are zero), so they would overflow into the slow map. (x10: 4.1 -> 3.8 s warm.)
        .groupBy(F.xxhash64(_FEATURE, _NUMBER, _CATEGORY), _FEATURE, _NUMBER, _CATEGORY)
        .count()
        .collect()
    )
    # After the fact: the count is bounded by the features' domains, not by the rows; a feature
    # of continuous values added later fails here rather than slowly swamping the driver.
    if sum(1 for row in counted if 0 <= row[_FEATURE] < _CATEGORIES) > MAX_DISTINCT_VALUES:
        raise DataQualityError(
            f"the numeric features take more than {MAX_DISTINCT_VALUES} distinct values in the "
            "training split; their statistics are counted value by value"
        )
    return [(row[_FEATURE], row[_NUMBER], row[_CATEGORY], row["count"]) for row in counted]


def train_statistics(train: DataFrame) -> TrainStatistics:
    """The statistics of ``train`` (raw features of the training split); see the module docstring.

    Raises:
        DataQualityError: The numeric features take too many distinct values to count.
    """
    rows = 0
    numbers: dict[str, list[tuple[float, int]]] = {n: [] for n in NUMERIC_FEATURES}
    categories: dict[str, list[tuple[str, int]]] = {n: [] for n in CATEGORICAL_FEATURES}
    for feature, number, category, count in _value_counts(train):
        if feature == _ROWS:
            rows = count
        elif feature < _CATEGORIES:
            numbers[NUMERIC_FEATURES[feature]].append((number, count))
        else:
            categories[CATEGORICAL_FEATURES[feature - _CATEGORIES]].append((category, count))
    for found in numbers.values():
        found.sort(key=lambda value_count: (math.isnan(value_count[0]), value_count[0]))
    for counted in categories.values():
        counted.sort(key=lambda value_count: (-value_count[1], value_count[0]))
    return TrainStatistics(
        rows=rows,
        numeric={n: NumericStatistics(values=tuple(found)) for n, found in numbers.items()},
        categorical=categories,
    )
