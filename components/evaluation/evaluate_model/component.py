"""KFP component: score the exported model on the held-out test split."""

from kfp import dsl
from kfp.dsl import HTML, ClassificationMetrics, Dataset, Input, Markdown, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def evaluate_model(
    model: Input[Model],
    features: Input[Dataset],
    threshold: float,
    test_metrics: Output[Metrics],
    classification: Output[ClassificationMetrics],
    report: Output[Markdown],
    charts: Output[HTML],
):
    """Scores ``model.onnx`` with onnxruntime on the test split (the model as it will be served).

    Args:
        model: Output of the training step; its ``model.onnx`` is scored.
        features: Output of the feature job; only its ``test`` split is read.
        threshold: Probability (0-1) at or above which a flight is predicted delayed.
        test_metrics: AUC, log loss, accuracy, precision, recall, actual and predicted positive
            rate (0-1), test rows. AUC, precision and recall record the string ``"undefined"``
            (``kfstack.training.metrics.UNDEFINED``) where this split leaves them undefined:
            AUC with one class in the labels, precision with no flight predicted delayed,
            recall with no delayed flight.
        classification: Confusion matrix (on_time / delayed) and ROC curve for the KFP UI.
        report: Markdown summary rendered by the KFP UI; an undefined metric reads
            "undefined (<reason>)".
        charts: Self-contained HTML page (inline SVG, loads nothing) with the ROC curve and
            the confusion matrix at ``threshold``.
    """
    from kfstack.components.evaluation.evaluate_model.publish import evaluate_and_publish

    evaluate_and_publish(
        model_uri=model.path,
        features_uri=features.path,
        threshold=threshold,
        metrics=test_metrics,
        classification=classification,
        report=report,
        charts=charts,
    )
