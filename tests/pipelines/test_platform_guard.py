"""platform=kubernetes has no launchers yet: a run must fail before any stage starts."""

from kfstack.local_run import run_pipeline_locally


def test_kubernetes_platform_fails_at_the_first_task_and_submits_nothing(tmp_path):
    summary = run_pipeline_locally(
        "flights-training", {"platform": "kubernetes"}, pipeline_root=str(tmp_path)
    )
    assert summary.status == "FAILED"
    # Only the parameter check ran: no Spark job, no trainer.
    assert list(summary.stages) == ["validate-training-run"]
    assert "PlatformNotAvailableError" in summary.error
    assert "not available yet" in summary.error
    assert not list(tmp_path.glob("*/flights-features"))
