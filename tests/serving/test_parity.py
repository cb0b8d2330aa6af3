"""Training/serving parity on the test split: the raw rows the Spark job put in the test split,
sent to the predictor as a caller would send them, give the features the job wrote and the
probabilities the evaluation step computed.

Tolerances: categorical indices exactly equal; numeric features within 1e-5 (Spark scales in
double then writes float32, NumPy does the same in its own order); probabilities within 1e-5
(the same ONNX graph on inputs that agree to that).

The shards carry no flight key, so rows are paired by their feature values: both sides are
sorted by (categorical indices, numeric features rounded to 4 decimals). Equal multisets of
feature rows, then equal probabilities row by row, is what parity means here.
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import functions as F

from kfstack.components.evaluation.evaluate_model.core import score
from kfstack.features import FeatureSpec
from kfstack.flights.scoring import REQUEST_FIELDS, REQUEST_SCHEMA, FlightScorer, check_flights
from kfstack.spark_jobs.flights_features import featurize, sources
from kfstack.spark_jobs.flights_features.validation import FLIGHT_KEY, tag_flights, valid_rows
from kfstack.training import shards

FIELD_NAMES = [f.name for f in REQUEST_FIELDS]


def _test_split_requests(spark, input_dir: str, staging: str, seed: int) -> list[dict]:
    """The test split's valid flights as requests: their own fields and the origin's weather."""
    tables = sources.read_tables(spark, input_dir, staging)
    carriers = [r["carrier"] for r in tables["airlines"].select(F.trim("carrier").alias("carrier")).collect()]
    flights = valid_rows(tag_flights(tables["flights"], carriers))
    flights = flights.withColumn("flight_id", F.concat_ws("|", *FLIGHT_KEY))
    weather = featurize.weather_by_hour(tables["weather"])
    raw = featurize.raw_features(
        flights,
        weather,
        featurize.plane_lookup(tables["planes"]),
        featurize.airport_lookup(tables["airports"]),
        seed=seed,
        passthrough=["flight_id"],
    )
    test_ids = raw.where(F.col(featurize.SPLIT) == "test").select("flight_id")
    rows = flights.join(test_ids, "flight_id").join(weather, ["origin", "time_hour"], "left").toPandas()
    return [
        {name: (None if value != value else value) for name, value in row.items() if name in FIELD_NAMES}
        for row in rows.to_dict("records")
    ]


def _pairing(categorical: np.ndarray, numeric: np.ndarray) -> np.ndarray:
    keys = [np.round(numeric[:, j], 4) for j in reversed(range(numeric.shape[1]))]
    keys += [categorical[:, j] for j in reversed(range(categorical.shape[1]))]
    return np.lexsort(keys)


def test_predictor_matches_the_spark_features_and_the_evaluation_on_the_test_split(
    spark, trained, predictor, tmp_path
):
    spec = FeatureSpec.load(trained["features"])
    seed = spec.extras["split"]["seed"]
    requests = _test_split_requests(spark, trained["input"], str(tmp_path / "staging"), seed)
    records = REQUEST_SCHEMA.from_v1({"instances": requests})
    check_flights(records)  # every row the job kept is a valid request

    spark_categorical, spark_numeric, _ = shards.read_split(spec, f"{trained['features']}/test")
    assert len(records) == len(spark_categorical) > 100

    served_categorical, served_numeric = FlightScorer(trained["model"]).features(records)
    ours, theirs = _pairing(served_categorical, served_numeric), _pairing(spark_categorical, spark_numeric)
    np.testing.assert_array_equal(served_categorical[ours], spark_categorical[theirs])
    np.testing.assert_allclose(served_numeric[ours], spark_numeric[theirs], rtol=0, atol=1e-5)

    # The predictor over HTTP against the evaluation step's scoring of the shards.
    response = predictor.v1(requests)
    assert response.status_code == 200, response.text
    served = np.asarray(response.json()["predictions"])
    _, evaluated = score(trained["model"], trained["features"])
    np.testing.assert_allclose(served[ours], evaluated[theirs], rtol=0, atol=1e-5)
