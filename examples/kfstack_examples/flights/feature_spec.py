"""The feature spec: the contract between the Spark feature job, the trainers and serving.

The Spark job (``kfstack_examples.flights.features_job``) *writes* it as ``feature_spec.json``
beside the Parquet shards; the trainers read it to size their embeddings and to pick columns;
the predictor reads it to turn a raw request into exactly the tensors the model saw in
training. Pure Python + NumPy on purpose: serving must not need Spark.

Shard layout (one directory, the ``features`` Dataset)::

    <features>/train/part-*.parquet        N shards per split, ranks read disjoint shards
    <features>/validation/part-*.parquet
    <features>/test/part-*.parquet
    <features>/feature_spec.json           this module's FeatureSpec
    <features>/plane_lookup.parquet        plane attributes keyed by tailnum (for serving)
    <features>/airport_lookup.parquet      destination attributes keyed by FAA code (for serving)
    <features>/job_report.json             rows read / written / quarantined (per reason, split)
    <features>/data_lineage.json           what a model trained on it records (kfstack.contracts)
    <features>/profile.json                per-feature quantiles/histograms, label rate
    <features>/holdout_requests.parquet    labelled test-split flights as requests (canary analysis)
    <features>/test_requests.parquet       every test-split flight as a labelled request (evaluation)

Shard columns: ``label`` (int, 0/1), one ``cat__<name>`` int column per categorical feature
(index into its vocabulary; ``len(vocabulary)`` is the out-of-vocabulary bucket) and one
``num__<name>`` float column per numeric feature (imputed, then standardised).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import fsspec
import numpy as np

FEATURE_SPEC_FILE = "feature_spec.json"
PLANE_LOOKUP_FILE = "plane_lookup.parquet"
AIRPORT_LOOKUP_FILE = "airport_lookup.parquet"
JOB_REPORT_FILE = "job_report.json"
PROFILE_FILE = "profile.json"
# The profile binned on a reference profile's edges (a drift check's input; only with a reference).
DRIFT_PROFILE_FILE = "drift_profile.json"
HOLDOUT_FILE = "holdout_requests.parquet"
TEST_REQUESTS_FILE = "test_requests.parquet"
SPLITS = ("train", "validation", "test")
# What a trained model's directory carries beside ``model.onnx`` so that it serves on its own
# (the spec and the lookups of the request transform) and its training data's profile travels
# with it (drift checks): the spec and profile as they are, each Parquet lookup as a JSON list of
# records (MODEL_LOOKUP_FILES) -- a model server then needs no Parquet reader, whose first use
# alone costs it some 20 MiB of resident memory.
MODEL_FEATURE_FILES = (FEATURE_SPEC_FILE, PROFILE_FILE)
MODEL_LOOKUP_FILES = {
    PLANE_LOOKUP_FILE: "plane_lookup.json",
    AIRPORT_LOOKUP_FILE: "airport_lookup.json",
}
LABEL_COLUMN = "label"
CATEGORICAL_PREFIX = "cat__"
NUMERIC_PREFIX = "num__"
SPEC_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class CategoricalFeature:
    """A string feature looked up in a vocabulary.

    Attributes:
        name: Feature name; its shard column is ``cat__<name>``.
        vocabulary: Known values, index = position. Unknown values map to ``len(vocabulary)``.
    """

    name: str
    vocabulary: tuple[str, ...]

    @property
    def column(self) -> str:
        return CATEGORICAL_PREFIX + self.name

    @property
    def oov_index(self) -> int:
        return len(self.vocabulary)

    @functools.cached_property
    def index(self) -> dict[str, int]:
        """Value -> position, built once (a server encodes every request with it)."""
        return {value: i for i, value in enumerate(self.vocabulary)}

    @property
    def cardinality(self) -> int:
        """Embedding rows needed: the vocabulary plus the out-of-vocabulary bucket."""
        return len(self.vocabulary) + 1


@dataclasses.dataclass(frozen=True)
class NumericFeature:
    """A numeric feature: missing values take ``impute_value``, then ``(x - mean) / std``.

    Attributes:
        name: Feature name; its shard column is ``num__<name>``.
        impute_value: Value used when the raw value is missing (the training median).
        mean: Training mean after imputation.
        std: Training (sample) standard deviation after imputation. When it is 0 the feature
            was constant in training and encodes as 0.0, as Spark's ``StandardScaler`` does.
    """

    name: str
    impute_value: float
    mean: float
    std: float

    @property
    def column(self) -> str:
        return NUMERIC_PREFIX + self.name


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """Column order, vocabularies, imputation values and scaling statistics.

    ``categorical`` and ``numeric`` are in model input order: the model takes an int64
    matrix ``[batch, len(categorical)]`` and a float32 matrix ``[batch, len(numeric)]``.
    ``extras`` holds job-specific facts (split rule, label definition, source row counts)
    that consumers may show but must not depend on.
    """

    categorical: tuple[CategoricalFeature, ...]
    numeric: tuple[NumericFeature, ...]
    label: str = LABEL_COLUMN
    extras: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def categorical_columns(self) -> list[str]:
        return [f.column for f in self.categorical]

    @property
    def numeric_columns(self) -> list[str]:
        return [f.column for f in self.numeric]

    @property
    def cardinalities(self) -> list[int]:
        return [f.cardinality for f in self.categorical]

    def raw_numeric(self, columns: Mapping[str, Sequence[Any]]) -> np.ndarray:
        """The numeric features' raw values, float64 ``[n, len(numeric)]`` in spec order, NaN
        where missing (None): all columns in one NumPy pass instead of one per feature (what a
        single-record request costs)."""
        n = len(next(iter(columns.values()))) if columns else 0
        return (
            np.array(
                [[np.nan if v is None else v for v in columns[f.name]] for f in self.numeric],
                dtype=np.float64,
            )
            .reshape(len(self.numeric), n)
            .T
        )

    def encode(
        self, columns: Mapping[str, Sequence[Any]], raw_numeric: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Turns raw feature columns into the model's two inputs, as the Spark job did.

        Args:
            columns: Feature name -> values (one per example). Categorical values are strings
                (unknown ones go to the out-of-vocabulary bucket); numeric values are floats,
                NaN or None when missing (imputed).
            raw_numeric: :meth:`raw_numeric` of ``columns`` where the caller has it already.

        Returns:
            ``(categorical, numeric)``: int64 ``[n, len(categorical)]`` and float32
            ``[n, len(numeric)]``, in spec order.
        """
        n = len(next(iter(columns.values()))) if columns else 0
        categorical = np.empty((n, len(self.categorical)), dtype=np.int64)
        for j, feature in enumerate(self.categorical):
            index, oov = feature.index, feature.oov_index
            categorical[:, j] = [index.get(v, oov) for v in columns[feature.name]]
        # In float64 as the Spark job computes, then float32.
        impute, mean, std = self._numeric_statistics
        raw = self.raw_numeric(columns) if raw_numeric is None else raw_numeric
        values = np.where(np.isnan(raw), impute, raw)
        constant = std == 0.0  # constant in training: encodes as 0.0, as Spark's StandardScaler does
        scaled = np.where(constant, 0.0, (values - mean) / np.where(constant, 1.0, std))
        return categorical, scaled.astype(np.float32)

    @functools.cached_property
    def _numeric_statistics(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Imputation values, means and standard deviations of the numeric features, in order."""
        return (
            np.array([f.impute_value for f in self.numeric], dtype=np.float64),
            np.array([f.mean for f in self.numeric], dtype=np.float64),
            np.array([f.std for f in self.numeric], dtype=np.float64),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": SPEC_FORMAT_VERSION,
            "label": self.label,
            "categorical": [
                {
                    "name": f.name,
                    "column": f.column,
                    "vocabulary": list(f.vocabulary),
                    "oov_index": f.oov_index,
                }
                for f in self.categorical
            ],
            "numeric": [
                {
                    "name": f.name,
                    "column": f.column,
                    "impute_value": f.impute_value,
                    "mean": f.mean,
                    "std": f.std,
                }
                for f in self.numeric
            ],
            "column_order": [self.label, *self.categorical_columns, *self.numeric_columns],
            "extras": self.extras,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FeatureSpec:
        version = data.get("format_version")
        if version != SPEC_FORMAT_VERSION:
            raise ValueError(
                f"feature spec format_version {version!r} is not supported (expected {SPEC_FORMAT_VERSION})"
            )
        return cls(
            categorical=tuple(
                CategoricalFeature(name=c["name"], vocabulary=tuple(c["vocabulary"]))
                for c in data["categorical"]
            ),
            numeric=tuple(
                NumericFeature(
                    name=n["name"],
                    impute_value=float(n["impute_value"]),
                    mean=float(n["mean"]),
                    std=float(n["std"]),
                )
                for n in data["numeric"]
            ),
            label=data.get("label", LABEL_COLUMN),
            extras=dict(data.get("extras", {})),
        )

    def save(self, uri: str) -> None:
        """Writes the spec as JSON to ``uri`` (any fsspec URI)."""
        with fsspec.open(uri, "w") as f:
            json.dump(self.to_dict(), f, indent=2, sort_keys=False)

    @classmethod
    def load(cls, uri: str) -> FeatureSpec:
        """Reads a spec written by :meth:`save`. ``uri`` may be the file or its directory."""
        if not uri.endswith(".json"):
            uri = uri.rstrip("/") + "/" + FEATURE_SPEC_FILE
        with fsspec.open(uri, "r") as f:
            return cls.from_dict(json.load(f))


def copy_model_feature_files(features_uri: str, model_uri: str) -> list[str]:
    """Writes into ``model_uri`` the :data:`MODEL_FEATURE_FILES` and :data:`MODEL_LOOKUP_FILES`
    of ``features_uri`` that it has (a features directory made for a test may lack lookups).

    Returns:
        The names written.
    """
    import pyarrow.parquet as pq  # deferred: readers of the spec need no Parquet

    source_fs, source = fsspec.core.url_to_fs(features_uri)
    target_fs, target = fsspec.core.url_to_fs(model_uri)
    target_fs.makedirs(target, exist_ok=True)
    written = []
    for name in (*MODEL_FEATURE_FILES, *MODEL_LOOKUP_FILES):
        path = f"{source.rstrip('/')}/{name}"
        if not source_fs.exists(path):
            continue
        with source_fs.open(path, "rb") as src:
            if name in MODEL_LOOKUP_FILES:
                name = MODEL_LOOKUP_FILES[name]
                content = json.dumps(pq.read_table(src).to_pylist()).encode()
            else:
                content = src.read()
        with target_fs.open(f"{target.rstrip('/')}/{name}", "wb") as dst:
            dst.write(content)
        written.append(name)
    return written
