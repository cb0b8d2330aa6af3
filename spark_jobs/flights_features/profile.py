"""The data profile: what the training data looked like, for drift checks on later data.

Computed on the *raw* features of the training split (before imputation and scaling, so a later
batch is compared in the units a person reads): per numeric feature the count, missing share,
mean, quantiles and a fixed-edge histogram; per categorical feature the distinct count and the
most frequent values' shares; the label rate per split.

A drift check bins a later window's profile with the reference's histogram edges
(``--reference-profile-uri``), so the two compare bin by bin (:mod:`kfstack.monitoring.drift`);
values beyond the edges count in the end bins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
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


def numeric_profile(
    train: DataFrame, reference_edges: Mapping[str, list[float]] | None = None
) -> dict[str, dict[str, Any]]:
    """Count, missing share, mean, quantiles and histogram per numeric feature (three passes).

    Args:
        reference_edges: Histogram edges per feature to bin with instead of this data's own
            (another profile's, so that the two compare bin by bin for a drift check).
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

    edges: dict[str, list[float]] = {}
    for name, qs in zip(NUMERIC_FEATURES, quantiles, strict=False):
        if reference_edges is not None:
            edges[name] = [float(edge) for edge in reference_edges[name]]
            continue
        lo, hi = (qs[0], qs[-1]) if qs else (0.0, 0.0)
        width = (hi - lo) / HISTOGRAM_BINS or 1.0
        edges[name] = [lo + i * width for i in range(HISTOGRAM_BINS + 1)]
    bins = []
    for name in NUMERIC_FEATURES:
        lo, width = edges[name][0], (edges[name][1] - edges[name][0]) or 1.0
        # Values on the last edge belong to the last bin, like numpy.histogram; values beyond
        # either end (another data's edges, or the approximate extremes) to the end bins, where a
        # shift then shows.
        index = F.greatest(F.least(F.floor((F.col(name) - lo) / width), F.lit(HISTOGRAM_BINS - 1)), F.lit(0))
        bins += [
            F.sum(F.when(index == i, 1).otherwise(0)).alias(f"{name}__bin{i}") for i in range(HISTOGRAM_BINS)
        ]
    counts = train.agg(*bins).collect()[0].asDict()

    profile = {}
    for name, qs in zip(NUMERIC_FEATURES, quantiles, strict=False):
        present = stats[f"{name}__count"]
        profile[name] = {
            "count": present,
            "missing_fraction": (rows - present) / rows if rows else 0.0,
            "mean": stats[f"{name}__mean"],
            "quantiles": dict(zip((str(q) for q in QUANTILES), qs, strict=False)),
            "histogram": {
                "edges": edges[name],
                "counts": [int(counts[f"{name}__bin{i}"] or 0) for i in range(HISTOGRAM_BINS)],
            },
        }
    return profile


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
    """Another profile's histogram edges per numeric feature (what :func:`build_profile` bins
    with for a drift check against that profile).

    Raises:
        InvalidParameterError: ``reference`` lacks a numeric feature's histogram.
    """
    try:
        return {name: list(reference["numeric"][name]["histogram"]["edges"]) for name in NUMERIC_FEATURES}
    except (KeyError, TypeError) as err:
        raise InvalidParameterError(
            f"reference profile: no histogram edges for numeric feature {err}; a profile of another "
            f"feature job version?"
        ) from err


def build_profile(features: DataFrame, edges: Mapping[str, list[float]] | None = None) -> dict[str, Any]:
    """The whole profile; ``features`` holds every split (raw features, label, split).

    Args:
        edges: Histogram edges to bin with (:func:`reference_edges` of the production model's
            training profile, for a drift check, :mod:`kfstack.monitoring.drift`); default:
            this data's own.
    """
    train = features.where(F.col(SPLIT) == "train")
    label_rates = {
        row[SPLIT]: {"rows": row["rows"], "label_rate": row["label_rate"]}
        for row in features.groupBy(SPLIT)
        .agg(F.count(F.lit(1)).alias("rows"), F.avg(LABEL_COLUMN).alias("label_rate"))
        .collect()
    }
    return {
        "format_version": PROFILE_FORMAT_VERSION,
        "computed_on": "train split, raw features (before imputation and scaling)",
        "splits": label_rates,
        "histogram_edges": "reference profile" if edges is not None else "this data",
        "numeric": numeric_profile(train, edges),
        "categorical": categorical_profile(train),
    }
