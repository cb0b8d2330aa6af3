"""The data profile: what the training data looked like, for drift checks on later data.

Computed on the *raw* features of the training split (before imputation and scaling, so a later
batch is compared in the units a person reads): per numeric feature the count, missing share,
mean, quantiles and a fixed-edge histogram; per categorical feature the distinct count and the
most frequent values' shares; the label rate per split.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kfstack.features import LABEL_COLUMN
from kfstack.flights.features import CATEGORICAL_FEATURES, NUMERIC_FEATURES
from kfstack.spark_jobs.flights_features.featurize import SPLIT

QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)
QUANTILE_RELATIVE_ERROR = 0.001
HISTOGRAM_BINS = 10
TOP_VALUES = 25
PROFILE_FORMAT_VERSION = 1


def numeric_profile(train: DataFrame) -> dict[str, dict[str, Any]]:
    """Count, missing share, mean, quantiles and histogram per numeric feature (three passes)."""
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
        lo, hi = (qs[0], qs[-1]) if qs else (0.0, 0.0)
        width = (hi - lo) / HISTOGRAM_BINS or 1.0
        edges[name] = [lo + i * width for i in range(HISTOGRAM_BINS + 1)]
    bins = []
    for name in NUMERIC_FEATURES:
        lo, width = edges[name][0], edges[name][1] - edges[name][0]
        # Values on the last edge belong to the last bin, like numpy.histogram.
        index = F.least(F.floor((F.col(name) - lo) / width), F.lit(HISTOGRAM_BINS - 1))
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


def build_profile(features: DataFrame) -> dict[str, Any]:
    """The whole profile; ``features`` holds every split (raw features, label, split)."""
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
        "numeric": numeric_profile(train),
        "categorical": categorical_profile(train),
    }
