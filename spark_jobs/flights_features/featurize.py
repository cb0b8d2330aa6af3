"""Joins, raw features, label, split and the fitted MLlib encoding of the flights data.

Raw features are the Spark twin of :func:`kfstack.flights.features.raw_features` (serving computes
them with NumPy; a parity test holds the two together). The encoding is a Spark ML ``Pipeline``
fitted on the *training split only*: ``StringIndexer`` (vocabularies, most frequent first, with
an extra out-of-vocabulary index), ``Imputer`` (training medians) and ``StandardScaler`` (training
mean and sample standard deviation). Its fitted statistics become the feature spec.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import cast

from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import (
    Imputer,
    ImputerModel,
    StandardScaler,
    StandardScalerModel,
    StringIndexer,
    StringIndexerModel,
    VectorAssembler,
)
from pyspark.ml.functions import vector_to_array
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kfstack.features import (
    CATEGORICAL_PREFIX,
    LABEL_COLUMN,
    NUMERIC_PREFIX,
    CategoricalFeature,
    FeatureSpec,
    NumericFeature,
)
from kfstack.flights.features import (
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
from kfstack.spark_jobs.flights_features.validation import FLIGHT_KEY

logger = logging.getLogger(__name__)

SPLIT = "split"
# Share of flights per split, by a hash of the flight key: stable across runs, input order and
# partitioning, and a flight never moves between splits when more data arrives.
SPLIT_PERCENTAGES = {"train": 80, "validation": 10, "test": 10}

_INDEXED = "__idx_"
_IMPUTED = "__imp_"
_VECTOR = "__numeric_vector"
_SCALED = "__numeric_scaled"


def _number(df: DataFrame, name: str) -> Column:
    return F.trim(df[name]).try_cast("double")


def plane_lookup(planes: DataFrame) -> DataFrame:
    """Plane attributes keyed by ``tailnum`` (one row per tailnum): :data:`PLANE_FIELDS`."""
    typed = planes.select(
        F.trim("tailnum").alias("tailnum"),
        _number(planes, "year").alias("plane_year"),
        F.col("manufacturer").alias("plane_manufacturer"),
        F.col("engine").alias("plane_engine"),
        _number(planes, "seats").alias("plane_seats"),
        _number(planes, "engines").alias("plane_engines"),
    ).where(F.col("tailnum").isNotNull())
    return typed.groupBy("tailnum").agg(*[F.first(c, ignorenulls=True).alias(c) for c in PLANE_FIELDS])


def airport_lookup(airports: DataFrame) -> DataFrame:
    """Destination attributes keyed by FAA code: :data:`AIRPORT_FIELDS`."""
    typed = airports.select(
        F.trim("faa").alias("faa"),
        _number(airports, "lat").alias("dest_lat"),
        _number(airports, "lon").alias("dest_lon"),
        _number(airports, "alt").alias("dest_alt"),
    ).where(F.col("faa").isNotNull())
    return typed.groupBy("faa").agg(*[F.first(c, ignorenulls=True).alias(c) for c in AIRPORT_FIELDS])


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


def split_column(seed: int) -> Column:
    """``train`` / ``validation`` / ``test`` from a seeded hash of the flight key."""
    bucket = F.pmod(F.xxhash64(*[F.col(k) for k in FLIGHT_KEY], F.lit(seed)), F.lit(100))
    train = SPLIT_PERCENTAGES["train"]
    validation = train + SPLIT_PERCENTAGES["validation"]
    return F.when(bucket < train, "train").when(bucket < validation, "validation").otherwise("test")


def holdout_requests(flights: DataFrame, weather: DataFrame, seed: int, limit: int) -> DataFrame:
    """Up to ``limit`` test-split flights as a caller sends them -- their own fields
    (:data:`FLIGHT_FIELDS`) and the origin's weather that hour (:data:`WEATHER_FIELDS`) -- with
    their label: the records a canary analysis replays. Picked in a seeded hash order, so the
    same input gives the same records."""
    joined = flights.where(split_column(seed) == "test").join(weather, ["origin", "time_hour"], "left")
    order = F.xxhash64(*[F.col(k) for k in FLIGHT_KEY], F.lit(seed + 1))
    return (
        joined.select(
            *FLIGHT_FIELDS, *WEATHER_FIELDS, label(joined).alias(LABEL_COLUMN), order.alias("_order")
        )
        .orderBy("_order")
        .limit(limit)
        .drop("_order")
    )


def raw_features(
    flights: DataFrame,
    weather: DataFrame,
    planes: DataFrame,
    airports: DataFrame,
    seed: int,
    passthrough: Sequence[str] = (),
) -> DataFrame:
    """flights ⋈ weather (origin, time_hour) ⋈ planes (tailnum) ⋈ airports (dest).

    Left joins: a flight is never lost to a missing weather, plane or airport row; those
    features are then missing and get imputed. Returns the label, the split and one column per
    raw feature (:data:`CATEGORICAL_FEATURES` strings, :data:`NUMERIC_FEATURES` doubles),
    plus the ``passthrough`` flight columns (e.g. the flight key, to match rows in tests).
    """
    joined = (
        flights.join(weather, ["origin", "time_hour"], "left")
        .join(planes, "tailnum", "left")
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
        split_column(seed).alias(SPLIT),
        *[col.alias(name) for name, col in categorical.items()],
        *[col.cast("double").alias(name) for name, col in numeric.items()],
    )


def encoding_pipeline() -> Pipeline:
    """Unfitted: vocabularies, medians, mean/std. Fit it on the training split only."""
    return Pipeline(
        stages=[
            StringIndexer(
                inputCols=list(CATEGORICAL_FEATURES),
                outputCols=[_INDEXED + n for n in CATEGORICAL_FEATURES],
                handleInvalid="keep",  # unseen values -> index len(vocabulary): the OOV bucket
                stringOrderType="frequencyDesc",
            ),
            Imputer(
                inputCols=list(NUMERIC_FEATURES),
                outputCols=[_IMPUTED + n for n in NUMERIC_FEATURES],
                strategy="median",
            ),
            VectorAssembler(inputCols=[_IMPUTED + n for n in NUMERIC_FEATURES], outputCol=_VECTOR),
            StandardScaler(inputCol=_VECTOR, outputCol=_SCALED, withMean=True, withStd=True),
        ]
    )


def fit_encoding(train: DataFrame) -> PipelineModel:
    """Fits :func:`encoding_pipeline` on the training split.

    A numeric feature with no value at all in training (e.g. a small sample of a station that
    never reports gusts) has no median; it is fitted as a constant 0, so it encodes to 0.0 at
    training and serving time alike instead of failing the job.
    """
    present = train.agg(*[F.count(n).alias(n) for n in NUMERIC_FEATURES]).collect()[0].asDict()
    empty = [name for name, count in present.items() if count == 0]
    if empty:
        logger.warning("no training values for %s: encoded as constant 0", ", ".join(empty))
        train = train.fillna(0.0, subset=empty)
    return encoding_pipeline().fit(train)


def feature_spec(model: PipelineModel, extras: dict) -> FeatureSpec:
    """The fitted pipeline's statistics as the serving contract."""
    # The stages of encoding_pipeline(), fitted: index, impute, assemble, scale.
    indexer = cast(StringIndexerModel, model.stages[0])
    imputer = cast(ImputerModel, model.stages[1])
    scaler = cast(StandardScalerModel, model.stages[3])
    surrogates = imputer.surrogateDF.collect()[0].asDict()
    return FeatureSpec(
        categorical=tuple(
            CategoricalFeature(name=name, vocabulary=tuple(labels))
            for name, labels in zip(CATEGORICAL_FEATURES, indexer.labelsArray, strict=False)
        ),
        numeric=tuple(
            NumericFeature(
                name=name,
                impute_value=float(surrogates[name]),
                mean=float(mean),
                std=float(std),
            )
            for name, mean, std in zip(
                NUMERIC_FEATURES, scaler.mean.toArray(), scaler.std.toArray(), strict=True
            )
        ),
        extras=extras,
    )


def encode(model: PipelineModel, features: DataFrame, passthrough: Sequence[str] = ()) -> DataFrame:
    """The shard columns: label, ``cat__*`` int32 indices, ``num__*`` float32 scaled values."""
    transformed = model.transform(features)
    scaled = vector_to_array(F.col(_SCALED), dtype="float32")
    return transformed.select(
        *passthrough,
        F.col(LABEL_COLUMN),
        F.col(SPLIT),
        *[F.col(_INDEXED + n).cast("int").alias(CATEGORICAL_PREFIX + n) for n in CATEGORICAL_FEATURES],
        *[scaled[i].alias(NUMERIC_PREFIX + n) for i, n in enumerate(NUMERIC_FEATURES)],
    )
