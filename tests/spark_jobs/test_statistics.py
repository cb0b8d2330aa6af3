"""The training statistics: exact quantiles and histograms from the counted values."""

import math

import pytest
from pyspark.sql import functions as F

from kfstack.errors import DataQualityError
from kfstack_examples.flights.features import CATEGORICAL_FEATURES, NUMERIC_FEATURES
from kfstack_examples.flights.features_job import statistics
from kfstack_examples.flights.features_job.profile import _histogram
from kfstack_examples.flights.features_job.statistics import NumericStatistics, quantile


def test_a_quantile_is_the_smallest_value_with_that_share_at_or_below_it():
    values = [(1.0, 1), (2.0, 1), (3.0, 2)]  # 1, 2, 3, 3
    assert [quantile(values, q) for q in (0.0, 0.25, 0.26, 0.5, 0.51, 1.0)] == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    stats = NumericStatistics(values=tuple(values))
    assert stats.median == 2.0 and stats.quantiles[0] == 1.0 and stats.quantiles[-1] == 3.0
    assert NumericStatistics().quantiles == ()


def test_a_histogram_counts_every_value_and_puts_the_far_ones_in_the_end_bins():
    edges = [0.0 + i for i in range(11)]  # ten bins of width 1 over [0, 10]
    values = [(-5.0, 1), (0.0, 2), (0.99, 1), (9.5, 3), (10.0, 4), (42.0, 5), (math.inf, 1), (math.nan, 1)]
    counts = _histogram(values, edges)
    assert counts == [4, 0, 0, 0, 0, 0, 0, 0, 0, 14]
    assert sum(counts) == sum(count for _, count in values)


def _features(spark, rows: int, number):
    """A training split of ``rows`` rows whose numeric features are ``number(id)`` (a column)
    and whose categorical features are ``id % 3`` as text."""
    ids = spark.range(rows)
    return ids.select(
        *[number(F.col("id")).alias(n) for n in NUMERIC_FEATURES],
        *[(F.col("id") % 3).cast("string").alias(n) for n in CATEGORICAL_FEATURES],
    )


def test_the_moments_from_the_counted_values_are_spark_s_own(spark):
    # Values repeat (id % 7) and go missing (every fifth row): what the counts must weigh.
    train = _features(spark, 1000, lambda i: F.when(i % 5 != 0, (i % 7) * 1.5 - 2.0))
    stats = statistics.train_statistics(train)
    spark_said = train.agg(
        F.count(F.lit(1)).alias("rows"),
        *[F.count(n).alias(f"{n}_count") for n in NUMERIC_FEATURES],
        *[F.avg(n).alias(f"{n}_mean") for n in NUMERIC_FEATURES],
        *[F.var_samp(n).alias(f"{n}_variance") for n in NUMERIC_FEATURES],
    ).first()
    assert stats.rows == spark_said["rows"] == 1000
    for n in NUMERIC_FEATURES:
        numeric = stats.numeric[n]
        assert numeric.count == spark_said[f"{n}_count"] == 800
        assert numeric.mean == pytest.approx(spark_said[f"{n}_mean"], rel=1e-12)
        assert numeric.variance == pytest.approx(spark_said[f"{n}_variance"], rel=1e-12)
    assert stats.categorical[CATEGORICAL_FEATURES[0]] == [("0", 334), ("1", 333), ("2", 333)]


def test_a_feature_without_values_has_no_mean_and_no_variance(spark):
    train = _features(spark, 10, lambda i: F.lit(None).cast("double"))
    stats = statistics.train_statistics(train)
    numeric = stats.numeric[NUMERIC_FEATURES[0]]
    assert (stats.rows, numeric.count, numeric.mean, numeric.variance, numeric.median) == (
        10,
        0,
        None,
        0.0,
        None,
    )
    assert NumericStatistics(values=((math.inf, 1), (-math.inf, 1))).variance == 0.0  # NaN, as Spark's


def test_a_feature_of_too_many_distinct_values_fails_with_the_reason(spark, monkeypatch):
    monkeypatch.setattr(statistics, "MAX_DISTINCT_VALUES", 5)
    train = _features(spark, 10, lambda i: i * 1.5)
    with pytest.raises(DataQualityError, match="more than 5 distinct values"):
        statistics.train_statistics(train)
