"""A model's lineage: what made it, written beside it as ``lineage.json``, and how a model
reproduced from that record is compared with it.

Every trained model directory carries the record (the generic training step writes it, on
either platform): its model version (the run that trained it, as the deployment names it), the
pipeline version that ran, the run id, the data -- where the dataset was, and what its data step
recorded of it (``data_lineage.json``, :mod:`kfstack.contracts`: say a window, its content hash
and row count, the hash of a spec fitted on it) -- the
parameters that decide the result (the data step's and the training's, by pipeline parameter
name, with the hyperparameters tuning chose), and the last value of every metric the training
code declares. The local registry keeps the record with every model it ever served
(``models/<version>/lineage.json``), beside its history of what served when.

``kfstack reproduce MODEL_DIR`` runs the recorded pipeline version and parameters again on the
embedded platform and compares the new record with this one (:func:`compare`).

Hashes are SHA-256 of canonical JSON (sorted keys; floats rounded to
:data:`HASH_SIGNIFICANT_DIGITS` significant digits, so that the last bits of a floating-point
sum Spark computes in another partition order do not change a spec's identity).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
import os
from collections.abc import Mapping
from typing import Any

import fsspec

from kfstack.errors import InvalidParameterError

LINEAGE_FILE = "lineage.json"
FORMAT_VERSION = 1
HASH_SIGNIFICANT_DIGITS = 12
# The metrics a reproduction must match, and by how much by default (absolute). On CPU the same
# data, spec and seeds give bit-identical training in our tests; the tolerance is there for a
# different machine's float summation order (a different core count changes Spark's partitions).
DEFAULT_TOLERANCE = 1e-6


def model_version(run_id: str, run_dir: str) -> str:
    """The name a model is versioned by: the run that trained it. On the embedded platform the
    run's directory name (unique and readable, ``<pipeline>-20261124-101500``; kfp.local
    draws a new run id for every task), else the pipeline run's id."""
    return os.path.basename(run_dir.rstrip("/")) if run_dir else run_id


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.{HASH_SIGNIFICANT_DIGITS}g}") if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def document_hash(document: Any) -> str:
    """SHA-256 of ``document`` as canonical JSON (see the module docstring)."""
    text = json.dumps(_canonical(document), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Lineage:
    """One model's record (see the module docstring).

    Attributes:
        model_version: The run that trained it, as the deployment and the registry name it.
        pipeline: The pipeline that made it, as ``kfstack list`` names it (what
            ``kfstack reproduce`` runs again); empty when its training step was not told.
        pipeline_version: The pipeline version that ran (``<version>+<sha>[-dirty]``).
        kfstack_version: The package's version.
        run_id: The KFP run id (on the embedded platform kfp.local's, which differs per task).
        created: When the record was written (UTC, ISO).
        data: ``input_uri``, the dataset; and what its data step recorded (e.g. ``window``,
            ``content_hash``, ``rows_read``, ``feature_spec_hash``).
        parameters: Pipeline parameter name -> value, of everything that decides the model.
        metrics: The last value of each metric the training code declares.
    """

    model_version: str
    pipeline_version: str
    kfstack_version: str
    run_id: str
    created: str
    data: Mapping[str, Any]
    parameters: Mapping[str, Any]
    metrics: Mapping[str, float]
    pipeline: str = ""
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def save(self, model_uri: str) -> None:
        with fsspec.open(f"{model_uri.rstrip('/')}/{LINEAGE_FILE}", "w") as f:
            json.dump(self.to_dict(), f, indent=2, sort_keys=True)

    @classmethod
    def load(cls, model_dir: str) -> Lineage:
        """The record of the model directory ``model_dir``.

        Raises:
            InvalidParameterError: It has none, or not one this version can read.
        """
        path = os.path.join(model_dir, LINEAGE_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            raise InvalidParameterError(
                f"{model_dir} has no {LINEAGE_FILE}: not a model directory, or one trained before "
                f"models carried their lineage"
            ) from None
        except ValueError as err:
            raise InvalidParameterError(f"{path} is not JSON: {err}") from None
        if data.get("format_version") != FORMAT_VERSION:
            raise InvalidParameterError(
                f"{path} is of format {data.get('format_version')!r}; this version reads {FORMAT_VERSION}"
            )
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


@dataclasses.dataclass(frozen=True)
class Difference:
    """One compared item of a reproduction."""

    item: str
    recorded: Any
    reproduced: Any
    matches: bool
    detail: str = ""


# Where the dataset was: a reproduction writes its own, so it is not compared.
INPUT_URI = "input_uri"


def compare(recorded: Lineage, reproduced: Lineage, tolerance: float = DEFAULT_TOLERANCE) -> list[Difference]:
    """Each item a reproduction must match: what either record says of its data (whatever its
    data step recorded; not where the dataset was), the parameters, and every recorded metric
    within ``tolerance`` (absolute)."""
    items = []
    for key in sorted((set(recorded.data) | set(reproduced.data)) - {INPUT_URI}):
        a, b = recorded.data.get(key), reproduced.data.get(key)
        items.append(Difference(f"data.{key}", a, b, a == b))
    recorded_parameters, reproduced_parameters = dict(recorded.parameters), dict(reproduced.parameters)
    differing = sorted(
        key
        for key in set(recorded_parameters) | set(reproduced_parameters)
        if recorded_parameters.get(key) != reproduced_parameters.get(key)
    )
    # One row when they all match; else one per parameter that differs, naming it.
    if not differing:
        items.append(Difference("parameters", f"{len(recorded_parameters)} equal", "", True))
    for key in differing:
        items.append(
            Difference(
                f"parameters.{key}", recorded_parameters.get(key), reproduced_parameters.get(key), False
            )
        )
    for name, value in sorted(recorded.metrics.items()):
        again = reproduced.metrics.get(name)
        delta = math.inf if again is None else abs(float(again) - float(value))
        items.append(
            Difference(f"metrics.{name}", value, again, delta <= tolerance, f"|difference| {delta:.3g}")
        )
    return items
