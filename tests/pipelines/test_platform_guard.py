"""platform=kubernetes without a cluster: the run fails in its first task, before any stage."""

from kfstack.app.local_run import run_pipeline_locally


def test_kubernetes_platform_without_a_cluster_fails_first_and_submits_nothing(tmp_path, monkeypatch):
    # No in-cluster service account here; make sure no kubeconfig is found either.
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KFSTACK_NAMESPACE", raising=False)
    summary = run_pipeline_locally(
        "flights-training", {"platform": "kubernetes"}, pipeline_root=str(tmp_path / "runs")
    )
    assert summary.status == "FAILED"
    # Only the parameter check ran (and the exit handler's cleanup): no Spark job, no trainer.
    assert set(summary.stages) == {"validate-run", "cleanup-run"}
    assert "PlatformNotAvailableError" in summary.error
    assert "needs a Kubernetes API" in summary.error and "Nothing was submitted" in summary.error
    assert not list((tmp_path / "runs").glob("*/spark-job"))
