"""The flight-delay predictor on KServe's Python ``ModelServer`` (V1 and V2 HTTP protocols).

:class:`FlightDelayModel` is a ``kserve.Model`` over :class:`kfstack_examples.flights.scoring.FlightScorer`:

- **V1** ``POST /v1/models/<name>:predict`` with ``{"instances": [<flight record>, ...]}``
  answers ``{"predictions": [<delay probability>, ...]}``.
- **V2** ``POST /v2/models/<name>/infer`` with one input tensor per field (columnar, shape
  ``[n]``; strings as ``BYTES``) answers one ``FP32`` output named ``probability``, shape ``[n]``.

A record is the raw ``flights`` row (fields beyond the request's are ignored, so a row of the
table can be sent as it is) with the origin's weather when the caller has it
(:data:`kfstack_examples.flights.scoring.REQUEST_FIELDS`). A malformed request -- not JSON, a missing or
mistyped field, a wrong shape, an empty or oversized batch, a non-finite number, a date or time
the training data's validation would refuse -- gets a **400** whose message names the field,
never a 500, and the server stays healthy. Bodies above ``--max_body_bytes`` get a 413 before
they are read. KServe answers a V2 body that is not a valid inference request with FastAPI's 422;
:func:`install_request_hooks` turns that into the same 400.

Prometheus metrics on ``/metrics`` beside KServe's own (``request_predict_seconds``...):

- ``kfstack_predictor_requests_total{model_name, protocol, outcome}``: every predict/infer
  request, ``outcome`` one of ``ok`` (2xx), ``bad_request`` (4xx), ``error`` (5xx);
- ``kfstack_predictor_delay_probability{model_name}``: a histogram of the probabilities served
  (the distribution a canary analysis and a dashboard compare);
- ``kfstack_predictor_records_total{model_name}``: records scored;
- live drift (:func:`kfstack.serving.model_server.attach_live_drift`): the features the scorer
  builds from the records answered (the raw features the model directory's ``profile.json``
  describes, not the records), against that profile; the calendar features are measured but
  do not decide (the model's ``drift_ignored_features``, as the drift check's
  ``drift_ignore_features`` defaults), whichever kfstack server serves it.

Importing this module imports ``kserve``, which parses ``sys.argv`` for its own flags: run it as
its own process (``python -m kfstack_examples.flights.predictor``), as pods and the embedded
platform do.
"""

from __future__ import annotations

import argparse
import logging
import uuid
from typing import Any

import kserve
import orjson
from kserve import InferOutput, InferRequest, InferResponse
from kserve.errors import InvalidInput
from prometheus_client import Counter, Histogram

from kfstack.api.serving import (
    NO_LIVE_DRIFT,
    BadRecordError,
    Schema,
    add_live_drift_arguments,
    add_server_arguments,
    attach_live_drift,
    check_one_worker,
    live_drift_settings,
    serve,
    server_options,
)
from kfstack_examples.flights.features import CALENDAR_FEATURES
from kfstack_examples.flights.scoring import (
    DEFAULT_MAX_BATCH,
    OUTPUT_NAME,
    REQUEST_FIELDS,
    FlightScorer,
    check_flights,
)

logger = logging.getLogger("kfstack.predictor")

RECORDS = Counter("kfstack_predictor_records", "Flight records scored", ["model_name"])
DELAY_PROBABILITY = Histogram(
    "kfstack_predictor_delay_probability",
    "Delay probabilities served, one observation per record",
    ["model_name"],
    buckets=[i / 20 for i in range(1, 21)],
)


# From this many records a request's numeric features reach live drift as arrays (see
# _drift_batch).
_ARRAY_HANDOVER_ROWS = 64


def _drift_batch(columns: dict[str, list[Any]], raw_numeric: Any, numeric: Any) -> dict[str, Any]:
    """What live drift observes of a request: its raw feature columns; for a large batch, the
    ``numeric`` features as the float columns already converted for the model (live drift would
    convert the same lists again: about a third of its cost at 1,000 records), while a small
    one's lists are cheaper to hand over than a view per feature."""
    if len(raw_numeric) < _ARRAY_HANDOVER_ROWS:
        return columns
    return {**columns, **{feature.name: raw_numeric[:, j] for j, feature in enumerate(numeric)}}


class FlightDelayModel(kserve.Model):
    """A model directory served over V1 and V2 (see the module docstring)."""

    # Live drift's default ignored features: any window differs from a year's calendar.
    drift_ignored_features = CALENDAR_FEATURES

    def __init__(self, name: str, model_dir: str, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.schema = Schema(REQUEST_FIELDS, max_batch)
        self.scorer: FlightScorer | None = None
        self.drift: Any = NO_LIVE_DRIFT

    def load(self) -> bool:
        self.scorer = FlightScorer(self.model_dir)
        self.ready = True
        return self.ready

    def predict(self, payload: Any, headers: dict[str, str] | None = None) -> dict | InferResponse:
        assert self.scorer is not None, "load() first"
        v2 = isinstance(payload, InferRequest)
        try:
            if v2:
                records = self.schema.from_v2(payload.inputs)
                check_flights(records, "records")
            else:
                records = self.schema.from_v1(_json_body(payload))
                check_flights(records, "instances")
            columns = self.scorer.raw_columns(records)
            raw_numeric = self.scorer.spec.raw_numeric(columns)
            categorical, numeric = self.scorer.encode(columns, raw_numeric)
        except BadRecordError as err:
            raise InvalidInput(str(err)) from None
        probabilities = self.scorer.score(categorical, numeric)
        # Scored: rows the model answered (a request that fails to score is not observed).
        self.drift.observe(_drift_batch(columns, raw_numeric, self.scorer.spec.numeric))
        RECORDS.labels(self.name).inc(len(probabilities))
        observed = DELAY_PROBABILITY.labels(self.name)
        values = probabilities.tolist()
        for value in values:
            observed.observe(value)
        if v2:
            return InferResponse(
                response_id=payload.id or str(uuid.uuid4()),
                model_name=self.name,
                infer_outputs=[
                    InferOutput(name=OUTPUT_NAME, shape=[len(values)], datatype="FP32", data=values)
                ],
            )
        return {"predictions": values}

    def get_input_types(self) -> list[dict]:
        """One V2 input per request field, columnar (``GET /v2/models/<name>``)."""
        return self.schema.v2_inputs()

    def get_output_types(self) -> list[dict]:
        return [{"name": OUTPUT_NAME, "datatype": "FP32", "shape": [-1]}]


def _json_body(payload: Any) -> Any:
    """The V1 body: KServe hands over raw bytes when the content type is not exactly a JSON one
    (``application/json; charset=utf-8`` included), so those are decoded here."""
    if isinstance(payload, bytes | bytearray):
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError as err:
            raise BadRecordError(f"body: not JSON ({err})") from None
    return payload


def parser() -> argparse.ArgumentParser:
    """KServe's flags (``--model_name``, ``--http_port``, ``--enable_grpc``...) and ours."""
    p = argparse.ArgumentParser(
        prog="python -m kfstack_examples.flights.predictor",
        description="Serve a trained flight-delay model directory with KServe (V1 and V2 HTTP).",
        parents=[kserve.model_server.parser],
    )
    p.add_argument("--model_dir", required=True, help="model.onnx, feature_spec.json and the lookups")
    p.add_argument("--max_batch", type=int, default=DEFAULT_MAX_BATCH, help="records one request may carry")
    add_server_arguments(p)
    add_live_drift_arguments(p)
    return p


def main(argv: list[str] | None = None, model_class: type[FlightDelayModel] = FlightDelayModel) -> int:
    """Loads the model directory and serves it until SIGTERM/SIGINT (``model_class``: a
    subclass, for tests that inject faults)."""
    args = parser().parse_args(argv)
    model = model_class(args.model_name, args.model_dir, args.max_batch)
    try:
        check_one_worker(args.workers)
        drift = live_drift_settings(args, model)
        model.load()
        attach_live_drift(model, args.model_dir, drift)
    except (FileNotFoundError, ValueError) as err:
        logger.error("cannot serve %s: %s", args.model_dir, err)
        return 2
    serve(
        model,
        args.http_port,
        args.grpc_port,
        **server_options(args),
        enable_grpc=args.enable_grpc,
        enable_latency_logging=args.enable_latency_logging,
    )
    return 0
