"""KFP component: a model of any format scored on a labelled dataset through its own server."""

from kfp import dsl
from kfp.dsl import HTML, ClassificationMetrics, Dataset, Input, Markdown, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


# A list as a default is a KFP parameter default, compiled into the spec; the body never
# mutates it (B006).
@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def model_evaluation(
    model: Input[Model],
    dataset: Input[Dataset],
    task: str,
    label_column: str,
    evaluation_metrics: Output[Metrics],
    classification: Output[ClassificationMetrics],
    evaluation_report: Output[Markdown],
    charts: Output[HTML],
    model_format: str = "",
    dataset_split: str = "",
    feature_columns: list = [],  # noqa: B006
    request_format: str = "tensor",
    custom_predictor: str = "",
    # Settings from the parameter catalog, written by python -m kfstack.pipelines.signatures.
    decision_threshold: float = 0.5,
    tracking_uri: str = "",
    # End of the catalog's settings.
    class_names: list = [],  # noqa: B006
    batch_size: int = 512,
    run_id: str = "",
    task_name: str = "",
    settings_overrides: dict = {},  # noqa: B006
):
    """Scores the labelled rows through the server that will serve the model, by task.

    A standard format goes through kfstack's stand-in for KServe's runtime for it; a custom
    model through the team's own ``kserve.Model`` (on a cluster run this task in the
    predictor's image, ``task.set_container_image``), so evaluation is the serving parity check.

    Args:
        model: The model directory (its metadata's ``model_format`` when the parameter is empty).
        dataset: Labelled rows, Parquet (a file or a folder of them).
        task: ``binary`` (AUC, log loss, accuracy, precision, recall, ROC, confusion matrix),
            ``multiclass`` (accuracy, macro-F1, confusion matrix) or ``regression`` (RMSE, MAE,
            R²).
        label_column: The dataset's label column.
        evaluation_metrics: The task's figures (``undefined`` where this data leaves one
            undefined) and ``rows``.
        classification: Confusion matrix and, for a binary task, the ROC curve.
        evaluation_report: The figures and the confusion matrix as Markdown.
        charts: A self-contained HTML page (inline SVG, loads nothing): the ROC curve and the
            confusion matrix, as the task has them.
        model_format: ``sklearn``, ``xgboost``, ``onnx`` or ``custom``; empty: the model's own.
        dataset_split: A folder of the dataset to score (``test`` of a job that writes its
            splits as folders); empty: the whole dataset.
        feature_columns: The columns a request carries, in order; empty: all but the label.
        request_format: ``tensor`` (rows as a numeric matrix) or ``records`` (rows as objects).
        custom_predictor: ``package.module:Class``: the team's ``kserve.Model``, built as
            ``Class(name, model_dir)`` (the runtimes' ``--model_name``/``--model_dir``).
        decision_threshold: Binary: a row is predicted positive at a probability at or above it.
        tracking_uri: Kubernetes: the MLflow tracking server (``http(s)://``) the run, its tasks, their jobs
            and trials are tracked to; empty: none. Where KFP's MLflow plugin is on, its server and runs are
            used whatever this says (docs/tracking.md).
        class_names: Classification: the name of label ``i`` at ``class_names[i]`` (the
            confusion matrix's rows and columns); empty: the labels themselves.
        batch_size: Rows per request.
        run_id: The pipeline run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``): on a cluster tracked
            without KFP's MLflow plugin, the MLflow parent the task's run nests under; empty:
            not tracked there.
        task_name: This task's name (``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``): its MLflow run's.
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.
    """
    from kfstack.settings import with_overrides

    arguments = with_overrides(locals())
    import os

    from kfstack.components.evaluation.model_evaluation.core import publish
    from kfstack.platforms import tracked_task
    from kfstack.serving.scoring import evaluate_dataset, model_format_of

    # On a cluster, the figures and reports go into the task's MLflow run too (docs/tracking.md).
    with tracked_task("model_evaluation", arguments) as outputs:
        result = evaluate_dataset(
            model_dir=model.path,
            model_format=model_format_of(model_format, model.metadata),
            dataset_uri=os.path.join(dataset.path, dataset_split) if dataset_split else dataset.path,
            task=task,
            label_column=label_column,
            feature_columns=feature_columns,
            request_format=request_format,
            custom_predictor=custom_predictor,
            threshold=arguments["decision_threshold"],
            class_names=class_names,
            batch_size=batch_size,
        )
        publish(
            result,
            threshold=arguments["decision_threshold"],
            metrics=evaluation_metrics,
            classification=classification,
            report=evaluation_report,
            charts=charts,
        )
        outputs.update(
            evaluation_metrics=evaluation_metrics,
            classification=classification,
            evaluation_report=evaluation_report,
            charts=charts,
        )
