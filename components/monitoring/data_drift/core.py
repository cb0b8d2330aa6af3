"""A dataset's drift from a reference, and whether to retrain.

The reference is what production was trained on: a production-model artifact (``champion.json``
saying what was found, and the model's ``profile.json`` when it carries one), a profile, or the
data itself, profiled here. The current data is profiled here on the reference's histogram edges,
or -- when its data step profiled it already (a Spark job over the whole window) -- read from
the profile that step wrote on those edges (``current_profile_file``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Sequence
from typing import Any

from kfstack.components.argument_names import names_of
from kfstack.errors import InvalidParameterError
from kfstack.monitoring.decision import DriftDecision, decide, nothing_to_compare
from kfstack.monitoring.drift import DriftReport, DriftThresholds, compare_profiles, feature_names
from kfstack.monitoring.profiling import PROFILE_FILE, profile_dataset, write_profile
from kfstack.serving.production import RECORD_FILE, read_found
from kfstack.settings import named


def _load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def reference_profile(
    uri: str, numeric: Sequence[str], categorical: Sequence[str], label: str
) -> dict[str, Any]:
    """The reference: a ``profile.json`` where the artifact holds one (a training step's, kept
    with the production model), else its Parquet data profiled here."""
    path = os.path.join(uri, PROFILE_FILE)
    if os.path.isfile(path):
        return _load(path)
    return profile_dataset(uri, numeric, categorical, label)


def current_profile(
    uri: str,
    reference: dict[str, Any],
    numeric: Sequence[str],
    categorical: Sequence[str],
    label: str,
    profile_file: str = "",
) -> dict[str, Any]:
    """The current data on the reference's edges: the data step's ``profile_file`` when named,
    else its Parquet data profiled here.

    Raises:
        InvalidParameterError: The named profile is not there (the data step ran without the
            reference).
    """
    if not profile_file:
        return profile_dataset(uri, numeric, categorical, label, reference=reference)
    path = os.path.join(uri, profile_file)
    if not os.path.isfile(path):
        raise InvalidParameterError(
            f"current_profile_file: {uri} has no {profile_file}: its data step did not profile it on "
            f"the reference's edges (give the step the reference's profile)"
        )
    return _load(path)


@dataclasses.dataclass(frozen=True)
class DriftData:
    """What a drift check compares: the reference (a production-model artifact, a profile or
    data) and the current data, by the declared columns; ``current_profile_file``: the data
    step's own profile of the current data on the reference's edges (empty: profile here)."""

    reference_uri: str
    current_uri: str
    numeric: Sequence[str] = ()
    categorical: Sequence[str] = ()
    label: str = ""
    current_profile_file: str = ""


def check_drift(data: DriftData, thresholds: DriftThresholds) -> tuple[DriftReport, dict[str, Any]]:
    """The drift report and the current data's profile on the reference's edges.

    Raises:
        InvalidParameterError: A declared column is missing, thresholds out of range, an ignored
            column neither profile has, or a named current profile is absent.
    """
    columns = (data.numeric, data.categorical, data.label)
    reference = reference_profile(data.reference_uri, *columns)
    current = current_profile(data.current_uri, reference, *columns, data.current_profile_file)
    return compare_profiles(reference, current, thresholds), current


def decide_retraining(data: DriftData, thresholds: DriftThresholds, force: bool) -> DriftDecision:
    """Whether to retrain on the current data (module docstring): a production-model reference
    that found nothing, or a model without a training profile, retrains without a comparison."""
    reference = ""
    if os.path.isfile(os.path.join(data.reference_uri, RECORD_FILE)):
        found = read_found(data.reference_uri)
        if not found.found:
            return nothing_to_compare("nothing in production: the first model is trained", force)
        # Comparable by the files the run named, and still without the profile of its training
        # data (a production_model step told no comparable_files): nothing to compare with.
        if not found.comparable or not os.path.isfile(os.path.join(data.reference_uri, PROFILE_FILE)):
            reason = (
                f"{found.version} in production carries no training profile to compare with: a "
                f"model is trained, and the canary compares the two live"
            )
            return nothing_to_compare(reason, force, found.version)
        reference = found.version
    report, _ = check_drift(data, thresholds)
    return decide(report, force, reference)


def check_and_publish(
    data: DriftData,
    *,
    max_psi: float,
    max_label_rate_shift: float,
    ignored: str,
    force: bool,
    trigger: str = "",
    metrics: Any,
    report: Any,
    profile_dir: str,
) -> bool:
    """The component's whole work: the decision on the UI's artifacts (the report's metadata is
    the run summary's ``drift`` entry), and the current data's own profile (on its own edges:
    the reference of a model trained on it). Returns ``retrain``."""
    with named(names_of(DriftThresholds)):
        thresholds = DriftThresholds(max_psi, max_label_rate_shift, feature_names(ignored))
    decision = decide_retraining(data, thresholds, force)
    os.makedirs(profile_dir, exist_ok=True)
    for name, value in decision.metrics().items():
        metrics.log_metric(name, value)
    report.metadata.update(decision.summary())
    markdown = decision.markdown()
    if trigger:  # the run summary and the UI say why a run that was not scheduled happened
        report.metadata["trigger"] = trigger
        markdown += f"\n\nStarted by: {trigger}\n"
    with open(report.path, "w", encoding="utf-8") as f:
        f.write(markdown)
    own = os.path.join(data.current_uri, PROFILE_FILE)
    if data.current_profile_file and os.path.isfile(own):
        shutil.copy(own, os.path.join(profile_dir, PROFILE_FILE))  # the data step's, on its own edges
    elif data.numeric or data.categorical:
        profile = profile_dataset(data.current_uri, data.numeric, data.categorical, data.label)
        write_profile(profile, profile_dir)
    return decision.retrain
