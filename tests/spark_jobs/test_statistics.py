"""The training statistics: exact quantiles and histograms from the counted values."""

import math

import pytest
from pyspark.sql import functions as F

from kfstack.errors import DataQualityError
from kfstack.flights.features import NUMERIC_FEATURES
from kfstack.spark_jobs.flights_features import statistics
from kfstack.spark_jobs.flights_features.profile import _histogram
from kfstack.spark_jobs.flights_features.statistics import NumericStatistics, quantile


def test_a_quantile_is_the_smallest_value_with_that_share_at_or_below_it():
    values = [(1.0, 1), (2.0, 1), (3.0, 2)]  # 1, 2, 3, 3
    assert [quantile(values, q) for q in (0.0, 0.25, 0.26, 0.5, 0.51, 1.0)] == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    stats = NumericStatistics(count=4, mean=2.25, variance=0.9, values=tuple(values))
    assert stats.median == 2.0 and stats.quantiles[0] == 1.0 and stats.quantiles[-1] == 3.0
    assert NumericStatistics(count=0, mean=None, variance=0.0).quantiles == ()


def test_a_histogram_counts_every_value_and_puts_the_far_ones_in_the_end_bins():
    edges = [0.0 + i for i in range(11)]  # ten bins of width 1 over [0, 10]
    values = [(-5.0, 1), (0.0, 2), (0.99, 1), (9.5, 3), (10.0, 4), (42.0, 5), (math.inf, 1), (math.nan, 1)]
    counts = _histogram(values, edges)
    assert counts == [4, 0, 0, 0, 0, 0, 0, 0, 0, 14]
    assert sum(counts) == sum(count for _, count in values)


def test_a_feature_of_too_many_distinct_values_fails_with_the_reason(spark, monkeypatch):
    monkeypatch.setattr(statistics, "MAX_DISTINCT_VALUES", 5)
    train = spark.range(10).select(*[(F.col("id") * 1.5).alias(n) for n in NUMERIC_FEATURES])
    with pytest.raises(DataQualityError, match="more than 5 distinct values"):
        statistics._numeric_values(train)
