"""KFP component: the champion/challenger gate -- does the new model beat production?"""

from kfp import dsl
from kfp.dsl import Dataset, Input, Markdown, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def gate_model(
    challenger: Input[Model],
    champion: Input[Model],
    features: Input[Dataset],
    gate_metric: str,
    gate_margin: float,
    decision_threshold: float,
    gate_metrics: Output[Metrics],
    gate_report: Output[Markdown],
) -> str:
    """Scores the new model (challenger) and the production model (champion) on the same
    labelled records of the new window -- the feature job's holdout requests, through each
    model's own feature transform -- and lets the challenger on only when it wins by the margin.

    Args:
        challenger: The model this run trained.
        champion: The production-model step's artifact (nothing in production: the challenger
            passes).
        features: The new window's feature job output (its ``holdout_requests.parquet``).
        gate_metric: ``auc``, ``accuracy`` or ``log_loss`` (lower is better there).
        gate_margin: How much better the challenger must be (0-1; 0: at least as good).
        decision_threshold: Probability at or above which a flight is called delayed (accuracy).

        gate_metrics: ``challenger.<metric>`` and ``champion.<metric>`` (auc, accuracy,
            log_loss) and ``passed`` (1/0).
        gate_report: The decision, the rule and both models' figures; its metadata is the run
            summary's ``gate`` entry.

    Returns:
        ``challenger`` (it goes on to the canary) or ``champion`` (production stays); the one
        output, as check-drift's (a condition reads it).
    """
    from kfstack.components.evaluation.gate_model.core import gate_models
    from kfstack.monitoring.gate import GateRule

    report = gate_models(
        challenger.path, champion.path, features.path, GateRule(gate_metric, gate_margin), decision_threshold
    )
    gate_metrics.metadata.update(report.metrics())
    gate_report.metadata.update(report.summary())
    with open(gate_report.path, "w", encoding="utf-8") as f:
        f.write(report.markdown())
    return report.decision
