"""Records out of V1 and V2 requests: types, missing values, shapes and batch limits, each
refused with the field's place in the request."""

from __future__ import annotations

import types

import pytest

from kfstack.serving.records import BadRecordError, Field, Schema

SCHEMA = Schema(
    [Field("n", "int"), Field("x", "float"), Field("s", "str"), Field("w", "float", required=False)], 3
)


def tensor(name, data, datatype="FP64", shape=None):
    return types.SimpleNamespace(
        name=name, datatype=datatype, data=data, shape=[len(data)] if shape is None else shape
    )


def test_v1_records_are_typed_and_extra_fields_ignored():
    records = SCHEMA.from_v1({"instances": [{"n": 2.0, "x": 1, "s": "a", "extra": [1]}]})
    assert records == [{"n": 2, "x": 1.0, "s": "a", "w": None}]
    assert isinstance(records[0]["n"], int)
    assert isinstance(records[0]["x"], float)


@pytest.mark.parametrize(
    ("instance", "message"),
    [
        ({"x": 1.0, "s": "a"}, "instances[0].n: required, got null"),
        ({"n": True, "x": 1.0, "s": "a"}, "instances[0].n: expected a number, got boolean true"),
        ({"n": 1.5, "x": 1.0, "s": "a"}, "instances[0].n: expected an integer"),
        ({"n": 1, "x": "1", "s": "a"}, "instances[0].x: expected a number, got string '1'"),
        ({"n": 1, "x": float("nan"), "s": "a"}, "instances[0].x: expected a finite number"),
        ({"n": 1, "x": 1e301, "s": "a"}, "instances[0].x: expected a finite number"),
        ({"n": 1, "x": 1.0, "s": 5}, "instances[0].s: expected a string"),
        ({"n": 1, "x": 1.0, "s": "a", "w": [1]}, "instances[0].w: expected a number, got a list"),
    ],
)
def test_v1_bad_values_name_the_field(instance, message):
    with pytest.raises(BadRecordError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        SCHEMA.from_v1({"instances": [instance]})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "body: expected a JSON object"),
        ({"instances": {}}, "instances: expected a list"),
        ({"instances": []}, "instances: empty batch"),
        ({"instances": [{}] * 4}, "instances: 4 records, more than the 3"),
        ({"instances": ["x"]}, r"instances\[0\]: expected an object"),
    ],
)
def test_v1_bad_bodies(body, message):
    with pytest.raises(BadRecordError, match=message):
        SCHEMA.from_v1(body)


def test_v2_columns_become_records_and_optional_inputs_may_be_left_out():
    inputs = [
        tensor("n", [1, 2], "INT64"),
        tensor("x", [0.5, 1.5]),
        tensor("s", ["a", None], "BYTES"),
        tensor("z", [9]),
    ]
    with pytest.raises(BadRecordError, match=r"inputs\[s\]\.data\[1\]: required, got null"):
        SCHEMA.from_v2(inputs)
    inputs[2] = tensor("s", ["a", "b"], "BYTES")
    assert SCHEMA.from_v2(inputs) == [
        {"n": 1, "x": 0.5, "s": "a", "w": None},
        {"n": 2, "x": 1.5, "s": "b", "w": None},
    ]


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([tensor("z", [1])], "inputs: none of the fields n, x, s, w was sent"),
        ([tensor("n", [1], "INT64"), tensor("x", [1.0])], r"inputs\[s\]: required input missing"),
        ([tensor("n", [1], "INT64"), tensor("n", [1], "INT64")], r"inputs\[n\]: sent twice"),
        ([tensor("n", [[1]], "INT64", shape=[1, 1])], r"inputs\[n\]\.shape: expected \[n\]"),
        ([tensor("n", [1, 2], "INT64", shape=[3])], r"inputs\[n\]\.data: 2 values for shape \[3\]"),
        ([tensor("n", [1], "BYTES")], r"inputs\[n\]\.datatype: BYTES does not carry a int field"),
        ([tensor("s", [1], "INT64")], r"inputs\[s\]\.datatype: INT64 does not carry a str field"),
        (
            [tensor("n", [1], "INT64"), tensor("x", [1.0, 2.0])],
            r"inputs\[x\]\.shape: 2 records, other inputs carry 1",
        ),
        ([tensor("n", [], "INT64")], "inputs: empty batch"),
        ([tensor("n", [1, 2, 3, 4], "INT64")], "inputs: 4 records, more than the 3"),
    ],
)
def test_v2_bad_inputs_name_the_input(inputs, message):
    with pytest.raises(BadRecordError, match=message):
        SCHEMA.from_v2(inputs)


def test_strings_are_trimmed_and_an_empty_one_is_missing():
    assert SCHEMA.from_v1({"instances": [{"n": 1, "x": 1.0, "s": "  a "}]})[0]["s"] == "a"
    with pytest.raises(BadRecordError, match=r"instances\[0\]\.s: required, got null or an empty string"):
        SCHEMA.from_v1({"instances": [{"n": 1, "x": 1.0, "s": "  "}]})


@pytest.mark.parametrize("value", [10**400, -(10**400), 1e16, 1e300])
def test_numbers_beyond_the_bound_are_refused_not_crashed_on(value):
    with pytest.raises(BadRecordError, match=r"instances\[0\]\.x: expected a finite number of magnitude"):
        SCHEMA.from_v1({"instances": [{"n": 1, "x": value, "s": "a"}]})
    with pytest.raises(BadRecordError, match=r"inputs\[n\]\.data\[0\]: expected a finite number"):
        SCHEMA.from_v2([tensor("n", [value], "INT64")])
