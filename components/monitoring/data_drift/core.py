"""A dataset's drift from a reference: the reference's profile (or its data, profiled here) against
the current data profiled on the reference's edges."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from kfstack.monitoring.drift import DriftReport, DriftThresholds, compare_profiles
from kfstack.monitoring.profiling import PROFILE_FILE, profile_dataset, write_profile


def reference_profile(
    uri: str, numeric: Sequence[str], categorical: Sequence[str], label: str
) -> dict[str, Any]:
    """The reference: a ``profile.json`` where the artifact holds one (a training step's, kept
    with the production model), else its Parquet data profiled here."""
    path = os.path.join(uri, PROFILE_FILE)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    return profile_dataset(uri, numeric, categorical, label)


def check_drift(
    *,
    reference_uri: str,
    current_uri: str,
    numeric: Sequence[str],
    categorical: Sequence[str],
    label: str,
    thresholds: DriftThresholds,
) -> tuple[DriftReport, dict[str, Any]]:
    """The drift report and the current data's profile on the reference's edges.

    Raises:
        InvalidParameterError: A declared column is missing, thresholds out of range, or an
            ignored column neither profile has.
    """
    reference = reference_profile(reference_uri, numeric, categorical, label)
    current = profile_dataset(current_uri, numeric, categorical, label, reference=reference)
    return compare_profiles(reference, current, thresholds), current


def check_and_publish(
    *,
    reference_uri: str,
    current_uri: str,
    numeric: Sequence[str],
    categorical: Sequence[str],
    label: str,
    max_psi: float,
    max_label_rate_shift: float,
    ignored: Sequence[str],
    metrics: Any,
    report_path: str,
    profile_dir: str,
) -> bool:
    """The component's whole work: the report on the UI's artifacts, and the current data's own
    profile (on its own edges: the reference of a model trained on it). Returns ``drifted``."""
    thresholds = DriftThresholds(max_psi, max_label_rate_shift, tuple(ignored))
    report, _ = check_drift(
        reference_uri=reference_uri,
        current_uri=current_uri,
        numeric=numeric,
        categorical=categorical,
        label=label,
        thresholds=thresholds,
    )
    metrics.log_metric("drifted", float(report.drifted))
    metrics.log_metric("max_psi", report.max_psi)
    if report.label_rate_shift is not None:
        metrics.log_metric("label_rate_shift", report.label_rate_shift)
    for name, value in sorted(report.psi.items()):
        metrics.log_metric(f"psi.{name}", value)
    with open(report_path, "w", encoding="utf-8") as f:
        f.write(report.markdown())
    write_profile(profile_dataset(current_uri, numeric, categorical, label), profile_dir)
    return report.drifted
