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
from kfstack.features import LABEL_COLUMN
from kfstack.flights.features import CATEGORICAL_FEATURES, NUMERIC_FEATURES
from kfstack.spark_jobs.flights_features.featurize import SPLIT

QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)
QUANTILE_RELATIVE_ERROR = 0.001
HISTOGRAM_BINS = 10
TOP_VALUES = 25
PROFILE_FORMAT_VERSION = 1


def _own_edges(qs: list[float]) -> list[float]:
    """Equal-width edges between the approximate extremes."""
    lo, hi = (qs[0], qs[-1]) if qs else (0.0, 0.0)
    width = (hi - lo) / HISTOGRAM_BINS or 1.0
    return [lo + i * width for i in range(HISTOGRAM_BINS + 1)]


def _bin_counts(name: str, edges: list[float], tag: str) -> list[Column]:
    lo, width = edges[0], (edges[1] - edges[0]) or 1.0
    # Values on the last edge belong to the last bin, like numpy.histogram; values beyond either
    # end (another data's edges, or the approximate extremes) to the end bins, where a shift
    # then shows.
    index = F.greatest(F.least(F.floor((F.col(name) - lo) / width), F.lit(HISTOGRAM_BINS - 1)), F.lit(0))
    return [
        F.sum(F.when(index == i, 1).otherwise(0)).alias(f"{name}__{tag}{i}") for i in range(HISTOGRAM_BINS)
    ]


def numeric_profiles(
    train: DataFrame, reference_edges: Mapping[str, list[float]] | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]] | None]:
    """Count, missing share, mean, quantiles and histogram per numeric feature (three passes):
    on this data's own edges and, given ``reference_edges`` (another profile's), again on those
    -- in the same pass -- so that a drift check compares bin by bin. A feature the reference
    lacks (added since) is binned on its own edges there too.
    """
    stats = (
        train.agg(
            F.count(F.lit(1)).alias("__rows"),
            *[F.count(n).alias(f"{n}__count") for n in NUMERIC_FEATURES],
            *[F.avg(n).alias(f"{n}__mean") for n in NUMERIC_FEATURES],
        )
        .collect()[0]
        .asDict()
    )
    rows = stats["__rows"]
    quantiles = train.approxQuantile(list(NUMERIC_FEATURES), list(QUANTILES), QUANTILE_RELATIVE_ERROR)
    own = {name: _own_edges(qs) for name, qs in zip(NUMERIC_FEATURES, quantiles, strict=False)}
    binned = {
        name: [float(edge) for edge in (reference_edges or {}).get(name, own[name])]
        for name in NUMERIC_FEATURES
    }
    bins = [column for name in NUMERIC_FEATURES for column in _bin_counts(name, own[name], "own")]
    if reference_edges is not None:
        bins += [column for name in NUMERIC_FEATURES for column in _bin_counts(name, binned[name], "ref")]
    counts = train.agg(*bins).collect()[0].asDict()

    def profile(edges: Mapping[str, list[float]], tag: str) -> dict[str, dict[str, Any]]:
        result = {}
        for name, qs in zip(NUMERIC_FEATURES, quantiles, strict=False):
            present = stats[f"{name}__count"]
            result[name] = {
                "count": present,
                "missing_fraction": (rows - present) / rows if rows else 0.0,
                "mean": stats[f"{name}__mean"],
                "quantiles": dict(zip((str(q) for q in QUANTILES), qs, strict=False)),
                "histogram": {
                    "edges": edges[name],
                    "counts": [int(counts[f"{name}__{tag}{i}"] or 0) for i in range(HISTOGRAM_BINS)],
                },
            }
        return result

    return profile(own, "own"), (profile(binned, "ref") if reference_edges is not None else None)


def categorical_profile(train: DataFrame) -> dict[str, dict[str, Any]]:
    """Distinct count and top values' shares per categorical feature (one pass for all)."""
    pairs = train.select(
        F.explode(
            F.array(
                *[F.struct(F.lit(n).alias("feature"), F.col(n).alias("value")) for n in CATEGORICAL_FEATURES]
            )
        ).alias("pair")
    ).select("pair.feature", "pair.value")
    counts = pairs.groupBy("feature", "value").count().collect()
    by_feature: dict[str, list[tuple[str, int]]] = {n: [] for n in CATEGORICAL_FEATURES}
    for row in counts:
        by_feature[row["feature"]].append((row["value"], row["count"]))
    profile = {}
    for name, values in by_feature.items():
        total = sum(c for _, c in values)
        values.sort(key=lambda vc: (-vc[1], vc[0]))
        profile[name] = {
            "distinct": len(values),
            "top_values": {v: c / total for v, c in values[:TOP_VALUES]} if total else {},
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
    features: DataFrame, edges: Mapping[str, list[float]] | None = None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The profile of ``features`` (every split: raw features, label, split) on its own edges --
    what a model trained on it carries as its reference -- and, given ``edges``
    (:func:`reference_edges` of the production model's profile), the same on those edges, for
    the drift check (:mod:`kfstack.monitoring.drift`)."""
    train = features.where(F.col(SPLIT) == "train")
    label_rates = {
        row[SPLIT]: {"rows": row["rows"], "label_rate": row["label_rate"]}
        for row in features.groupBy(SPLIT)
        .agg(F.count(F.lit(1)).alias("rows"), F.avg(LABEL_COLUMN).alias("label_rate"))
        .collect()
    }
    categorical = categorical_profile(train)
    own, on_reference = numeric_profiles(train, edges)

    def profile(numeric: dict[str, Any], binned_on: str) -> dict[str, Any]:
        return {
            "format_version": PROFILE_FORMAT_VERSION,
            "computed_on": "train split, raw features (before imputation and scaling)",
            "splits": label_rates,
            "histogram_edges": binned_on,
            "numeric": numeric,
            "categorical": categorical,
        }

    return profile(own, "this data"), (profile(on_reference, "reference profile") if on_reference else None)
