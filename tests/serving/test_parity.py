"""Training/serving parity on the test split: the raw rows the Spark job put in the test split
(its holdout file, which holds them all in this small run), sent to the predictor as a caller
would send them, give the features the job wrote and the probabilities the exported graph gives
on them.

Tolerances: categorical indices exactly equal; numeric features within 1e-5 (Spark scales in
double then writes float32, NumPy does the same in its own order); probabilities within 1e-5
(the same ONNX graph on inputs that agree to that).

The shards carry no flight key, so rows are paired by their feature values: both sides are
sorted by (categorical indices, numeric features rounded to 4 decimals). Equal multisets of
feature rows, then equal probabilities row by row, is what parity means here.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow.parquet as pq

from kfstack.training import shards
from kfstack_examples.flights.feature_spec import HOLDOUT_FILE, FeatureSpec
from kfstack_examples.flights.scoring import REQUEST_SCHEMA, FlightScorer, check_flights
from kfstack_examples.flights.training.settings import MODEL_FILE


def _onnx_scores(model_dir: str, features_dir: str) -> np.ndarray:
    """The exported graph run by onnxruntime on the test shards, as the trainer's own validation
    scores it: the Spark features, not the predictor's transform."""
    import onnxruntime

    spec = FeatureSpec.load(features_dir)
    session = onnxruntime.InferenceSession(
        os.path.join(model_dir, MODEL_FILE), providers=["CPUExecutionProvider"]
    )
    categorical, numeric, _labels = shards.read_split(spec, f"{features_dir}/test")
    return session.run(None, {"categorical": categorical, "numeric": numeric})[0]


def _pairing(categorical: np.ndarray, numeric: np.ndarray) -> np.ndarray:
    keys = [np.round(numeric[:, j], 4) for j in reversed(range(numeric.shape[1]))]
    keys += [categorical[:, j] for j in reversed(range(categorical.shape[1]))]
    return np.lexsort(keys)


def test_predictor_matches_the_spark_features_and_the_evaluation_on_the_test_split(trained, predictor):
    spec = FeatureSpec.load(trained["features"])
    # The job's holdout holds the test split's rows as requests (all of them in this small run).
    requests = pq.read_table(os.path.join(trained["features"], HOLDOUT_FILE)).to_pylist()
    labels = np.array([request.pop("label") for request in requests])
    records = REQUEST_SCHEMA.from_v1({"instances": requests})
    check_flights(records)  # every row the job kept is a valid request

    spark_categorical, spark_numeric, spark_labels = shards.read_split(spec, f"{trained['features']}/test")
    assert len(records) == len(spark_categorical) > 100

    served_categorical, served_numeric = FlightScorer(trained["model"]).features(records)
    ours, theirs = _pairing(served_categorical, served_numeric), _pairing(spark_categorical, spark_numeric)
    np.testing.assert_array_equal(served_categorical[ours], spark_categorical[theirs])
    np.testing.assert_allclose(served_numeric[ours], spark_numeric[theirs], rtol=0, atol=1e-5)
    np.testing.assert_array_equal(labels[ours], spark_labels[theirs])

    # The predictor over HTTP against the graph's scoring of the shards.
    response = predictor.v1(requests)
    assert response.status_code == 200, response.text
    served = np.asarray(response.json()["predictions"])
    evaluated = _onnx_scores(trained["model"], trained["features"])
    np.testing.assert_allclose(served[ours], evaluated[theirs], rtol=0, atol=1e-5)
