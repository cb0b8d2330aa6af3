"""KFP component: has the data drifted from what production was trained on? Retrain or not."""

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
    current_profile_file: str = "",
    # Settings from the parameter catalog, written by python -m kfstack.pipelines.signatures.
    drift_max_psi: float = 0.2,
    drift_max_label_rate_shift: float = 0.05,
    drift_ignore_features: str = "",
    force: bool = False,
    trigger: str = "",
    # End of the catalog's settings.
    settings_overrides: dict = {},  # noqa: B006
) -> bool:
    """Compares the current data with what production was trained on: PSI per column, the label
    rate shift; decides whether to retrain.

    Args:
        reference: What production was trained on: the ``production_model`` step's artifact
            (nothing found, or a model without ``profile.json``: retrain without comparing), a
            ``profile.json`` (a previous ``current_profile``, kept with the model) or its
            Parquet data.
        current: The new data (Parquet).
        drift_metrics: ``retrain``, ``forced``, ``drifted``, ``max_psi``, ``label_rate_shift``,
            ``psi.<column>`` (the last four when compared).
        drift_report: Markdown: the decision, why, every column's PSI; its metadata is the run
            summary's ``drift`` entry.
        current_profile: The current data's profile on its own edges (``profile.json``): the
            reference of a model trained on it.
        numeric_columns: Columns profiled as numbers (10-bin histograms on the reference's edges).
        categorical_columns: Columns profiled as categories (their most frequent values' shares).
        label_column: The label (its mean is compared: a binary label's positive rate); empty: none.
        current_profile_file: A profile the data step wrote beside the data on the reference's
            edges (a Spark job profiling the whole window), used instead of profiling here; its
            ``profile.json`` (own edges) becomes ``current_profile``. Empty: profile here.
        drift_max_psi: Retrain when a feature's PSI (new window against the production model's training data)
            is above this (0.1 small, 0.2 large shift).
        drift_max_label_rate_shift: Retrain when the label rate moved by more than this (0-1).
        drift_ignore_features: Comma-separated features the drift check measures but does not decide on.
        force: Retrain even when nothing drifted.
        trigger: Why this run was started: a drift alert's receiver writes the alert, the model, when it
            started firing and its max PSI; empty: a schedule or by hand.
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.

    Returns:
        Whether to retrain: drifted, forced, or nothing comparable in production. (The one
        output, so that a condition on it reads the same to a KFP backend and to kfp.local 2.17,
        which resolves a condition only on a task's single output.)
    """
    from kfstack.settings import with_overrides

    arguments = with_overrides(locals())
    from kfstack.components.monitoring.data_drift.core import DriftData, check_and_publish

    data = DriftData(
        reference_uri=reference.path,
        current_uri=current.path,
        numeric=numeric_columns,
        categorical=categorical_columns,
        label=label_column,
        current_profile_file=current_profile_file,
    )
    return check_and_publish(
        data,
        max_psi=drift_max_psi,
        max_label_rate_shift=drift_max_label_rate_shift,
        ignored=drift_ignore_features,
        force=force,
        trigger=trigger,
        metrics=drift_metrics,
        report=drift_report,
        profile_dir=current_profile.path,
    )
