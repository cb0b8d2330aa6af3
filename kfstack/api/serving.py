"""For a team's model server: kfstack's server around a ``kserve.Model`` (one worker per pod,
request metrics, the body limit and deadline, the address it listens on, live drift's window
and gauges) and typed records out of KServe's
V1 and V2 requests, a bad one answered 400 naming the field. Imports kserve."""

from kfstack.monitoring.live_drift import NO_LIVE_DRIFT
from kfstack.serving.model_server import (
    DEFAULT_MAX_BODY_BYTES,
    add_live_drift_arguments,
    add_server_arguments,
    attach_live_drift,
    check_one_worker,
    live_drift_settings,
    serve,
    server_options,
)
from kfstack.serving.records import FLOAT, INT, STRING, BadRecordError, Field, Kind, Schema

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "FLOAT",
    "INT",
    "NO_LIVE_DRIFT",
    "STRING",
    "BadRecordError",
    "Field",
    "Kind",
    "Schema",
    "add_live_drift_arguments",
    "add_server_arguments",
    "attach_live_drift",
    "check_one_worker",
    "live_drift_settings",
    "serve",
    "server_options",
]
