"""Drift statistics on feature-job profiles: identical data reads as no drift, a shift as drift,
and the edge cases (empty bins, a constant feature, a category the reference never saw, missing
values, different binning) behave as documented."""

from __future__ import annotations

import copy
import math

import pytest

from kfstack.errors import InvalidParameterError
from kfstack.monitoring.drift import (
    SHARE_FLOOR,
    DriftThresholds,
    categorical_psi,
    compare_profiles,
    feature_names,
    numeric_psi,
    population_stability,
)

EDGES = [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]


def numeric(counts, missing=0.0, edges=EDGES) -> dict:
    return {"missing_fraction": missing, "histogram": {"edges": list(edges), "counts": list(counts)}}


def profile(distance=(10, 20, 40, 20, 10), carrier=None, label_rate=0.25, missing=0.0) -> dict:
    return {
        "splits": {"train": {"rows": 100, "label_rate": label_rate}},
        "numeric": {"distance": numeric(distance, missing), "hour": numeric((0, 0, 100, 0, 0))},
        "categorical": {"carrier": {"top_values": carrier or {"UA": 0.5, "DL": 0.3, "AA": 0.2}}},
    }


def test_identical_profiles_do_not_drift():
    report = compare_profiles(profile(), profile(), DriftThresholds())
    assert report.psi == {"distance": 0.0, "hour": 0.0, "carrier": 0.0}
    assert not report.drifted and report.label_rate_shift == 0.0
    assert report.summary()["drifted"] is False and report.summary()["max_psi"] == 0.0


def test_a_shifted_numeric_feature_drifts():
    shifted = profile(distance=(0, 5, 15, 40, 40))  # mass moved to longer flights
    report = compare_profiles(profile(), shifted, DriftThresholds())
    assert report.psi["distance"] > 0.2 > report.psi["hour"]
    assert report.drifted_features == ["distance"] and report.drifted
    assert "| distance |" in report.markdown() and "**drifted**" in report.markdown()


def test_a_small_wobble_stays_under_the_line():
    wobble = profile(distance=(11, 19, 41, 19, 10))
    report = compare_profiles(profile(), wobble, DriftThresholds())
    assert 0 < report.psi["distance"] < 0.01 and not report.drifted


def test_empty_bins_on_both_sides_cost_nothing_and_on_one_side_are_finite():
    # Bins empty in both: no contribution (the floor on both sides).
    assert numeric_psi("x", numeric((0, 50, 50, 0, 0)), numeric((0, 50, 50, 0, 0))) == 0.0
    # Mass appearing where the reference had none: large but finite (the floor, not zero).
    value = numeric_psi("x", numeric((0, 50, 50, 0, 0)), numeric((0, 40, 40, 20, 0)))
    assert math.isfinite(value) and value > 0.2
    assert value == pytest.approx(population_stability([0, 0, 0.5, 0.5, 0, 0], [0, 0, 0.4, 0.4, 0.2, 0]))


def test_a_constant_feature_has_no_drift_until_it_moves():
    constant = numeric((0, 0, 100, 0, 0))
    assert numeric_psi("hour", constant, copy.deepcopy(constant)) == 0.0
    assert numeric_psi("hour", constant, numeric((0, 0, 0, 100, 0))) > 1.0
    # An all-empty histogram (every value missing) compares by the missing share alone.
    assert (
        numeric_psi("hour", numeric((0, 0, 0, 0, 0), missing=1.0), numeric((0, 0, 0, 0, 0), missing=1.0))
        == 0.0
    )


def test_more_missing_values_drift():
    report = compare_profiles(profile(), profile(missing=0.4), DriftThresholds())
    assert report.psi["distance"] > 0.2


def test_a_category_the_reference_never_saw_drifts():
    reference = {"top_values": {"UA": 0.5, "DL": 0.3, "AA": 0.2}}
    assert categorical_psi(reference, copy.deepcopy(reference)) == 0.0
    newcomer = {"top_values": {"UA": 0.35, "DL": 0.2, "AA": 0.15, "ZZ": 0.3}}  # a new carrier
    assert categorical_psi(reference, newcomer) > 0.2
    # Values below a profile's top-N are "the rest" on both sides: a rest of the same size is no drift.
    truncated = {"top_values": {"UA": 0.5, "DL": 0.3}}
    assert categorical_psi(truncated, {"top_values": {"UA": 0.5, "DL": 0.3}}) == 0.0


def test_a_label_rate_shift_alone_drifts():
    report = compare_profiles(profile(), profile(label_rate=0.35), DriftThresholds())
    assert not report.drifted_features and report.label_drifted and report.drifted
    assert report.label_rate_shift == pytest.approx(0.1)
    assert compare_profiles(profile(), profile(label_rate=0.28), DriftThresholds()).drifted is False


def test_profiles_binned_differently_are_refused():
    other_edges = profile()
    other_edges["numeric"]["distance"] = numeric((10, 20, 40, 20, 10), edges=[0, 5, 10, 15, 20, 25])
    with pytest.raises(InvalidParameterError, match=r"different edges.*--reference-profile-uri"):
        compare_profiles(profile(), other_edges, DriftThresholds())


def test_a_changed_feature_set_is_drift_and_the_rest_is_still_compared():
    changed = profile()
    del changed["numeric"]["hour"]
    changed["categorical"]["origin"] = {"top_values": {"JFK": 1.0}}
    report = compare_profiles(profile(), changed, DriftThresholds())
    assert report.removed_features == ("hour",) and report.added_features == ("origin",)
    assert report.drifted and report.drifted_features == [] and set(report.psi) == {"distance", "carrier"}
    assert report.summary()["removed_features"] == ["hour"]
    assert "The feature set changed" in report.markdown()
    # Ignoring a feature only the reference has is not a mistake: it was removed.
    compare_profiles(profile(), changed, DriftThresholds(ignored_features=("hour",)))


def test_psi_needs_matching_bins_and_thresholds_name_their_field():
    with pytest.raises(InvalidParameterError, match="bins must match"):
        population_stability([0.5, 0.5], [1.0])
    assert population_stability([0.0], [0.0]) == 0.0
    assert population_stability([1.0, 0.0], [0.0, 1.0]) == pytest.approx(
        2 * (1 - SHARE_FLOOR) * math.log(1 / SHARE_FLOOR)
    )
    with pytest.raises(InvalidParameterError, match="max_psi=0 must be > 0"):
        DriftThresholds(max_psi=0)
    with pytest.raises(InvalidParameterError, match="max_label_rate_shift=2 must be <= 1"):
        DriftThresholds(max_label_rate_shift=2)


def test_ignored_features_are_measured_and_reported_but_do_not_decide():
    shifted = profile(distance=(0, 5, 15, 40, 40))
    ignoring = DriftThresholds(ignored_features=("distance",))
    report = compare_profiles(profile(), shifted, ignoring)
    assert report.psi["distance"] > 0.2 and report.drifted_features == [] and not report.drifted
    assert report.summary()["ignored_features"] == ["distance"]
    assert "| distance |" in report.markdown() and "ignored" in report.markdown()
    # The label still decides.
    assert compare_profiles(profile(), profile(label_rate=0.4), ignoring).drifted
    with pytest.raises(InvalidParameterError, match="names no feature of the profiles: month"):
        compare_profiles(profile(), profile(), DriftThresholds(ignored_features=("month",)))


def test_feature_names_from_a_parameter():
    assert feature_names(" month, day_of_year ,") == ("month", "day_of_year")
    assert feature_names("") == ()
