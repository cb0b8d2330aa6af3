"""Shared test helpers: where the upstream CRDs and validator live when ../shared is present; the
local SparkSession and the shipped flights tables (feature job and serving tests)."""

import os
import pathlib
import zipfile

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DIR = pathlib.Path(os.environ.get("KFSTACK_SHARED_DIR", REPO_ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def spark():
    from kfstack_examples.flights.features_job.job import local_spark_session

    session = local_spark_session(shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def shipped_data_dir() -> str:
    from kfstack_examples.flights.features_job import sources

    return sources.default_data_dir()


def load_real_flights(shipped_data_dir: str):
    """The shipped flights table as a pandas DataFrame of strings (missing = None)."""
    import pandas as pd

    with (
        zipfile.ZipFile(os.path.join(shipped_data_dir, "flights.csv.zip")) as z,
        z.open("flights.csv") as f,
    ):
        df = pd.read_csv(f, dtype=str, keep_default_na=False)
    return df.replace({"NA": None})


@pytest.fixture(scope="session")
def real_flights(shipped_data_dir):
    return load_real_flights(shipped_data_dir)
