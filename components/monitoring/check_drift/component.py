"""KFP component: has the new window's data drifted from the production model's training data?"""

from kfp import dsl
from kfp.dsl import Dataset, Input, Markdown, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def check_drift(
    features: Input[Dataset],
    champion: Input[Model],
    drift_max_psi: float,
    drift_max_label_rate_shift: float,
    drift_ignore_features: str,
    force: bool,
    drift_metrics: Output[Metrics],
    drift_report: Output[Markdown],
) -> bool:
    """Compares the new window's profile with the production model's training profile: PSI per
    feature (numeric histograms on the reference's edges, categorical top values) and the shift
    of the training split's label rate.

    Args:
        features: The feature job's output for the new window (its ``profile.json`` binned with
            the champion's edges).
        champion: The production-model step's artifact (the model's ``profile.json``, or only
            ``champion.json`` saying nothing is in production).
        drift_max_psi: A feature with a PSI above this has drifted (0.1 small, 0.2 large).
        drift_max_label_rate_shift: The label rate has drifted when it moved by more (0-1).
        drift_ignore_features: Comma-separated features measured but not deciding (the
            calendar: any two windows differ in it).
        force: Retrain even without drift.

        drift_metrics: ``retrain``, ``forced``, ``drifted`` (1/0), ``max_psi``,
            ``label_rate_shift`` and ``psi.<feature>``.
        drift_report: The decision and the PSI table; its metadata is the run summary's
            ``drift`` entry.

    Returns:
        Whether to retrain: drifted, forced, or nothing in production. (The one output, so that
        a condition on it reads the same to a KFP backend and to kfp.local 2.17, which resolves
        a condition only on a task's single output.)
    """
    from kfstack.components.monitoring.check_drift.core import check_drift as check
    from kfstack.monitoring.drift import DriftThresholds, feature_names

    thresholds = DriftThresholds(
        drift_max_psi, drift_max_label_rate_shift, feature_names(drift_ignore_features)
    )
    result = check(features.path, champion.path, thresholds, force)
    drift_metrics.metadata.update(result.metrics())
    drift_report.metadata.update(result.summary())
    with open(drift_report.path, "w", encoding="utf-8") as f:
        f.write(result.markdown())
    return result.retrain
