"""Generic evaluation: metrics by task, scored through the server that will serve the model.

Unit: binary, multiclass and regression metrics from every shape a server answers, undefined
ones named; what the component publishes on the UI's artifacts (``core.publish``). Real models:
the digits classifier as a scikit-learn pickle and as ONNX served as Triton would (the two
agree), a team's own kserve.Model taking records; the component under kfp.local.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kfstack.errors import InvalidParameterError
from kfstack.evaluation.task_metrics import evaluate
from kfstack.serving.scoring import evaluate_dataset, model_format_of

# --- metrics by task --------------------------------------------------------------------------
from tests.kfp_local import run_pipeline
from tests.serving import standard_models


def test_binary_from_probabilities_labels_or_predict_proba():
    labels = [0, 0, 1, 1]
    probabilities = evaluate("binary", labels, [0.1, 0.6, 0.4, 0.9])
    assert probabilities.metrics["auc"] == 0.75 and probabilities.metrics["accuracy"] == 0.5
    assert probabilities.confusion == [[1, 1], [1, 1]] and probabilities.roc is not None
    assert "log_loss" in probabilities.metrics
    proba_pairs = evaluate("binary", labels, [[0.9, 0.1], [0.4, 0.6], [0.6, 0.4], [0.1, 0.9]])
    assert proba_pairs.metrics == probabilities.metrics
    hard = evaluate("binary", labels, [0, 0, 1, 1])
    assert hard.metrics["accuracy"] == 1.0 and "log_loss" not in hard.metrics and hard.roc is None


def test_undefined_metrics_are_named_not_invented():
    result = evaluate("binary", [0, 0, 0], [0.1, 0.2, 0.3])
    assert result.metrics["auc"] is None and result.undefined["auc"] == "the labels hold one class"
    assert result.metrics["precision"] is None and result.metrics["recall"] is None
    assert "undefined (the labels hold one class)" in result.markdown("t")
    assert evaluate("regression", [2.0, 2.0], [1.0, 3.0]).undefined == {"r2": "the labels are constant"}


def test_multiclass_accuracy_macro_f1_and_confusion():
    labels = [0, 1, 2, 2]
    result = evaluate("multiclass", labels, [0, 2, 2, 2])
    assert result.metrics["accuracy"] == 0.75
    # F1 per class: 1, 0, 0.8 -> 0.6.
    assert result.metrics["macro_f1"] == pytest.approx(0.6)
    assert result.categories == ["0", "1", "2"] and result.confusion == [[1, 0, 0], [0, 0, 1], [0, 0, 2]]
    probabilities = [[0.8, 0.1, 0.1], [0.1, 0.2, 0.7], [0.1, 0.1, 0.8], [0.2, 0.2, 0.6]]
    from_softmax = evaluate("multiclass", labels, probabilities)
    assert from_softmax.metrics["accuracy"] == 0.75 and from_softmax.metrics["log_loss"] > 0


def test_regression_rmse_mae_r2():
    result = evaluate("regression", [1.0, 2.0, 3.0], [1.0, 2.0, 5.0])
    assert result.metrics["rmse"] == pytest.approx((4 / 3) ** 0.5)
    assert result.metrics["mae"] == pytest.approx(2 / 3)
    assert result.metrics["r2"] == pytest.approx(1 - 4 / 2)


@pytest.mark.parametrize(
    ("task", "labels", "predictions", "message"),
    [
        ("ranking", [1], [1], "task='ranking' is not one of binary"),
        ("binary", [], [], "no labelled rows"),
        ("binary", [0, 2], [0.1, 0.2], "needs labels 0 and 1"),
        ("binary", [0, 1], [0.1], r"binary predictions of shape \[1\] for 2 rows"),
        ("regression", [1.0], [float("nan")], "non-finite"),
    ],
)
def test_evaluations_that_cannot_be_made_say_why(task, labels, predictions, message):
    with pytest.raises(InvalidParameterError, match=message):
        evaluate(task, labels, predictions)


# --- through the model's server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    root = tmp_path_factory.mktemp("digits")
    model = standard_models.sklearn_digits(str(root / "sklearn"))
    standard_models.onnx_digits(str(root / "onnx"), model)
    x, y = standard_models.digits()
    rows = standard_models.DIGITS_TEST_ROWS
    table = pa.table({**{f"p{i}": x[-rows:, i] for i in range(64)}, "digit": y[-rows:]})
    pq.write_table(table, root / "holdout.parquet")
    expected = float((model.predict(x[-rows:]) == y[-rows:]).mean())
    return {"root": root, "holdout": str(root / "holdout.parquet"), "accuracy": expected}


def test_a_sklearn_model_and_its_onnx_twin_score_the_same(digits):
    common = {"dataset_uri": digits["holdout"], "task": "multiclass", "label_column": "digit"}
    pickled = evaluate_dataset(model_dir=str(digits["root"] / "sklearn"), model_format="sklearn", **common)
    onnx = evaluate_dataset(
        model_dir=str(digits["root"] / "onnx"), model_format="onnx", batch_size=100, **common
    )
    assert (
        pickled.metrics["accuracy"] == pytest.approx(digits["accuracy"]) and pickled.metrics["accuracy"] > 0.9
    )
    assert onnx.metrics["accuracy"] == pytest.approx(pickled.metrics["accuracy"])
    assert onnx.metrics["macro_f1"] == pytest.approx(pickled.metrics["macro_f1"])
    assert "log_loss" in onnx.metrics and len(onnx.confusion) == 10 and pickled.rows == 297


@pytest.fixture
def line_model(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parent))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "line.json").write_text(json.dumps({"slope": 2.0, "intercept": 1.0}))
    xs = np.linspace(0, 1, 20)
    pq.write_table(pa.table({"x": xs, "y": 2 * xs + 1 + 0.01, "note": ["n"] * 20}), tmp_path / "rows.parquet")
    return tmp_path


def test_a_custom_predictor_scores_records_through_the_teams_own_class(line_model):
    result = evaluate_dataset(
        model_dir=str(line_model / "model"),
        model_format="custom",
        custom_predictor="team_predictor:LinePredictor",
        dataset_uri=str(line_model / "rows.parquet"),
        task="regression",
        label_column="y",
        feature_columns=["x"],
        request_format="records",
        batch_size=7,
    )
    assert result.metrics["rmse"] == pytest.approx(0.01) and result.rows == 20


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model_format": "custom"}, "name the team's kserve.Model as custom_predictor"),
        ({"model_format": "custom", "custom_predictor": "team_predictor"}, "expected package.module:Class"),
        ({"model_format": "custom", "custom_predictor": "team_predictor:Nope"}, "no class 'Nope'"),
        ({"label_column": "z"}, "label_column='z' is not a column of the dataset"),
        ({"feature_columns": ["w"]}, "feature_columns: no column w"),
        ({"feature_columns": ["note"]}, "request_format=tensor needs numeric feature columns"),
        ({"request_format": "csv"}, "request_format='csv' is not one of tensor, records"),
    ],
)
def test_bad_parameters_are_named(line_model, overrides, message):
    arguments = {
        "model_dir": str(line_model / "model"),
        "model_format": "sklearn",
        "dataset_uri": str(line_model / "rows.parquet"),
        "task": "regression",
        "label_column": "y",
        **overrides,
    }
    with pytest.raises(InvalidParameterError, match=message):
        evaluate_dataset(**arguments)


def test_the_format_comes_from_the_training_steps_metadata():
    assert model_format_of("", {"model_format": "onnx"}) == "onnx"
    assert model_format_of("sklearn", {"model_format": "onnx"}) == "sklearn"
    with pytest.raises(InvalidParameterError, match="records none"):
        model_format_of("", {})


def test_publish_puts_the_figures_the_matrix_and_the_curve_on_the_uis_artifacts(tmp_path):
    from kfp.dsl import HTML, ClassificationMetrics, Markdown, Metrics

    from kfstack.components.evaluation.model_evaluation.core import publish

    result = evaluate("binary", [0, 0, 0, 1], [0.1, 0.6, 0.2, 0.9]).named(["on_time", "delayed"])
    metrics, classification, report, charts = Metrics(), ClassificationMetrics(), Markdown(), HTML()
    report.path, charts.path = str(tmp_path / "report.md"), str(tmp_path / "charts.html")
    publish(
        result, threshold=0.5, metrics=metrics, classification=classification, report=report, charts=charts
    )

    assert metrics.metadata["auc"] == 1.0 and metrics.metadata["rows"] == 4
    matrix = classification.metadata["confusionMatrix"]
    assert [spec["displayName"] for spec in matrix["annotationSpecs"]] == ["on_time", "delayed"]
    assert [row["row"] for row in matrix["rows"]] == [[2, 1], [0, 1]]
    assert classification.metadata["confidenceMetrics"]  # the ROC curve, binary with probabilities
    assert "| auc |" in (tmp_path / "report.md").read_text()
    page = (tmp_path / "charts.html").read_text()
    assert "predicted delayed at probability ≥ 0.5" in page and "<svg" in page
    # An undefined figure is logged as such, and a regression has no matrix nor curve.
    regression = evaluate("regression", [2.0, 2.0], [1.0, 3.0])
    metrics, classification = Metrics(), ClassificationMetrics()
    publish(
        regression,
        threshold=0.5,
        metrics=metrics,
        classification=classification,
        report=report,
        charts=charts,
    )
    assert metrics.metadata["r2"] == "undefined" and classification.metadata == {}


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_runs_under_kfp_local(digits, tmp_path):
    from kfp import dsl

    from kfstack.components.evaluation.model_evaluation.component import model_evaluation

    @dsl.pipeline(name="team-evaluation")
    def team_evaluation():
        model = dsl.importer(
            artifact_uri=str(digits["root"] / "onnx"),
            artifact_class=dsl.Model,
            metadata={"model_format": "onnx"},
        )
        data = dsl.importer(artifact_uri=digits["holdout"], artifact_class=dsl.Dataset)
        model_evaluation(model=model.output, dataset=data.output, task="multiclass", label_column="digit")

    run = run_pipeline(team_evaluation, tmp_path / "root")
    step = run / "model-evaluation"
    outputs = json.loads((step / "executor_output.json").read_text())["artifacts"]
    logged = outputs["evaluation_metrics"]["artifacts"][0]["metadata"]
    assert logged["accuracy"] == pytest.approx(digits["accuracy"]) and logged["rows"] == 297
    confusion = outputs["classification"]["artifacts"][0]["metadata"]["confusionMatrix"]
    assert len(confusion["annotationSpecs"]) == 10
    assert "| accuracy |" in (step / "evaluation_report").read_text()


def test_an_onnx_model_with_more_than_one_input_is_refused_naming_them(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    # What tf2onnx makes of a Keras Normalization layer: its statistics as inputs of their own.
    features = helper.make_tensor_value_info("features", TensorProto.FLOAT, [None, 2])
    mean = helper.make_tensor_value_info("mean", TensorProto.FLOAT, [1, 2])
    out = helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 2])
    graph = helper.make_graph(
        [helper.make_node("Sub", ["features", "mean"], ["probabilities"])], "g", [features, mean], [out]
    )
    (tmp_path / "model").mkdir()
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
        tmp_path / "model" / "model.onnx",
    )
    pq.write_table(pa.table({"x1": [0.1, 0.9], "x2": [0.2, 0.8], "label": [0, 1]}), tmp_path / "rows.parquet")
    with pytest.raises(
        InvalidParameterError, match=r"takes 2 inputs \(features, mean\); .* one input tensor"
    ):
        evaluate_dataset(
            model_dir=str(tmp_path / "model"),
            model_format="onnx",
            dataset_uri=str(tmp_path / "rows.parquet"),
            task="binary",
            label_column="label",
        )
