"""The training split's statistics, gathered once: what the encoding and the profile are made of.

Three Spark jobs over the training split's raw features, for every feature at once:

- two global aggregations over the numeric features: per feature the count of values, their
  mean and sample variance; and approximate quantiles (:data:`QUANTILES`, relative rank error
  :data:`QUANTILE_RELATIVE_ERROR`, the median among them). Apart, since a quantile sketch is
  an object Spark cannot generate code for: in one aggregation with it the counts, means and
  variances would be interpreted too (x10: 9.0 s together, 0.7 + 4.8 s apart);
- one count per (categorical feature, value).

The encoding (:func:`.featurize.fit_encoding`: vocabularies, medians, mean and standard
deviation after imputation) and the profile (:mod:`.profile`) are computed from these in
Python; only the profile's histograms need another pass, since their edges come from the
extremes found here.
"""

from __future__ import annotations

import dataclasses
import math

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kfstack.flights.features import CATEGORICAL_FEATURES, NUMERIC_FEATURES

QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)
# Rank error of the approximate quantiles (0.1% of the rows), as Spark's Imputer and
# DataFrame.approxQuantile default to; the 0 and 1 quantiles are the exact extremes.
QUANTILE_RELATIVE_ERROR = 0.001


@dataclasses.dataclass(frozen=True)
class NumericStatistics:
    """One numeric feature's values in the training split (missing values left out)."""

    count: int
    mean: float | None  # None: no value at all
    variance: float  # sample variance; 0 with fewer than two values
    quantiles: tuple[float, ...]  # at QUANTILES; empty when there is no value

    @property
    def median(self) -> float | None:
        return self.quantiles[QUANTILES.index(0.5)] if self.quantiles else None


@dataclasses.dataclass(frozen=True)
class TrainStatistics:
    """What :func:`train_statistics` gathered."""

    rows: int
    numeric: dict[str, NumericStatistics]
    # Per categorical feature, its values' counts, most frequent first (ties: by value).
    categorical: dict[str, list[tuple[str, int]]]


def _numeric(train: DataFrame) -> tuple[int, dict[str, NumericStatistics]]:
    moments = [F.count(F.lit(1)).alias("__rows")]
    for n in NUMERIC_FEATURES:
        moments += [
            F.count(n).alias(f"{n}__count"),
            F.avg(n).alias(f"{n}__mean"),
            F.var_samp(n).alias(f"{n}__variance"),
        ]
    row = train.agg(*moments).collect()[0].asDict()
    accuracy = round(1 / QUANTILE_RELATIVE_ERROR)
    quantiles = train.agg(
        *[F.percentile_approx(n, list(QUANTILES), accuracy).alias(n) for n in NUMERIC_FEATURES]
    ).collect()[0]
    numeric = {}
    for n in NUMERIC_FEATURES:
        variance = row[f"{n}__variance"]
        numeric[n] = NumericStatistics(
            count=row[f"{n}__count"],
            mean=row[f"{n}__mean"],
            variance=0.0 if variance is None or math.isnan(variance) else variance,
            quantiles=tuple(float(q) for q in quantiles[n] or ()),
        )
    return row["__rows"], numeric


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
    """The statistics of ``train`` (raw features of the training split); see the module docstring."""
    rows, numeric = _numeric(train)
    return TrainStatistics(rows=rows, numeric=numeric, categorical=_categorical(train))
