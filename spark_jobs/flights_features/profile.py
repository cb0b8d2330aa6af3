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

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kfstack.errors import InvalidParameterError
from kfstack.features import LABEL_COLUMN, SPLITS
from kfstack.flights.features import NUMERIC_FEATURES
from kfstack.spark_jobs.flights_features.featurize import SPLIT
from kfstack.spark_jobs.flights_features.statistics import QUANTILES, TrainStatistics

HISTOGRAM_BINS = 10
# Codes per counted group (:func:`_count_codes`): a histogram's bins, or the splits x labels.
CODES_PER_GROUP = max(HISTOGRAM_BINS, 2 * 3)
TOP_VALUES = 25
PROFILE_FORMAT_VERSION = 1


def _own_edges(qs: tuple[float, ...]) -> list[float]:
    """Equal-width edges between the extremes."""
    lo, hi = (qs[0], qs[-1]) if qs else (0.0, 0.0)
    width = (hi - lo) / HISTOGRAM_BINS or 1.0
    return [lo + i * width for i in range(HISTOGRAM_BINS + 1)]


def _bin_index(name: str, edges: list[float], train: Column) -> Column:
    """A training row's bin of feature ``name`` on ``edges``; null for other rows (or no value)."""
    lo, width = edges[0], (edges[1] - edges[0]) or 1.0
    # Values on the last edge belong to the last bin, like numpy.histogram; values beyond either
    # end (another data's edges, or the approximate extremes) to the end bins, where a shift
    # then shows.
    index = F.greatest(F.least(F.floor((F.col(name) - lo) / width), F.lit(HISTOGRAM_BINS - 1)), F.lit(0))
    # A missing value has no bin: the profile counts it in its missing share. (GREATEST and LEAST
    # skip nulls, so without the condition it would land in the last bin.)
    return F.when(train & F.col(name).isNotNull(), index)


# The code group of the (split, label) pairs (:func:`_count_codes`).
SPLIT_LABEL = "__split_label"


def _split_label(split: str, label: int) -> int:
    return SPLITS.index(split) * 2 + label


def _count_codes(features: DataFrame, bins: Mapping[str, Column]) -> dict[tuple[str, int], int]:
    """The rows per (binned column, bin) of ``bins``, and per (:data:`SPLIT_LABEL`, split and
    label), in one Spark job: each row gives one small int code per histogram and one for its
    split and label, and one aggregation counts the codes -- a few hundred groups of one int
    column, where counting every bin of every feature with a condition of its own evaluated
    ~200 conditions per row (3 times as long on x10)."""
    groups = [*bins, SPLIT_LABEL]
    split_index = F.lit(None)
    for i, split in enumerate(SPLITS):
        split_index = F.when(F.col(SPLIT) == split, i).otherwise(split_index)
    split_label = split_index * 2 + F.col(LABEL_COLUMN)
    columns = [*bins.values(), split_label]
    code = F.explode(F.array(*[F.lit(g * CODES_PER_GROUP) + c for g, c in enumerate(columns)]))
    counted = features.select(code.alias("code")).where(F.col("code").isNotNull()).groupBy("code").count()
    return {
        (groups[row["code"] // CODES_PER_GROUP], row["code"] % CODES_PER_GROUP): row["count"]
        for row in counted.collect()
    }


def _numeric_profile(
    statistics: TrainStatistics,
    edges: Mapping[str, list[float]],
    counts: Mapping[tuple[str, int], int],
    tag: str,
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
                "counts": [counts.get((f"{name}__{tag}", i), 0) for i in range(HISTOGRAM_BINS)],
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
    features: DataFrame, statistics: TrainStatistics, edges: Mapping[str, list[float]] | None = None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The profile of ``features`` (every split: raw features, label, split), whose training
    split's ``statistics`` (:func:`.statistics.train_statistics`) are already known, on its own
    edges -- what a model trained on it carries as its reference -- and, given ``edges``
    (:func:`reference_edges` of the production model's profile), the same on those edges, for
    the drift check (:mod:`kfstack.monitoring.drift`). One Spark job: the histograms on both
    edges and the label rate per split, for every feature at once. A feature the reference lacks
    (added since) is binned on its own edges there too."""
    own = {name: _own_edges(statistics.numeric[name].quantiles) for name in NUMERIC_FEATURES}
    binned = {name: [float(edge) for edge in (edges or {}).get(name, own[name])] for name in NUMERIC_FEATURES}
    train = F.col(SPLIT) == "train"
    bins = {f"{name}__own": _bin_index(name, own[name], train) for name in NUMERIC_FEATURES}
    if edges is not None:
        bins |= {f"{name}__ref": _bin_index(name, binned[name], train) for name in NUMERIC_FEATURES}
    counts = _count_codes(features, bins)
    # Splits without a row are left out, as a grouping by split would.
    label_rates = {}
    for split in SPLITS:
        negatives, positives = (counts.get((SPLIT_LABEL, _split_label(split, y)), 0) for y in (0, 1))
        if rows := negatives + positives:
            label_rates[split] = {"rows": rows, "label_rate": positives / rows}
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
        profile(_numeric_profile(statistics, own, counts, "own"), "this data"),
        profile(_numeric_profile(statistics, binned, counts, "ref"), "reference profile")
        if edges is not None
        else None,
    )
