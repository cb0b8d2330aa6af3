"""A real predictor process on a loopback port serving the model of one small real run
(``trained``, in tests/conftest.py), shared by the serving tests."""

from __future__ import annotations

import os

import httpx
import pyarrow.parquet as pq
import pytest

from kfstack.serving import local_services
from kfstack.serving.rollout import Holdout
from kfstack.serving.scoring import RECORDS, read_labelled
from kfstack_examples.flights.feature_spec import HOLDOUT_FILE, LABEL_COLUMN
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME, MODULE, command
from kfstack_examples.flights.scoring import REQUEST_SCHEMA, check_flights

PREDICTOR_MODULE = MODULE
MODEL_NAME = DEFAULT_MODEL_NAME


class Predictor:
    """A predictor process on loopback (a run-owned service of ``run_dir``) and its base URL."""

    def __init__(
        self,
        model_dir: str,
        run_dir: str,
        *extra: str,
        name: str = MODEL_NAME,
        module: str = PREDICTOR_MODULE,
        service: str = "predictor",
    ) -> None:
        self.name = name
        self.run_dir = run_dir
        self.service = local_services.start_service(
            run_dir,
            service,
            lambda port: command(
                model_dir, name, port, "--enable_latency_logging=false", *extra, module=module
            ),
            ready_path=f"/v2/models/{name}/ready",
            timeout_seconds=60,
        )
        self.url = self.service.url

    @property
    def predict_url(self) -> str:
        return f"{self.url}/v1/models/{self.name}:predict"

    def v1(self, instances, **kwargs) -> httpx.Response:
        return httpx.post(self.predict_url, json={"instances": instances}, **kwargs)

    def v2(self, inputs, **kwargs) -> httpx.Response:
        return httpx.post(f"{self.url}/v2/models/{self.name}/infer", json={"inputs": inputs}, **kwargs)

    def healthy(self) -> bool:
        return (
            local_services.find_service(self.run_dir, self.service.name) is not None
            and httpx.get(f"{self.url}/v2/models/{self.name}/ready", timeout=5).status_code == 200
        )

    def stop(self) -> None:
        local_services.stop_service(self.run_dir, self.service.name)


@pytest.fixture(scope="session")
def predictor(trained, tmp_path_factory):
    server = Predictor(trained["model"], str(tmp_path_factory.mktemp("predictor")))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def raw_records(real_flights) -> list[dict]:
    """Flights as a caller would send them: raw rows of the table, numbers as numbers, every
    column (the predictor ignores those it does not take)."""
    rows = real_flights.head(200).to_dict("records")
    numeric = {"year", "month", "day", "sched_dep_time", "sched_arr_time", "flight", "distance"}
    return [
        {k: (float(v) if k in numeric and v is not None else v) for k, v in row.items() if k != "time_hour"}
        for row in rows
    ]


def v2_inputs(records: list[dict]) -> list[dict]:
    """The same records as V2 columnar inputs."""
    from kfstack_examples.flights.scoring import REQUEST_FIELDS

    datatypes = {"int": "INT64", "float": "FP64", "str": "BYTES"}
    return [
        {
            "name": field.name,
            "shape": [len(records)],
            "datatype": datatypes[field.kind],
            "data": [r.get(field.name) for r in records],
        }
        for field in REQUEST_FIELDS
    ]


@pytest.fixture(scope="session")
def labelled_records(trained) -> tuple[list[dict], list[int]]:
    """400 labelled flights as requests: the feature job's holdout, what the analysis replays."""
    rows = pq.read_table(os.path.join(trained["features"], HOLDOUT_FILE)).to_pylist()[:400]
    assert len(rows) == 400
    labels = [row.pop(LABEL_COLUMN) for row in rows]
    return rows, labels


def read_holdout(features_uri: str, limit: int) -> Holdout:
    """The first ``limit`` of the feature job's labelled holdout requests, typed and checked as
    the flights predictor takes a request: what a rollout test replays."""
    rows = read_labelled(os.path.join(features_uri, HOLDOUT_FILE), LABEL_COLUMN, (), RECORDS)
    records = REQUEST_SCHEMA.typed(rows.features[:limit], "holdout")  # Parquet gives numbers as floats
    check_flights(records, "holdout")
    return Holdout(records, rows.labels[:limit].astype(int).tolist())
