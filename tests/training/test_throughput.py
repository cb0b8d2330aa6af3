"""Throughput, scaling efficiency and cost per epoch: the arithmetic every training run reports,
and the training step pricing a run by its node pool."""

import json

import pytest

from kfstack.components.training.distributed_training.stage import STAGE, local_price_per_hour
from kfstack.kubernetes import node_pools
from kfstack.training.entrypoint import RESULT_FILE
from kfstack.training.metrics import katib_line
from kfstack.training.throughput import cost_metrics, scaling_efficiency, throughput
from kfstack.tuning.metric_lines import MetricReport, parse_line
from kfstack_examples.flights.pipelines.steps import TRAINING_CODE
from kfstack_examples.flights.training.settings import metric_line


def test_throughput_of_a_run_and_of_one_epoch():
    # 3 epochs, 30 training seconds, 600,000 samples over 2 replicas.
    assert throughput(30.0, 600_000, epochs=3, replicas=2) == {
        "seconds_per_epoch": 10.0,
        "samples_per_second": 20_000.0,
        "samples_per_second_per_replica": 10_000.0,
    }
    assert throughput(2.5, 10_000, epochs=1, replicas=1)["samples_per_second_per_replica"] == 4_000.0
    # Nothing measured (resumed past the last epoch): zeros, not a division error.
    assert set(throughput(0.0, 0, epochs=0, replicas=2).values()) == {0.0}


def test_cost_per_epoch_at_the_jobs_price():
    # Two h100 pods at 80 USD per 8-GPU node hour pay 20 USD/h; a 90 s epoch costs 0.5 USD.
    assert cost_metrics(90.0, price_per_hour=20.0) == {
        "price_per_hour": 20.0,
        "cost_per_epoch": pytest.approx(0.5),
    }
    assert cost_metrics(3600.0, price_per_hour=0.19)["cost_per_epoch"] == pytest.approx(0.19)
    # A free pool costs 0; that is a price, unlike an unknown one.
    assert cost_metrics(90.0, price_per_hour=0.0) == {"price_per_hour": 0.0, "cost_per_epoch": 0.0}


def test_without_a_price_no_cost_is_reported_rather_than_zero():
    assert cost_metrics(90.0, price_per_hour=None) == {}


def test_scaling_efficiency_is_throughput_over_n_times_one_replicas():
    assert scaling_efficiency(20_000.0, replicas=1, one_replica_samples_per_second=20_000.0) == 1.0
    assert scaling_efficiency(30_000.0, replicas=2, one_replica_samples_per_second=20_000.0) == 0.75
    assert scaling_efficiency(45_000.0, replicas=2, one_replica_samples_per_second=20_000.0) == 1.125


def test_the_katib_line_prints_the_epoch_then_every_value_in_order():
    assert katib_line(3, {"val_loss": 0.25, "seconds_per_epoch": 1.2}) == (
        "epoch=3 val_loss=0.2500 seconds_per_epoch=1.2000"
    )


def test_the_flights_line_keeps_the_validation_metrics_first_then_the_epochs_throughput():
    scores = {"val_auc": 0.712, "val_log_loss": 0.51, "val_accuracy": 0.78, "val_rows": 100.0}
    line = metric_line(3, {**scores, **throughput(1.2, 10_800, epochs=1, replicas=2)})
    assert line == (
        "epoch=3 val_auc=0.7120 val_log_loss=0.5100 val_accuracy=0.7800 seconds_per_epoch=1.2000 "
        "samples_per_second=9000.0000 samples_per_second_per_replica=4500.0000"
    )
    # Katib's collector still reads the objective, and tells the two samples/s apart.
    assert parse_line(line, ["val_auc", "samples_per_second"]) == [
        MetricReport("val_auc", 0.712),
        MetricReport("samples_per_second", 9000.0),
    ]


PROFILES = """
profiles:
  cpu: {node_selector: {pool: cpu}, cpu: "4", memory: 16Gi, price_per_node_hour: 0.5}
  gpu:
    node_selector: {pool: gpu}
    cpu: "8"
    memory: 64Gi
    accelerator: {resource: nvidia.com/gpu, count: 1}
    gpus_per_node: 4
    price_per_node_hour: 40
  unpriced:
    node_selector: {pool: other}
    cpu: "8"
    memory: 64Gi
    accelerator: {resource: nvidia.com/gpu, count: 1}
"""


@pytest.fixture
def finished_job(tmp_path, monkeypatch):
    """A training job as a cluster leaves it: the chief's result of 4 epochs of 90 s over 2
    replicas, the flights trainers' report among it."""
    pools = tmp_path / "pools.yaml"
    pools.write_text(PROFILES)
    monkeypatch.setenv(node_pools.PROFILES_ENV, str(pools))
    (tmp_path / "model").mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    result = {
        "metrics": {"val_auc": 0.7, "val_log_loss": 0.5, "val_accuracy": 0.8},
        "report": {**throughput(360.0, 7_200_000, epochs=4, replicas=2), "world_size": 2.0},
        "training_seconds": 400.0,
    }
    (logs / RESULT_FILE).write_text(json.dumps(result))
    return tmp_path


def collected(job, feature_dir, pool: str, **topology) -> dict[str, float]:
    """The training step's report after its job finished on ``pool``."""
    arguments = {
        "platform": "kubernetes",
        "data": feature_dir,
        "model": str(job / "model"),
        "training_logs": str(job / "logs"),
        **TRAINING_CODE,
        "hyperparameters": {"epochs": 4},
        "workers": 2,
        "gpu_pool": pool,
        "training_api": "v1",
        **topology,
    }
    settings = STAGE.settings(arguments)
    return dict(STAGE.collect(settings, [], cluster=None).metrics["training_metrics"])


def test_a_cluster_run_pays_its_pods_share_of_the_pools_nodes(finished_job, feature_dir):
    # Two PyTorch pods of one GPU on 4-GPU nodes at 40/h: 20/h; a 90 s epoch costs 0.5, the
    # whole job's 400 s 20/9.
    metrics = collected(finished_job, feature_dir, "gpu")
    assert metrics["report.seconds_per_epoch"] == 90.0
    assert metrics["report.samples_per_second_per_replica"] == 10_000.0
    assert metrics["price_per_hour"] == pytest.approx(20.0)
    assert metrics["cost_per_epoch"] == pytest.approx(0.5)
    assert metrics["job_cost"] == pytest.approx(400 * 20 / 3600)
    # A TFJob with parameter servers pays for its Chief and PS pods too: 1 + 2 + 1 pods.
    metrics = collected(
        finished_job, feature_dir, "gpu", framework="tensorflow", tf_topology="parameter_server"
    )
    assert metrics["price_per_hour"] == pytest.approx(40.0)
    assert metrics["cost_per_epoch"] == pytest.approx(1.0)


def test_an_elastic_job_pays_for_the_ranks_that_ran(finished_job, feature_dir):
    # Asked for 2 to 4 ranks, ran on 3 (torch's WORLD_SIZE, which the chief records): 3 pods.
    result_file = finished_job / "logs" / RESULT_FILE
    result_file.write_text(json.dumps({**json.loads(result_file.read_text()), "world_size": 3}))
    metrics = collected(finished_job, feature_dir, "gpu", elastic_min_workers=2, elastic_max_workers=4)
    assert metrics["world_size"] == 3 and metrics["price_per_hour"] == pytest.approx(30.0)


def test_a_run_on_a_pool_without_a_price_reports_no_cost(finished_job, feature_dir):
    metrics = collected(finished_job, feature_dir, "unpriced")
    assert metrics["report.seconds_per_epoch"] == 90.0
    assert not {"cost_per_epoch", "price_per_hour", "job_cost"} & set(metrics)


def test_code_that_reports_no_epochs_is_priced_as_a_whole_job(finished_job, feature_dir):
    result_file = finished_job / "logs" / RESULT_FILE
    result = json.loads(result_file.read_text())
    result["report"] = {}
    result_file.write_text(json.dumps(result))
    metrics = collected(finished_job, feature_dir, "gpu")
    assert metrics["job_cost"] == pytest.approx(400 * 20 / 3600)
    assert "cost_per_epoch" not in metrics


def test_the_local_machine_is_priced_as_one_cpu_node_or_not_at_all(tmp_path, monkeypatch):
    pools = tmp_path / "pools.yaml"
    pools.write_text(PROFILES)
    monkeypatch.setenv(node_pools.PROFILES_ENV, str(pools))
    assert local_price_per_hour() == 0.5
    pools.write_text(PROFILES.replace(", price_per_node_hour: 0.5", ""))
    assert local_price_per_hour() is None
