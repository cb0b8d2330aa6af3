import pytest

from kfstack import platforms
from kfstack.errors import InvalidParameterError, PlatformNotAvailableError
from kfstack.run_parameters import validate_training_run

GOOD = dict(platform="local", workers=2, num_shards=4, epochs=2, batch_size=256,
            learning_rate=0.01, max_restarts=1, max_quarantine_fraction=0.05,
            sample_fraction=1.0)


def test_good_parameters_pass():
    validate_training_run(**GOOD)


@pytest.mark.parametrize("change, message", [
    ({"workers": 0}, "workers=0 must be >= 1"),
    ({"num_shards": 1, "workers": 2}, "num_shards=1 < workers=2"),
    ({"epochs": 0}, "epochs=0"),
    ({"batch_size": 0}, "batch_size=0"),
    ({"learning_rate": 0.0}, "learning_rate=0.0"),
    ({"max_restarts": -1}, "max_restarts=-1"),
    ({"max_quarantine_fraction": 1.5}, "max_quarantine_fraction=1.5"),
    ({"sample_fraction": 0.0}, "sample_fraction=0.0"),
    ({"platform": "mars"}, "platform='mars'"),
    ({"framework": "jax"}, "framework='jax'"),
    ({"framework": "tensorflow", "tf_topology": "ring"}, "tf_topology='ring'"),
    ({"framework": "tensorflow", "tf_topology": "parameter_server", "tf_parameter_servers": 0},
     "tf_parameter_servers=0"),
])
def test_bad_parameters_fail_with_the_reason(change, message):
    with pytest.raises(InvalidParameterError, match=message.replace("(", r"\(")):
        validate_training_run(**{**GOOD, **change})


def test_all_problems_are_reported_at_once():
    with pytest.raises(InvalidParameterError) as err:
        validate_training_run(**{**GOOD, "epochs": 0, "batch_size": 0})
    assert "epochs=0" in str(err.value) and "batch_size=0" in str(err.value)


def test_kubernetes_without_a_cluster_fails_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(PlatformNotAvailableError, match="needs a Kubernetes API.*Nothing was submitted"):
        validate_training_run(**{**GOOD, "platform": platforms.KUBERNETES})


@pytest.mark.parametrize("change, message", [
    ({"gpu_pool": "tpu-v5"}, "unknown node pool 'tpu-v5'"),
    ({"spark_executor_memory": "4GB"}, "spark executor_memory='4GB'"),
    ({"elastic_min_workers": 3, "elastic_max_workers": 8}, "min_replicas"),
])
def test_kubernetes_objects_are_rendered_so_bad_cluster_settings_fail_first(change, message):
    # No cluster needed: the rendering fails before the cluster is looked for.
    with pytest.raises(InvalidParameterError, match=message):
        validate_training_run(**{**GOOD, "platform": platforms.KUBERNETES}, kubernetes=change)
