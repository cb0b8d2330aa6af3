"""Label, split, raw features and the fitted encoding, on tiny DataFrames."""

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from kfstack_examples.flights.feature_spec import FeatureSpec
from kfstack_examples.flights.features import MISSING
from kfstack_examples.flights.features_job import featurize
from kfstack_examples.flights.features_job.statistics import train_statistics
from kfstack_examples.flights.features_job.validation import tag_flights, valid_rows
from tests.spark_jobs.conftest import flight, flights_frame


def featurised(spark, rows, seed=42):
    flights = valid_rows(tag_flights(flights_frame(spark, rows), ["UA", "AA"]))
    weather = spark.createDataFrame(
        [
            ("EWR", "2013-01-01T10:00:00Z", "39.0", "28.0", "64.4", "260", "12.6", "NA", "0", "1011.9", "10"),
            # A repeated observation for the same hour is averaged, not joined twice.
            ("EWR", "2013-01-01T10:00:00Z", "41.0", "28.0", "64.4", "260", "12.6", "NA", "0", "1011.9", "10"),
        ],
        "origin string, time_hour string, temp string, dewp string, humid string, wind_dir string, "
        "wind_speed string, wind_gust string, precip string, pressure string, visib string",
    ).replace("NA", None)
    planes = spark.createDataFrame(
        [("N14228", "1999", "Fixed wing multi engine", "BOEING", "737-824", "2", "149", "NA", "Turbo-fan")],
        "tailnum string, year string, type string, manufacturer string, model string, "
        "engines string, seats string, speed string, engine string",
    )
    airports = spark.createDataFrame(
        [("IAH", "George Bush Intercontinental", "29.984", "-95.341", "97", "-6", "A", "America/Chicago")],
        "faa string, name string, lat string, lon string, alt string, tz string, dst string, tzone string",
    )
    return featurize.raw_features(
        featurize.with_split(flights, seed),
        featurize.weather_by_hour(weather),
        featurize.plane_lookup(planes),
        featurize.airport_lookup(airports),
    )


def test_label_late_cancelled_and_diverted_are_positive(spark):
    rows = [
        flight(flight="1", arr_delay="11"),  # on time
        flight(flight="2", arr_delay="16"),  # late
        flight(flight="3", arr_delay="15"),  # 15 is not > 15
        flight(
            flight="4",
            dep_time=None,
            dep_delay=None,
            arr_time=None,  # cancelled
            arr_delay=None,
            air_time=None,
        ),
        flight(flight="5", arr_time=None, arr_delay=None, air_time=None),  # diverted
    ]
    flights = valid_rows(tag_flights(flights_frame(spark, rows), ["UA"]))
    by_flight = {
        int(r["flight"]): r["label"]
        for r in flights.select("flight", featurize.label(flights).alias("label")).collect()
    }
    assert by_flight == {1: 0, 2: 1, 3: 0, 4: 1, 5: 1}


def test_raw_features_of_a_known_flight(spark):
    row = featurised(spark, [flight(sched_dep_time="2330", sched_arr_time="105")]).collect()[0]
    assert row["carrier"] == "UA" and row["dest"] == "IAH"
    assert row["dep_hour"] == "23"
    assert row["day_of_week"] == "2"  # 2013-01-01 was a Tuesday (ISO 2)
    assert row["day_of_year"] == 1.0
    assert row["dep_minute_of_day"] == 23 * 60 + 30
    assert row["scheduled_minutes"] == 95.0  # 23:30 -> 01:05 wraps past midnight
    assert row["plane_age"] == 14.0  # built 1999, flown 2013
    assert row["plane_manufacturer"] == "BOEING"
    assert row["temp"] == 40.0  # two observations averaged
    assert row["dest_lat"] == 29.984


def test_unknown_plane_and_airport_become_missing_not_dropped(spark):
    df = featurised(
        spark, [flight(tailnum="N00000", dest="XYZ", time_hour="2013-06-01T10:00:00Z", month="6")]
    )
    row = df.collect()[0]
    assert row["plane_manufacturer"] == MISSING and row["plane_age"] is None
    assert row["dest_lat"] is None and row["temp"] is None


@pytest.mark.slow
def test_split_is_reproducible_and_close_to_80_10_10(spark):
    rows = [flight(flight=str(i)) for i in range(2000)]
    first = {r["distance"]: r for r in featurised(spark, rows).collect()}
    splits = [r["split"] for r in featurised(spark, rows).collect()]
    again = [r["split"] for r in featurised(spark, rows).collect()]
    assert splits == again
    share = {s: splits.count(s) / len(splits) for s in ("train", "validation", "test")}
    assert 0.76 < share["train"] < 0.84 and 0.07 < share["validation"] < 0.13
    assert first  # every row has a split
    other_seed = [r["split"] for r in featurised(spark, rows, seed=7).collect()]
    assert other_seed != splits


@pytest.mark.slow
def test_encoding_is_fitted_on_train_only(spark):
    rows = [flight(flight=str(i), carrier="UA" if i % 2 else "AA", distance=str(100 + i)) for i in range(400)]
    raw = featurised(spark, rows)
    train = raw.where(F.col("split") == "train")
    spec = featurize.fit_encoding(train_statistics(train))
    distances = [r["distance"] for r in train.collect()]
    distance = next(f for f in spec.numeric if f.name == "distance")
    assert abs(distance.mean - sum(distances) / len(distances)) < 1e-6
    carrier = next(f for f in spec.categorical if f.name == "carrier")
    assert set(carrier.vocabulary) == {"UA", "AA"}
    # Values never seen in training land in the out-of-vocabulary bucket.
    encoded = featurize.encode(spec, raw.withColumn("carrier", F.lit("DL"))).collect()
    assert {r["cat__carrier"] for r in encoded} == {carrier.oov_index}
    assert FeatureSpec.from_dict(spec.to_dict()) == spec
    # No gust was ever reported in this data: a constant 0 rather than a failed job.
    gust = next(f for f in spec.numeric if f.name == "wind_gust")
    assert (gust.impute_value, gust.mean, gust.std) == (0.0, 0.0, 0.0)


@pytest.mark.slow
def test_the_fit_is_what_spark_ml_fits(spark):
    """Vocabularies (ties among equally frequent values too), medians and the mean and standard
    deviation after imputation, against Spark ML's StringIndexer, Imputer and StandardScaler
    fitted on the same rows."""
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import Imputer, StandardScaler, StringIndexer, VectorAssembler

    from kfstack_examples.flights.features import CATEGORICAL_FEATURES, NUMERIC_FEATURES

    rows = [
        flight(
            flight=str(i),
            carrier="UA" if i % 3 else "AA",
            distance=str(100 + (i * 37) % 500),
            # Missing in some rows: imputed with the median before scaling.
            air_time=None if i % 4 == 0 else str(30 + i % 200),
            arr_delay=None if i % 7 == 0 else str(i % 40 - 10),
        )
        for i in range(600)
    ]
    train = featurised(spark, rows).where(F.col("split") == "train").fillna(0.0, subset=["wind_gust"])
    # Three origins exactly as frequent: the vocabulary orders them by value, as StringIndexer does.
    position = F.row_number().over(Window.orderBy(F.monotonically_increasing_id()))
    train = train.withColumn("_position", position)
    tied = train.count() // 3 * 3
    train = (
        train.where(F.col("_position") <= tied)
        .withColumn(
            "origin", F.element_at(F.array(*map(F.lit, ("LGA", "EWR", "JFK"))), F.col("_position") % 3 + 1)
        )
        .drop("_position")
        .cache()
    )
    spec = featurize.fit_encoding(train_statistics(train))

    fitted = Pipeline(
        stages=[
            StringIndexer(
                inputCols=list(CATEGORICAL_FEATURES),
                outputCols=[f"i_{n}" for n in CATEGORICAL_FEATURES],
                stringOrderType="frequencyDesc",
            ),
            Imputer(
                inputCols=list(NUMERIC_FEATURES),
                outputCols=[f"m_{n}" for n in NUMERIC_FEATURES],
                strategy="median",
            ),
            VectorAssembler(inputCols=[f"m_{n}" for n in NUMERIC_FEATURES], outputCol="v"),
            StandardScaler(inputCol="v", outputCol="s", withMean=True, withStd=True),
        ]
    ).fit(train)
    indexer, imputer, _, scaler = fitted.stages
    assert [f.vocabulary for f in spec.categorical] == [tuple(labels) for labels in indexer.labelsArray]
    assert spec.categorical[CATEGORICAL_FEATURES.index("origin")].vocabulary == ("EWR", "JFK", "LGA")
    medians = imputer.surrogateDF.collect()[0].asDict()
    for feature, mean, std in zip(spec.numeric, scaler.mean.toArray(), scaler.std.toArray(), strict=True):
        assert feature.impute_value == pytest.approx(medians[feature.name], rel=1e-3), feature.name
        assert feature.mean == pytest.approx(mean, rel=1e-9, abs=1e-9), feature.name
        assert feature.std == pytest.approx(std, rel=1e-9, abs=1e-9), feature.name
