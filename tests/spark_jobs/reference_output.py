"""A feature job output's fingerprint, to hold a changed job to the output it wrote before.

The fingerprint keeps what must not change exactly -- row accounting, quarantine reasons and
rows, vocabularies, split sizes, the label and every categorical index row by row, lookups and
holdout rows, the exact quantiles and histograms -- and the float statistics that depend on how
Spark partitions the work (means, standard deviations, sums of scaled values) as numbers that
:func:`compare` checks within a relative tolerance.

    python -m tests.spark_jobs.reference_output OUTPUT_DIR QUARANTINE_DIR > fingerprint.json
    python -m tests.spark_jobs.reference_output OUTPUT_DIR QUARANTINE_DIR --compare fingerprint.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
from typing import Any

import pandas as pd

from kfstack_examples.flights.feature_spec import (
    AIRPORT_LOOKUP_FILE,
    CATEGORICAL_PREFIX,
    DRIFT_PROFILE_FILE,
    FEATURE_SPEC_FILE,
    HOLDOUT_FILE,
    JOB_REPORT_FILE,
    LABEL_COLUMN,
    NUMERIC_PREFIX,
    PLANE_LOOKUP_FILE,
    PROFILE_FILE,
    SPLITS,
)

# Float statistics that depend on partitioning: sums in another order differ in the last bits.
RELATIVE_TOLERANCE = 1e-3
ABSOLUTE_TOLERANCE = 1e-6
# What the job records about its own run, not about its output.
REPORT_FIELDS_NOT_COMPARED = ("seconds", "phases", "input_uri", "output_uri", "quarantine_uri")


def _rows_digest(frame: pd.DataFrame) -> str:
    """SHA-256 of the rows as text, in sorted order: the same rows in any order or file layout."""
    lines = sorted(frame.astype(str).agg("\x1f".join, axis=1)) if len(frame) else []
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _split_fingerprint(split_dir: str) -> dict[str, Any]:
    files = sorted(f for f in os.listdir(split_dir) if f.endswith(".parquet"))
    frame = pd.concat([pd.read_parquet(os.path.join(split_dir, f)) for f in files], ignore_index=True)
    categorical = [c for c in frame.columns if c.startswith(CATEGORICAL_PREFIX)]
    numeric = [c for c in frame.columns if c.startswith(NUMERIC_PREFIX)]
    return {
        "files": len(files),
        "rows": len(frame),
        "columns": list(frame.columns),
        "label_sum": int(frame[LABEL_COLUMN].sum()),
        # The label and every index, row by row (as a multiset): exact.
        "label_and_indices": _rows_digest(frame[[LABEL_COLUMN, *categorical]]),
        "numeric": {
            c: {
                "sum": float(frame[c].astype("float64").sum()),
                "min": float(frame[c].min()),
                "max": float(frame[c].max()),
            }
            for c in numeric
        },
    }


def fingerprint(output_dir: str, quarantine_dir: str) -> dict[str, Any]:
    def load(name: str) -> Any:
        path = os.path.join(output_dir, name)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    report = {k: v for k, v in load(JOB_REPORT_FILE).items() if k not in REPORT_FIELDS_NOT_COMPARED}
    report["job"] = {k: v for k, v in report["job"].items() if k != "data_uri"}  # a temporary path
    quarantine = pd.read_parquet(quarantine_dir)
    return {
        "report": report,
        "spec": load(FEATURE_SPEC_FILE),
        "profile": load(PROFILE_FILE),
        "drift_profile": load(DRIFT_PROFILE_FILE),
        "splits": {split: _split_fingerprint(os.path.join(output_dir, split)) for split in SPLITS},
        "quarantine": {
            "rows": len(quarantine),
            "by_reason": {
                str(k): int(v) for k, v in quarantine["reason"].value_counts().sort_index().items()
            },
            "rows_digest": _rows_digest(quarantine),
        },
        "lookups": {
            name: _rows_digest(pd.read_parquet(os.path.join(output_dir, name)))
            for name in (PLANE_LOOKUP_FILE, AIRPORT_LOOKUP_FILE)
        },
        "holdout": _rows_digest(pd.read_parquet(os.path.join(output_dir, HOLDOUT_FILE))),
    }


def compare(expected: Any, actual: Any) -> list[str]:
    """The differences, one line each: floats within the tolerances, everything else exact."""
    return [
        f"{where}: {a!r}, expected {e!r}"
        for where, e, a in _differences(_unscaled(expected), _unscaled(actual), "")
    ]


def _unscaled(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """``fingerprint`` with the shards' scaled sums, minima and maxima in the feature's own units
    (``std * z + mean`` by the fingerprint's spec). Scaled, a column's sum is a near-cancelling
    sum of signed terms: a shift of the mean far inside the tolerance (e.g. the imputed median
    one rank over) moves it by a large part of itself."""
    if not isinstance(fingerprint.get("splits"), dict) or not isinstance(fingerprint.get("spec"), dict):
        return fingerprint
    scales = {NUMERIC_PREFIX + f["name"]: (f["std"], f["mean"]) for f in fingerprint["spec"]["numeric"]}
    unscaled = json.loads(json.dumps(fingerprint))
    for split in unscaled["splits"].values():
        for column, figures in split["numeric"].items():
            std, mean = scales[column]
            figures["sum"] = std * figures["sum"] + split["rows"] * mean
            figures["min"], figures["max"] = (std * figures[k] + mean for k in ("min", "max"))
    return unscaled


def _differences(expected: Any, actual: Any, where: str) -> list[tuple[str, Any, Any]]:
    if isinstance(expected, dict) and isinstance(actual, dict):
        differences = [(f"{where}/{k}", expected[k], "missing") for k in expected if k not in actual]
        differences += [(f"{where}/{k}", "not expected", actual[k]) for k in actual if k not in expected]
        for key in expected.keys() & actual.keys():
            differences += _differences(expected[key], actual[key], f"{where}/{key}")
        return differences
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [(f"{where} (items)", len(expected), len(actual))]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in _differences(e, a, f"{where}[{i}]")
        ]
    if isinstance(expected, float) or isinstance(actual, float):
        if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
            if math.isnan(expected) and math.isnan(actual):
                return []
            if math.isclose(expected, actual, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE):
                return []
    elif expected == actual:
        return []
    return [(where, expected, actual)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir")
    parser.add_argument("quarantine_dir")
    parser.add_argument("--compare", metavar="FINGERPRINT_JSON")
    args = parser.parse_args(argv)
    found = fingerprint(args.output_dir, args.quarantine_dir)
    if not args.compare:
        json.dump(found, sys.stdout, indent=1, sort_keys=True)
        return 0
    with open(args.compare) as f:
        differences = compare(json.load(f), found)
    print("\n".join(differences) or "equal")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
