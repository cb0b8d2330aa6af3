"""Records out of inference requests: both KServe protocols, one schema, errors that name the field.

A model server for tabular data takes *records* (field name -> value). They arrive in one of
two shapes:

- **V1** (``POST /v1/models/<m>:predict``): ``{"instances": [{"field": value, ...}, ...]}``,
  one JSON object per record. Fields the schema does not name are ignored, so a raw row of the
  source table can be sent as it is.
- **V2 / Open Inference Protocol** (``POST /v2/models/<m>/infer``): one input tensor per field,
  columnar, all of shape ``[n]``: ``{"inputs": [{"name": "distance", "shape": [2],
  "datatype": "FP64", "data": [1400, 1416]}, ...]}``. Strings travel as ``BYTES``; a missing value
  of an optional field is ``null`` in ``data``. Inputs the schema does not name are ignored.

Every value is checked against the schema (:class:`Field`) before anything is computed, and
the first problem raises :class:`BadRecordError` with the field's place in the request
(``instances[3].distance``, ``inputs[distance].data[1]``), which a server turns into a 400.
Pure Python on purpose: the analysis and tests use it without a server.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from kfstack.errors import BadInputError

Kind = Literal["int", "float", "str"]
INT: Kind = "int"
FLOAT: Kind = "float"
STRING: Kind = "str"
# V2 datatypes a field of each kind accepts.
_INTEGERS = ("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64")
V2_DATATYPES: Mapping[Kind, tuple[str, ...]] = {
    INT: (*_INTEGERS, "FP32", "FP64"),
    FLOAT: (*_INTEGERS, "FP16", "FP32", "FP64"),
    STRING: ("BYTES",),
}
# Beyond this a number is not a measurement but an overflow (JSON has no infinity; 1e400 parses
# as one in some decoders, and a 400-digit integer as an int no float holds). The bound also
# keeps every standardised feature finite in float32, the model's input type.
LARGEST_MAGNITUDE = 1e15


class BadRecordError(BadInputError, ValueError):
    """A request that cannot be turned into records; the message names the field."""


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a record.

    Attributes:
        name: The field's name in the request.
        kind: ``int`` (a JSON integer, or a float with no fraction: tables read through pandas
            turn integer columns with gaps into floats), ``float`` or ``str``.
        required: A required field must be present and not null; an optional one may be either,
            and reaches the model as ``None``.
    """

    name: str
    kind: Kind
    required: bool = True

    def check(self, value: Any, where: str) -> Any:
        """``value`` as this field's Python type, or ``None`` for an allowed missing value.

        Strings are trimmed, and an empty one is a missing value, as a table reader takes them.

        Raises:
            BadRecordError: A missing required value, the wrong type, or a number beyond
                :data:`LARGEST_MAGNITUDE` (infinities and NaN included).
        """
        if self.kind == STRING and isinstance(value, str):
            value = value.strip() or None
        if value is None:
            if self.required:
                raise BadRecordError(f"{where}: required, got null or an empty string")
            return None
        if self.kind == STRING:
            if not isinstance(value, str):
                raise BadRecordError(f"{where}: expected a string, got {_describe(value)}")
            return value
        # bool is an int in Python, never a number in a request.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadRecordError(f"{where}: expected a number, got {_describe(value)}")
        # The magnitude first: an int too large for a float makes math.isfinite raise.
        if abs(value) > LARGEST_MAGNITUDE or not math.isfinite(value):
            raise BadRecordError(
                f"{where}: expected a finite number of magnitude at most {LARGEST_MAGNITUDE:g}, "
                f"got {str(value)[:40]}"
            )
        if self.kind == INT:
            if value != int(value):
                raise BadRecordError(f"{where}: expected an integer, got {value!r}")
            return int(value)
        return float(value)


class Schema:
    """The fields of a record and the largest batch a request may carry."""

    def __init__(self, fields: Sequence[Field], max_batch: int) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch={max_batch} must be at least 1")
        self.fields = tuple(fields)
        self.max_batch = max_batch
        self._by_name = {f.name: f for f in self.fields}

    def _batch_size(self, n: int, where: str) -> None:
        if n == 0:
            raise BadRecordError(f"{where}: empty batch; send at least one record")
        if n > self.max_batch:
            raise BadRecordError(
                f"{where}: {n} records, more than the {self.max_batch} one request may carry"
            )

    def v2_inputs(self) -> list[dict[str, Any]]:
        """The V2 model metadata of the inputs: one columnar tensor per field, shape ``[-1]``,
        with the datatype a client should send (``BYTES``, ``INT64``, ``FP64``)."""
        datatypes = {STRING: "BYTES", INT: "INT64", FLOAT: "FP64"}
        return [{"name": f.name, "datatype": datatypes[f.kind], "shape": [-1]} for f in self.fields]

    def from_v1(self, payload: Any) -> list[dict[str, Any]]:
        """Records of a V1 body (``{"instances": [...]}``), checked.

        Raises:
            BadRecordError: See the module docstring.
        """
        if not isinstance(payload, Mapping):
            raise BadRecordError(
                f'body: expected a JSON object {{"instances": [...]}}, got {_describe(payload)}'
            )
        instances = payload.get("instances")
        if not isinstance(instances, list):
            raise BadRecordError(f"instances: expected a list of records, got {_describe(instances)}")
        self._batch_size(len(instances), "instances")
        return self.typed(instances, "instances")

    def typed(self, rows: Sequence[Any], where: str) -> list[dict[str, Any]]:
        """Records of field mappings (a V1 body's instances, a file's rows), each checked and
        typed by its field.

        Raises:
            BadRecordError: The first bad row or value, named ``<where>[i].<field>``.
        """
        records = []
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise BadRecordError(f"{where}[{i}]: expected an object of fields, got {_describe(row)}")
            records.append({f.name: f.check(row.get(f.name), f"{where}[{i}].{f.name}") for f in self.fields})
        return records

    def from_v2(self, inputs: Sequence[Any]) -> list[dict[str, Any]]:
        """Records of V2 input tensors (objects with ``name``, ``shape``, ``datatype``, ``data``:
        KServe's ``InferInput``), checked.

        Raises:
            BadRecordError: See the module docstring; also a field sent twice, shapes other than
                ``[n]`` or disagreeing between inputs, and a datatype that does not fit the field.
        """
        columns: dict[str, list[Any]] = {}
        n: int | None = None
        for tensor in inputs:
            field = self._by_name.get(tensor.name)
            if field is None:
                continue
            where = f"inputs[{tensor.name}]"
            if field.name in columns:
                raise BadRecordError(f"{where}: sent twice")
            shape = list(tensor.shape or [])
            if len(shape) != 1:
                raise BadRecordError(f"{where}.shape: expected [n] (one value per record), got {shape}")
            if tensor.datatype not in V2_DATATYPES[field.kind]:
                raise BadRecordError(
                    f"{where}.datatype: {tensor.datatype} does not carry a {field.kind} field; "
                    f"use one of {', '.join(V2_DATATYPES[field.kind])}"
                )
            data = tensor.data
            if not isinstance(data, list) or any(isinstance(v, list) for v in data):
                raise BadRecordError(f"{where}.data: expected a flat list of {shape[0]} values")
            if len(data) != shape[0]:
                raise BadRecordError(f"{where}.data: {len(data)} values for shape {shape}")
            if n is not None and shape[0] != n:
                raise BadRecordError(f"{where}.shape: {shape[0]} records, other inputs carry {n}")
            n = shape[0]
            columns[field.name] = [field.check(v, f"{where}.data[{j}]") for j, v in enumerate(data)]
        if n is None:
            raise BadRecordError(
                f"inputs: none of the fields {', '.join(f.name for f in self.fields)} was sent"
            )
        self._batch_size(n, "inputs")
        for field in self.fields:
            if field.name not in columns:
                if field.required:
                    raise BadRecordError(f"inputs[{field.name}]: required input missing")
                columns[field.name] = [None] * n
        return [{name: values[j] for name, values in columns.items()} for j in range(n)]


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"string {value[:40]!r}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"[:60]
