"""The data profile: what the training data looked like, for drift checks on later data.

Computed on the *raw* features of the training split (before imputation and scaling, so a later
batch is compared in the units a person reads): per numeric feature the count, missing share,
mean, quantiles and a fixed-edge histogram; per categorical feature the distinct count and the
most frequent values' shares; the label rate per split.

Every run writes its profile on its own edges (``profile.json``, which a model trained on the
data carries as its reference). Given a reference (``--reference-profile-uri``: the production
model's profile) it also writes the same profile binned on the reference's histogram edges
(``drift_profile.json``), so the two compare bin by bin (:mod:`kfstack.monitoring.drift`);
values beyond the edges count in the end bins. The reference's edges are never inherited: each
model's reference is binned on its own data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from kfstack.api import InvalidParameterError
from kfstack_examples.flights.features import NUMERIC_FEATURES
from kfstack_examples.flights.features_job.statistics import QUANTILES, TrainStatistics

HISTOGRAM_BINS = 10
TOP_VALUES = 25
PROFILE_FORMAT_VERSION = 1


def _own_edges(qs: tuple[float, ...]) -> list[float]:
    """Equal-width edges between the extremes."""
    lo, hi = (qs[0], qs[-1]) if qs else (0.0, 0.0)
    width = (hi - lo) / HISTOGRAM_BINS or 1.0
    return [lo + i * width for i in range(HISTOGRAM_BINS + 1)]


def _histogram(values: Sequence[tuple[float, int]], edges: list[float]) -> list[int]:
    """The counts of ``values`` (distinct values with their counts) in the bins of ``edges``."""
    lo, width = edges[0], (edges[1] - edges[0]) or 1.0
    counts = [0] * HISTOGRAM_BINS
    for value, count in values:
        # Values on the last edge belong to the last bin, like numpy.histogram; values beyond
        # either end (another data's edges) to the end bins, where a shift then shows; infinite
        # values and NaN (the greatest in Spark's order) too.
        if math.isfinite(value):
            index = min(max(math.floor((value - lo) / width), 0), HISTOGRAM_BINS - 1)
        else:
            index = 0 if value < 0 else HISTOGRAM_BINS - 1
        counts[index] += count
    return counts


def _numeric_profile(
    statistics: TrainStatistics, edges: Mapping[str, list[float]]
) -> dict[str, dict[str, Any]]:
    rows = statistics.rows
    result = {}
    for name in NUMERIC_FEATURES:
        stats = statistics.numeric[name]
        result[name] = {
            "count": stats.count,
            "missing_fraction": (rows - stats.count) / rows if rows else 0.0,
            "mean": stats.mean,
            "quantiles": dict(zip((str(q) for q in QUANTILES), stats.quantiles, strict=False)),
            "histogram": {
                "edges": edges[name],
                "counts": _histogram(stats.values, edges[name]),
            },
        }
    return result


def _categorical_profile(statistics: TrainStatistics) -> dict[str, dict[str, Any]]:
    """Distinct count and top values' shares per categorical feature."""
    profile = {}
    for name, values in statistics.categorical.items():
        total = sum(count for _, count in values)
        profile[name] = {
            "distinct": len(values),
            "top_values": {value: count / total for value, count in values[:TOP_VALUES]} if total else {},
        }
    return profile


def reference_edges(reference: Mapping[str, Any]) -> dict[str, list[float]]:
    """Another profile's histogram edges per numeric feature it has (what :func:`build_profiles`
    bins with for a drift check against that profile).

    Raises:
        InvalidParameterError: ``reference`` holds no numeric histogram at all.
    """
    try:
        edges = {
            name: list(entry["histogram"]["edges"])
            for name, entry in (reference.get("numeric") or {}).items()
        }
    except (KeyError, TypeError, AttributeError) as err:
        raise InvalidParameterError(
            f"reference profile: a numeric feature without histogram edges ({err})"
        ) from err
    if not edges:
        raise InvalidParameterError(
            "reference profile: no histogram edges; a profile of another feature job version?"
        )
    return edges


def build_profiles(
    statistics: TrainStatistics,
    label_counts: Mapping[str, tuple[int, int]],
    edges: Mapping[str, list[float]] | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The profile of the training split's ``statistics`` (:func:`.statistics.train_statistics`)
    and each split's ``label_counts`` (rows, positive labels) on its own edges -- what a model
    trained on it carries as its reference -- and, given ``edges`` (:func:`reference_edges` of
    the production model's profile), the same on those edges, for the drift check
    (:mod:`kfstack.monitoring.drift`). No Spark work: the statistics count every distinct value,
    so the histograms on any edges are sums of those counts. A feature the reference lacks
    (added since) is binned on its own edges there too."""
    own = {name: _own_edges(statistics.numeric[name].quantiles) for name in NUMERIC_FEATURES}
    binned = {name: [float(edge) for edge in (edges or {}).get(name, own[name])] for name in NUMERIC_FEATURES}
    # Splits without a row are left out, as a grouping by split would.
    label_rates = {
        split: {"rows": rows, "label_rate": positives / rows}
        for split, (rows, positives) in label_counts.items()
        if rows
    }
    categorical = _categorical_profile(statistics)

    def profile(numeric: dict[str, Any], binned_on: str) -> dict[str, Any]:
        return {
            "format_version": PROFILE_FORMAT_VERSION,
            "computed_on": "train split, raw features (before imputation and scaling)",
            "splits": label_rates,
            "histogram_edges": binned_on,
            "numeric": numeric,
            "categorical": categorical,
        }

    return (
        profile(_numeric_profile(statistics, own), "this data"),
        profile(_numeric_profile(statistics, binned), "reference profile") if edges is not None else None,
    )
