"""FeatureSpec.encode: vocabulary lookups with the out-of-vocabulary bucket, imputation of
missing numbers, scaling, and a feature constant in training encoding as 0."""

from __future__ import annotations

import math

import numpy as np

from kfstack_examples.flights.feature_spec import CategoricalFeature, FeatureSpec, NumericFeature

SPEC = FeatureSpec(
    categorical=(CategoricalFeature("carrier", ("AA", "UA")),),
    numeric=(NumericFeature("distance", 1000.0, 900.0, 200.0), NumericFeature("constant", 7.0, 7.0, 0.0)),
)


def test_encode_looks_up_imputes_and_scales():
    categorical, numeric = SPEC.encode(
        {"carrier": ["UA", "ZZ", "AA"], "distance": [1100.0, None, math.nan], "constant": [7.0, 3.0, None]}
    )
    assert categorical.dtype == np.int64
    assert categorical[:, 0].tolist() == [1, 2, 0]  # ZZ: the out-of-vocabulary bucket, len(vocabulary)
    assert numeric.dtype == np.float32
    np.testing.assert_array_equal(numeric[:, 0], np.float32([1.0, 0.5, 0.5]))  # missing -> 1000 -> 0.5
    np.testing.assert_array_equal(numeric[:, 1], np.float32([0.0, 0.0, 0.0]))


def test_encode_of_no_rows_has_the_model_shapes():
    categorical, numeric = SPEC.encode({"carrier": [], "distance": [], "constant": []})
    assert categorical.shape == (0, 1)
    assert numeric.shape == (0, 2)
