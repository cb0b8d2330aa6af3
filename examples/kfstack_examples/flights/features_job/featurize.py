"""Joins, raw features, label, split and the fitted MLlib encoding of the flights data.

Raw features are the Spark twin of :func:`kfstack_examples.flights.features.raw_features` (serving computes
them with NumPy; a parity test holds the two together). The encoding is fitted on the *training
split only* -- vocabularies (most frequent first, with an extra out-of-vocabulary index),
training medians for missing values, training mean and sample standard deviation -- from the
statistics the job gathers once (:mod:`.statistics`), and is the feature spec itself: the shards
are the spec applied in Spark, as serving applies it in NumPy. (These are the statistics Spark
ML's ``StringIndexer``, ``Imputer`` and ``StandardScaler`` fit, without their three extra passes
and vector columns.)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kfstack_examples.flights.feature_spec import (
    LABEL_COLUMN,
    CategoricalFeature,
    FeatureSpec,
    NumericFeature,
)
from kfstack_examples.flights.features import (
    AIRPORT_FIELDS,
    CATEGORICAL_FEATURES,
    DELAY_THRESHOLD_MINUTES,
    FLIGHT_FIELDS,
    MINUTES_PER_DAY,
    MISSING,
    NUMERIC_FEATURES,
    PLANE_FIELDS,
    WEATHER_FIELDS,
)
from kfstack_examples.flights.features_job.statistics import TrainStatistics
from kfstack_examples.flights.features_job.validation import FLIGHT_KEY

logger = logging.getLogger(__name__)

SPLIT = "split"
# Share of flights per split, by a hash of the flight key: stable across runs, input order and
# partitioning, and a flight never moves between splits when more data arrives.
SPLIT_PERCENTAGES = {"train": 80, "validation": 10, "test": 10}
# The test requests' seeded order, whose first rows are the canary's holdout (not written out).
HOLDOUT_ORDER = "_holdout_order"


def _number(df: DataFrame, name: str) -> Column:
    return F.trim(df[name]).try_cast("double")


def _one_row_per_key(typed: DataFrame, key: str, fields: Sequence[str]) -> DataFrame:
    """The rows with a ``key``, one per key: each field's first non-null value among the key's
    rows (a source table may list a key more than once, not always with every field)."""
    first_values = [F.first(c, ignorenulls=True).alias(c) for c in fields]
    return typed.where(F.col(key).isNotNull()).groupBy(key).agg(*first_values)


def plane_lookup(planes: DataFrame) -> DataFrame:
    """Plane attributes keyed by ``tailnum`` (one row per tailnum): :data:`PLANE_FIELDS`."""
    typed = planes.select(
        F.trim("tailnum").alias("tailnum"),
        _number(planes, "year").alias("plane_year"),
        F.col("manufacturer").alias("plane_manufacturer"),
        F.col("engine").alias("plane_engine"),
        _number(planes, "seats").alias("plane_seats"),
        _number(planes, "engines").alias("plane_engines"),
    )
    return _one_row_per_key(typed, "tailnum", PLANE_FIELDS)


def airport_lookup(airports: DataFrame) -> DataFrame:
    """Destination attributes keyed by FAA code: :data:`AIRPORT_FIELDS`."""
    typed = airports.select(
        F.trim("faa").alias("faa"),
        _number(airports, "lat").alias("dest_lat"),
        _number(airports, "lon").alias("dest_lon"),
        _number(airports, "alt").alias("dest_alt"),
    )
    return _one_row_per_key(typed, "faa", AIRPORT_FIELDS)


def weather_by_hour(weather: DataFrame) -> DataFrame:
    """One weather observation per (origin, hour); repeated observations are averaged."""
    typed = weather.select(
        F.trim("origin").alias("origin"),
        F.trim("time_hour").try_cast("timestamp").alias("time_hour"),
        *[_number(weather, c).alias(c) for c in WEATHER_FIELDS],
    ).where(F.col("origin").isNotNull() & F.col("time_hour").isNotNull())
    return typed.groupBy("origin", "time_hour").agg(*[F.avg(c).alias(c) for c in WEATHER_FIELDS])


def _minutes(hhmm: Column) -> Column:
    return (F.floor(hhmm / 100) * 60 + F.pmod(hhmm, F.lit(100))).cast("double")


def _category(col: Column) -> Column:
    return F.coalesce(F.nullif(col.cast("string"), F.lit("")), F.lit(MISSING))


def label(flights: DataFrame) -> Column:
    """1 when the flight arrived > 15 min late, or was cancelled (no dep_time) or diverted
    (departed, no arrival delay): a traveller does not arrive on time in any of these."""
    late = F.col("arr_delay") > DELAY_THRESHOLD_MINUTES
    cancelled_or_diverted = F.col("dep_time").isNull() | F.col("arr_delay").isNull()
    return F.when(late | cancelled_or_diverted, 1).otherwise(0).cast("int")


def with_split(flights: DataFrame, seed: int) -> DataFrame:
    """``flights`` with their :data:`SPLIT`: ``train`` / ``validation`` / ``test`` from a seeded
    hash of the flight key. The job gives every row its split in the validation pass, so that
    the cache holds it: each split's query then filters on a column rather than hashing every
    cached row's key again (x10: the scan stage of the validation and test splits' writes took
    1.6 s each, 0.75 s now)."""
    return flights.withColumn(SPLIT, _split(seed))


def _split(seed: int) -> Column:
    bucket = F.pmod(F.xxhash64(*[F.col(k) for k in FLIGHT_KEY], F.lit(seed)), F.lit(100))
    train = SPLIT_PERCENTAGES["train"]
    validation = train + SPLIT_PERCENTAGES["validation"]
    return F.when(bucket < train, "train").when(bucket < validation, "validation").otherwise("test")


def test_requests(flights: DataFrame, weather: DataFrame, seed: int) -> DataFrame:
    """Every test-split flight (of ``flights``, :func:`with_split`) as a caller sends it -- its own
    fields (:data:`FLIGHT_FIELDS`) and the origin's weather that hour (:data:`WEATHER_FIELDS`) --
    with its label and its place in a seeded hash order (:data:`HOLDOUT_ORDER`): the evaluation
    scores them all through the predictor, and the first of that order are the records a canary
    analysis replays (the same input gives the same records)."""
    joined = flights.where(F.col(SPLIT) == "test").join(F.broadcast(weather), ["origin", "time_hour"], "left")
    order = F.xxhash64(*[F.col(k) for k in FLIGHT_KEY], F.lit(seed + 1))
    return joined.select(
        *FLIGHT_FIELDS, *WEATHER_FIELDS, label(joined).alias(LABEL_COLUMN), order.alias(HOLDOUT_ORDER)
    )


def raw_features(
    flights: DataFrame,
    weather: DataFrame,
    planes: DataFrame,
    airports: DataFrame,
    passthrough: Sequence[str] = (),
) -> DataFrame:
    """flights (:func:`with_split`) ⋈ weather (origin, time_hour) ⋈ planes (tailnum) ⋈ airports
    (dest).

    The lookup tables are broadcast: they stay small however many flights there are (a year of
    hourly weather at three airports, the fleet, the airports), so the flights are never
    shuffled for the joins. Left joins: a flight is never lost to a missing weather, plane or
    airport row; those features are then missing and get imputed. Returns the label, the split
    and one column per raw feature (:data:`CATEGORICAL_FEATURES` strings,
    :data:`NUMERIC_FEATURES` doubles), plus the ``passthrough`` flight columns (e.g. the flight
    key, to match rows in tests).
    """
    joined = (
        flights.join(F.broadcast(weather), ["origin", "time_hour"], "left")
        .join(F.broadcast(planes), "tailnum", "left")
        .join(F.broadcast(airports), F.col("dest") == F.col("faa"), "left")
    )
    date = F.make_date(F.col("year").cast("int"), F.col("month").cast("int"), F.col("day").cast("int"))
    dep = _minutes(F.col("sched_dep_time"))
    arr = _minutes(F.col("sched_arr_time"))
    categorical = {
        "carrier": _category(F.col("carrier")),
        "origin": _category(F.col("origin")),
        "dest": _category(F.col("dest")),
        "dep_hour": F.floor(F.col("sched_dep_time") / 100).cast("int").cast("string"),
        "day_of_week": (F.weekday(date) + 1).cast("string"),
        "plane_manufacturer": _category(F.col("plane_manufacturer")),
        "plane_engine": _category(F.col("plane_engine")),
    }
    numeric = {
        "month": F.col("month"),
        "day_of_year": F.dayofyear(date).cast("double"),
        "dep_minute_of_day": dep,
        "arr_minute_of_day": arr,
        "scheduled_minutes": F.pmod(arr - dep, F.lit(float(MINUTES_PER_DAY))),
        "distance": F.col("distance"),
        "plane_age": F.col("year") - F.col("plane_year"),
        "plane_seats": F.col("plane_seats"),
        "plane_engines": F.col("plane_engines"),
        **{name: F.col(name) for name in AIRPORT_FIELDS},
        **{name: F.col(name) for name in WEATHER_FIELDS},
    }
    assert tuple(categorical) == CATEGORICAL_FEATURES and tuple(numeric) == NUMERIC_FEATURES
    return joined.select(
        *passthrough,
        label(joined).alias(LABEL_COLUMN),
        F.col(SPLIT),
        *[col.alias(name) for name, col in categorical.items()],
        *[col.cast("double").alias(name) for name, col in numeric.items()],
    )


def fit_encoding(statistics: TrainStatistics, extras: dict | None = None) -> FeatureSpec:
    """The encoding fitted on the training split's statistics, as the feature spec.

    - Vocabularies: every value seen in training, most frequent first, ties by value (Spark's
      ``StringIndexer`` with ``frequencyDesc``); unseen values get the out-of-vocabulary index.
    - Imputation: the training median of the values present (Spark's ``Imputer``).
    - Scaling: the mean and sample standard deviation *after* imputation (Spark's
      ``StandardScaler`` on the imputed column), from the values' own mean and variance: the
      imputed rows all sit at the median.

    A numeric feature with no value at all in training (e.g. a small sample of a station that
    never reports gusts) has no median; it is fitted as a constant 0, so it encodes to 0.0 at
    training and serving time alike instead of failing the job.
    """
    numeric = []
    for name in NUMERIC_FEATURES:
        stats = statistics.numeric[name]
        if stats.count == 0 or stats.mean is None or stats.median is None:
            logger.warning("no training values for %s: encoded as constant 0", name)
            numeric.append(NumericFeature(name=name, impute_value=0.0, mean=0.0, std=0.0))
            continue
        present, missing, median = stats.count, statistics.rows - stats.count, stats.median
        rows = present + missing
        mean = (present * stats.mean + missing * median) / rows
        # Sum of squared deviations of the imputed column: the values' own, plus the shift
        # between their mean and the imputed rows' (Chan et al.'s parallel variance).
        squares = stats.variance * (present - 1) + (stats.mean - median) ** 2 * present * missing / rows
        std = math.sqrt(squares / (rows - 1)) if rows > 1 else 0.0
        numeric.append(NumericFeature(name=name, impute_value=median, mean=mean, std=std))
    return FeatureSpec(
        categorical=tuple(
            CategoricalFeature(
                name=name, vocabulary=tuple(value for value, _ in statistics.categorical[name])
            )
            for name in CATEGORICAL_FEATURES
        ),
        numeric=tuple(numeric),
        extras=extras or {},
    )


def encode(spec: FeatureSpec, features: DataFrame, passthrough: Sequence[str] = ()) -> DataFrame:
    """The shard columns: label, split, ``cat__*`` int32 indices, ``num__*`` float32 scaled values
    -- the spec applied as serving applies it
    (:meth:`kfstack_examples.flights.feature_spec.FeatureSpec.encode`)."""

    def index(feature: CategoricalFeature) -> Column:
        lookup = F.create_map(*[F.lit(x) for i, value in enumerate(feature.vocabulary) for x in (value, i)])
        found = lookup[F.col(feature.name)] if feature.vocabulary else F.lit(None)
        return F.coalesce(found, F.lit(feature.oov_index)).cast("int").alias(feature.column)

    def scaled(feature: NumericFeature) -> Column:
        if feature.std == 0.0:  # constant in training: 0.0, as serving (and StandardScaler) do
            return F.lit(0.0).cast("float").alias(feature.column)
        value = F.coalesce(F.col(feature.name), F.lit(feature.impute_value))
        return ((value - F.lit(feature.mean)) / F.lit(feature.std)).cast("float").alias(feature.column)

    return features.select(
        *passthrough,
        F.col(LABEL_COLUMN),
        F.col(SPLIT),
        *[index(feature) for feature in spec.categorical],
        *[scaled(feature) for feature in spec.numeric],
    )
