"""The feature spec: the contract between the Spark feature job, the trainers and serving.

The Spark job (``kfstack.spark_jobs.flights_features``) *writes* it as ``feature_spec.json``
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
    <features>/profile.json                per-feature quantiles/histograms, label rate

Shard columns: ``label`` (int, 0/1), one ``cat__<name>`` int column per categorical feature
(index into its vocabulary; ``len(vocabulary)`` is the out-of-vocabulary bucket) and one
``num__<name>`` float column per numeric feature (imputed, then standardised).
"""

from __future__ import annotations

import dataclasses
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
SPLITS = ("train", "validation", "test")
# The features' files a trained model's directory carries beside ``model.onnx``, so that the
# model serves on its own (the spec and the lookups of the request transform) and its training
# data's profile travels with it (drift checks).
MODEL_FEATURE_FILES = (FEATURE_SPEC_FILE, PLANE_LOOKUP_FILE, AIRPORT_LOOKUP_FILE, PROFILE_FILE)
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

    def encode(self, columns: Mapping[str, Sequence[Any]]) -> tuple[np.ndarray, np.ndarray]:
        """Turns raw feature columns into the model's two inputs, as the Spark job did.

        Args:
            columns: Feature name -> values (one per example). Categorical values are strings
                (unknown ones go to the out-of-vocabulary bucket); numeric values are floats,
                NaN or None when missing (imputed).

        Returns:
            ``(categorical, numeric)``: int64 ``[n, len(categorical)]`` and float32
            ``[n, len(numeric)]``, in spec order.
        """
        n = len(next(iter(columns.values()))) if columns else 0
        categorical = np.empty((n, len(self.categorical)), dtype=np.int64)
        for j, feature in enumerate(self.categorical):
            index = {value: i for i, value in enumerate(feature.vocabulary)}
            categorical[:, j] = [index.get(v, feature.oov_index) for v in columns[feature.name]]
        numeric = np.empty((n, len(self.numeric)), dtype=np.float32)
        for j, numeric_feature in enumerate(self.numeric):
            raw = columns[numeric_feature.name]
            values = np.array([np.nan if v is None else v for v in raw], dtype=np.float64)
            values = np.where(np.isnan(values), numeric_feature.impute_value, values)
            if numeric_feature.std == 0.0:
                numeric[:, j] = 0.0
            else:
                numeric[:, j] = (values - numeric_feature.mean) / numeric_feature.std
        return categorical, numeric

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
    """Copies the :data:`MODEL_FEATURE_FILES` that ``features_uri`` has into ``model_uri``.

    Returns:
        The names copied (a features directory made for a test may lack the lookups).
    """
    source_fs, source = fsspec.core.url_to_fs(features_uri)
    target_fs, target = fsspec.core.url_to_fs(model_uri)
    target_fs.makedirs(target, exist_ok=True)
    copied = []
    for name in MODEL_FEATURE_FILES:
        path = f"{source.rstrip('/')}/{name}"
        if source_fs.exists(path):
            with source_fs.open(path, "rb") as src:
                content = src.read()
            with target_fs.open(f"{target.rstrip('/')}/{name}", "wb") as dst:
                dst.write(content)
            copied.append(name)
    return copied
