"""Small real models of each standard format, trained on data scikit-learn ships (nothing is
downloaded): a digits classifier as a scikit-learn pickle and as the same linear model in ONNX
(so the two must agree), and a breast-cancer booster in XGBoost's JSON format."""

from __future__ import annotations

import os

import numpy as np

DIGITS_TEST_ROWS = 297  # the last rows of the 1,797 digits, never trained on


def digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return x.astype(np.float64), y.astype(np.int64)


def sklearn_digits(model_dir: str) -> object:
    """Pixels scaled by their largest value, then a logistic regression, on the first 1,500
    digits: ``model.joblib`` in ``model_dir``."""
    import joblib
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    x, y = digits()
    model = make_pipeline(MaxAbsScaler(), LogisticRegression(max_iter=300))
    model.fit(x[:-DIGITS_TEST_ROWS], y[:-DIGITS_TEST_ROWS])
    os.makedirs(model_dir, exist_ok=True)
    joblib.dump(model, os.path.join(model_dir, "model.joblib"))
    return model


def onnx_digits(model_dir: str, sklearn_model: object) -> None:
    """The same model as an ONNX graph, ``softmax(pixels / scale @ W + b)``, as ``model.onnx``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    scaler, regression = sklearn_model.steps[0][1], sklearn_model.steps[1][1]  # type: ignore[attr-defined]
    scale = np.asarray(scaler.scale_, dtype=np.float32)
    weights = np.asarray(regression.coef_, dtype=np.float32).T
    bias = np.asarray(regression.intercept_, dtype=np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Div", ["pixels", "scale"], ["scaled"]),
            helper.make_node("MatMul", ["scaled", "weights"], ["product"]),
            helper.make_node("Add", ["product", "bias"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        ],
        "digits",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10])],
        initializer=[
            numpy_helper.from_array(scale, "scale"),
            numpy_helper.from_array(weights, "weights"),
            numpy_helper.from_array(bias, "bias"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(model_dir, exist_ok=True)
    onnx.save(model, os.path.join(model_dir, "model.onnx"))


def xgboost_cancer(model_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """A booster on most of the breast-cancer rows, ``model.json``; returns the held-out rows."""
    import xgboost
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    booster = xgboost.train(
        {"objective": "binary:logistic", "max_depth": 3, "nthread": 1},
        xgboost.DMatrix(x[:450], label=y[:450]),
        num_boost_round=20,
    )
    os.makedirs(model_dir, exist_ok=True)
    booster.save_model(os.path.join(model_dir, "model.json"))
    return x[450:], y[450:]
