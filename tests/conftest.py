"""Shared test helpers: the local SparkSession and the shipped flights tables (feature job and
serving tests); one small real flights run (serving tests and the retraining components' tests);
a fake KServe cluster with real predictors (the KServe rollout tests and the exit handler's). The
upstream CRDs' check lives in tests/upstream_crds.py."""

import os
import pathlib
import zipfile

import pytest

from kfstack.distributions import installed
from tests.frameworks import REQUIRED

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

# Embedded runs track to an MLflow store under their pipeline root by default, a tracking server
# per run. The tests of tracking (tests/tracking) turn it on where they check it; every other
# run of the suite (embedded, or a launching task on a fake cluster), and the processes it starts,
# runs without one, as a team's CI may (docs/tracking.md), whatever the shell names.
os.environ["KFSTACK_TRACKING"] = "off"
for _name in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID"):
    os.environ.pop(_name, None)


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


# Rows of the shipped flights the small real run reads.
TRAINED_SAMPLE_ROWS = 4000
# The framework the small real run trains with: PyTorch, else TensorFlow where torch is not
# installed (Python 3.12 and 3.13: tests/frameworks.py), so that what serves and evaluates its
# model is tested on every Python.
TRAINED_FRAMEWORK = "pytorch" if installed("torch") or "torch" in REQUIRED else "tensorflow"


@pytest.fixture(scope="session")
def trained(tmp_path_factory, spark, shipped_data_dir, real_flights) -> dict[str, str]:
    """``features``, ``model`` and ``input`` directories of one small real run: the feature job
    on a slice of the shipped flights, the real trainer."""
    from kfstack_examples.flights.features_job.job import FeatureJobConfig, run_feature_job
    from kfstack_examples.flights.pipelines.steps import train_locally
    from kfstack_examples.flights.training.settings import TrainingSettings
    from tests.spark_jobs.conftest import write_input_dir

    root = tmp_path_factory.mktemp("served")
    input_dir = write_input_dir(
        root / "input", shipped_data_dir, real_flights.head(TRAINED_SAMPLE_ROWS), "csv"
    )
    features = str(root / "features")
    run_feature_job(
        FeatureJobConfig(
            input_uri=input_dir, output_uri=features, quarantine_uri=str(root / "quarantine"), num_shards=2
        ),
        spark=spark,
    )
    model = str(root / "model")
    train_locally(
        TrainingSettings(epochs=2, workers=1, batch_size=256, max_restarts=0, framework=TRAINED_FRAMEWORK),
        features_uri=features,
        model_uri=model,
        logs_uri=str(root / "logs"),
    )
    return {"features": features, "model": model, "input": input_dir}


@pytest.fixture(scope="module")
def kserve_predictors(trained, tmp_path_factory):
    """Each model URI the KServe tests roll out -> the loopback predictor serving it
    (tests/serving/fake_kserve_cluster.py); started once per test module."""
    from tests.serving.fake_kserve_cluster import predictors

    with predictors(trained["model"], str(tmp_path_factory.mktemp("kserve-predictors"))) as servers:
        yield servers


@pytest.fixture(scope="module")
def kserve_holdout(trained):
    """The labelled requests a KServe rollout's canary analysis replays."""
    from tests.serving.conftest import read_holdout

    return read_holdout(trained["features"], 200)


@pytest.fixture
def kserve_cluster(kserve_predictors):
    """A fresh fake KServe cluster: (launcher's Cluster, fake API server, fake controller)."""
    from tests.serving.fake_kserve_cluster import fake_cluster

    with fake_cluster(kserve_predictors) as cluster:
        yield cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks ``upstream_crds`` every test that checks objects against the upstream CRDs (it calls a
    check of tests/upstream_crds.py, or takes the CRD schema as a fixture), so that CI, which has
    them, runs those again after the whole suite has run as a lone clone runs it."""
    checks = {"validate_with_crds", "run_validator"}
    for item in items:
        function = getattr(item, "function", None)
        names = set(getattr(getattr(function, "__code__", None), "co_names", ()))
        if names & checks or "crd_schema" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.upstream_crds)
