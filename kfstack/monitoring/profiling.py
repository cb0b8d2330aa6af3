"""A data profile of any Parquet dataset, in the form drift checks compare
(:func:`kfstack.monitoring.drift.compare_profiles`).

A team declares which columns are numeric, which categorical, and the label; :func:`profile_dataset`
then computes the profile the drift check compares (``profile.json``): per numeric column the
count, missing share, mean and a 10-bin histogram (equal width between the extremes, or a
reference profile's edges, so that two profiles compare bin by bin; values beyond the edges
count in the end bins), per categorical column the distinct count and its most frequent values'
shares, and the label rate (the mean label: a binary label's positive rate, a regression's mean).
Pure pyarrow and NumPy: a pipeline step calls it on a dataset, or a team's Spark job on the
Parquet it wrote.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kfstack.errors import InvalidParameterError
from kfstack.monitoring.drift import TRAIN_SPLIT

HISTOGRAM_BINS = 10
TOP_VALUES = 25
PROFILE_FILE = "profile.json"


def _edges(values: np.ndarray) -> list[float]:
    lo, hi = (float(values.min()), float(values.max())) if len(values) else (0.0, 0.0)
    width = (hi - lo) / HISTOGRAM_BINS or 1.0
    return [lo + i * width for i in range(HISTOGRAM_BINS + 1)]


def _histogram(values: np.ndarray, edges: Sequence[float]) -> list[int]:
    """Counts per bin; values beyond either end (another data's edges) fall into the end bins."""
    bins = len(edges) - 1
    lo, width = edges[0], (edges[1] - edges[0]) or 1.0
    index = np.clip(np.floor((values - lo) / width), 0, bins - 1).astype(np.int64)
    return np.bincount(index, minlength=bins).tolist()


def _numeric(column: np.ndarray, reference: Mapping[str, Any] | None) -> dict[str, Any]:
    rows = len(column)
    present = column[np.isfinite(column)]
    edges = list(reference["histogram"]["edges"]) if reference else _edges(present)
    return {
        "count": len(present),
        "missing_fraction": (rows - len(present)) / rows if rows else 0.0,
        "mean": float(present.mean()) if len(present) else None,
        "histogram": {"edges": edges, "counts": _histogram(present, edges)},
    }


def _categorical(values: Sequence[Any]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for value in values:
        key = "(missing)" if value is None else str(value)
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    total = len(values)
    return {
        "distinct": len(counts),
        "top_values": {value: count / total for value, count in ranked[:TOP_VALUES]} if total else {},
    }


def profile_dataset(
    uri: str,
    numeric: Sequence[str],
    categorical: Sequence[str],
    label: str = "",
    reference: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The profile of the Parquet dataset at ``uri`` (a file or a folder of them).

    Args:
        numeric, categorical: The declared columns.
        label: The label column (its mean is the profile's label rate); empty: none.
        reference: A profile whose histogram edges the numeric columns are binned on.

    Raises:
        InvalidParameterError: A declared column is missing or not numeric, or none is declared.
    """
    import pyarrow.dataset as ds

    if not (numeric or categorical):
        raise InvalidParameterError("a profile needs numeric_columns or categorical_columns")
    table = ds.dataset(uri, format="parquet").to_table()
    missing = [
        c for c in (*numeric, *categorical, *([label] if label else [])) if c not in table.column_names
    ]
    if missing:
        raise InvalidParameterError(f"the dataset at {uri} has no column {', '.join(missing)}")
    ref_numeric = (reference or {}).get("numeric") or {}
    profile: dict[str, Any] = {"rows": table.num_rows, "numeric": {}, "categorical": {}}
    for name in numeric:
        try:
            column = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
        except (TypeError, ValueError) as err:
            raise InvalidParameterError(f"numeric_columns: {name} is not numeric ({err})") from None
        profile["numeric"][name] = _numeric(column, ref_numeric.get(name))
    for name in categorical:
        profile["categorical"][name] = _categorical(table.column(name).to_pylist())
    if label:
        labels = table.column(label).to_numpy(zero_copy_only=False).astype(np.float64)
        rate = float(labels.mean()) if len(labels) and math.isfinite(labels.mean()) else None
        profile["splits"] = {TRAIN_SPLIT: {"rows": len(labels), "label_rate": rate}}
    return profile


def write_profile(profile: Mapping[str, Any], directory: str) -> str:
    """Writes ``profile.json`` into ``directory``; its path."""
    import os

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, PROFILE_FILE)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(profile, f, indent=2)
    return path
