"""KFP component: drift of any Parquet dataset from a reference, by declared columns."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Markdown, Metrics, Output

from kfstack.images import COMPONENT_IMAGE


# Lists as defaults are KFP parameter defaults, compiled into the spec; the body never mutates
# them (B006).
@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def data_drift(
    reference: Input[Artifact],
    current: Input[Dataset],
    drift_metrics: Output[Metrics],
    drift_report: Output[Markdown],
    current_profile: Output[Artifact],
    numeric_columns: list = [],  # noqa: B006
    categorical_columns: list = [],  # noqa: B006
    label_column: str = "",
    drift_max_psi: float = 0.2,
    drift_max_label_rate_shift: float = 0.05,
    drift_ignore_columns: list = [],  # noqa: B006
) -> NamedTuple("Drift", [("drifted", bool)]):
    """Compares the current data with a reference: PSI per declared column, label rate shift.

    Args:
        reference: What the production model was trained on: a ``profile.json`` (a previous
            ``current_profile``, kept with the model) or its Parquet data.
        current: The new data (Parquet).
        drift_metrics: ``drifted``, ``max_psi``, ``label_rate_shift``, ``psi.<column>``.
        drift_report: Markdown: every column's PSI and what decided.
        current_profile: The current data's profile (``profile.json``, on its own edges): the
            reference of a model trained on it.
        numeric_columns: Columns profiled as numbers (10-bin histograms on the reference's edges).
        categorical_columns: Columns profiled as categories (their most frequent values' shares).
        label_column: The label (its mean is compared: a binary label's positive rate); empty: none.
        drift_max_psi: Drifted when a column's PSI exceeds it (0.2: a significant shift).
        drift_max_label_rate_shift: Drifted when the label rate moved by more (0-1).
        drift_ignore_columns: Measured and reported, not deciding (a calendar column differs
            between any two windows by construction).

    Returns:
        ``drifted``: whether the current data drifted from the reference.
    """
    from kfstack.components.monitoring.data_drift.core import check_and_publish

    drifted = check_and_publish(
        reference_uri=reference.path,
        current_uri=current.path,
        numeric=numeric_columns,
        categorical=categorical_columns,
        label=label_column,
        max_psi=drift_max_psi,
        max_label_rate_shift=drift_max_label_rate_shift,
        ignored=drift_ignore_columns,
        metrics=drift_metrics,
        report_path=drift_report.path,
        profile_dir=current_profile.path,
    )
    return (drifted,)
