"""KFP component: the champion/challenger gate -- does the new model beat production?"""

from kfp import dsl
from kfp.dsl import Dataset, Input, Markdown, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


# A list as a default is a KFP parameter default, compiled into the spec; the body never
# mutates it (B006).
@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def gate_model(
    challenger: Input[Model],
    champion: Input[Model],
    dataset: Input[Dataset],
    task: str,
    label_column: str,
    gate_metrics: Output[Metrics],
    gate_report: Output[Markdown],
    # Settings from the parameter catalog, written by python -m kfstack.pipelines.signatures.
    gate_metric: str = "",
    gate_margin: float = 0.0,
    decision_threshold: float = 0.5,
    # End of the catalog's settings.
    dataset_split: str = "",
    feature_columns: list = [],  # noqa: B006
    request_format: str = "tensor",
    model_format: str = "",
    custom_predictor: str = "",
    batch_size: int = 512,
    settings_overrides: dict = {},  # noqa: B006
) -> str:
    """Scores the new model (challenger) and the production model (champion) on the same
    labelled rows, each through its own server, and lets the challenger on only when it wins by
    the margin.

    Args:
        challenger: The model this run trained (its metadata's ``model_format`` when the
            parameter is empty).
        champion: The production-model step's artifact (nothing in production, or a model that
            cannot be compared: the challenger passes).
        dataset: Labelled rows of the new data (Parquet, a file or a folder of them).
        task: ``binary``, ``multiclass`` or ``regression``: which metrics are computed.
        label_column: The dataset's label column.
        gate_metrics: ``challenger.<metric>`` and ``champion.<metric>`` (every defined metric of
            the task) and ``passed`` (1/0).
        gate_report: The decision, the rule and both models' figures; its metadata is the run
            summary's ``gate`` entry.
        gate_metric: The metric the champion/challenger gate decides on, any of the task's; empty: the task's
            quality metric (AUC, accuracy, RMSE).
        gate_margin: How much better than production (on the new window's holdout) the retrained model must be
            to go on to the canary, in the gate metric's units (0: at least as good).
        dataset_split: A file or folder of the dataset to score; empty: all of it.
        feature_columns: The columns a request carries, in order; empty: all but the label.
        request_format: ``tensor`` (rows as a numeric matrix) or ``records`` (rows as objects).
        model_format: ``sklearn``, ``xgboost``, ``onnx`` or ``custom``; empty: the challenger's.
        custom_predictor: ``package.module:Class``: the team's ``kserve.Model`` for ``custom``.
        decision_threshold: Binary: a row is predicted positive at a probability at or above it.
        batch_size: Rows per request.
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.

    Returns:
        ``challenger`` (it goes on to the canary) or ``champion`` (production stays); the one
        output, so that a condition on it reads the same to a KFP backend and to kfp.local.
    """
    from kfstack.settings import with_overrides

    arguments = with_overrides(locals())
    import os

    from kfstack.components.argument_names import names_of
    from kfstack.components.evaluation.gate_model.core import gate_models
    from kfstack.evaluation.task_metrics import QUALITY_METRIC, check_task
    from kfstack.monitoring.gate import GateRule
    from kfstack.serving.scoring import model_format_of
    from kfstack.settings import named

    with named(names_of(GateRule)):
        rule = GateRule(
            arguments["gate_metric"] or QUALITY_METRIC[check_task(task)], arguments["gate_margin"]
        )
    report = gate_models(
        challenger_dir=challenger.path,
        champion_dir=champion.path,
        dataset_uri=os.path.join(dataset.path, dataset_split) if dataset_split else dataset.path,
        task=task,
        label_column=label_column,
        rule=rule,
        model_format=model_format_of(model_format, challenger.metadata),
        custom_predictor=custom_predictor,
        feature_columns=feature_columns,
        request_format=request_format,
        threshold=arguments["decision_threshold"],
        batch_size=batch_size,
    )
    gate_metrics.metadata.update(report.metrics())
    gate_report.metadata.update(report.summary())
    with open(gate_report.path, "w", encoding="utf-8") as f:
        f.write(report.markdown())
    return report.decision
