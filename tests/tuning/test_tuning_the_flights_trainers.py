"""The generic tuning step on the embedded platform, end to end with the flights trainers as a
team's code: trials through the training step's local replicas with Katib's substitution, the
best values handed on typed,
the report and plot written, a journal that lets an interrupted run resume, and ``tune=false``
running nothing."""

from __future__ import annotations

import json
import os

import pytest

from kfstack.components.tuning.hyperparameter_tuning.stage import BEST, STAGE, STATE_DIR
from kfstack.pipelines import rendering
from kfstack.platforms import run_stage
from kfstack.tuning.local_tuner import JOURNAL_FILE
from kfstack_examples.flights.pipelines.steps import TRAINING_CODE
from tests.kubernetes.test_render import FakeArtifact
from tests.training.conftest import make_feature_dir

OUTPUTS = ("tuning_metrics", "tuning_report", "optimisation_plot", "tuning_trials", "tuning_job")


def journal(root) -> list[dict]:
    with open(os.path.join(root, "tuning_trials", STATE_DIR, JOURNAL_FILE), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def tuning_arguments(tmp_path, features: str, **parameters) -> dict:
    values = rendering.run_parameters("flights-training", parameters)
    artifacts = {name: FakeArtifact(str(tmp_path / name), str(tmp_path / name)) for name in OUTPUTS}
    return {
        **values,
        **TRAINING_CODE,
        "hyperparameters": {name: values[name] for name in TRAINING_CODE["hyperparameter_types"]},
        "platform": "local",
        "run_id": "local",
        "task_name": "hyperparameter-tuning",
        "data": FakeArtifact(features, features),
        **artifacts,
    }


SMALL_BUDGET = {
    "tuning_algorithm": "random",
    "tuning_algorithm_settings": '{"random_state": 11}',
    "tuning_search_space": json.dumps(
        {
            "learning_rate": {"type": "double", "min": 0.0001, "max": 0.05, "scale": "log"},
            "batch_size": {"type": "discrete", "values": [64, 128]},
        }
    ),
    "tuning_max_trials": 3,
    "tuning_parallel_trials": 1,
    "tuning_trial_epochs": 3,
    "tuning_start_step": 1,
    "tuning_min_trials_required": 2,
    "workers": 2,
}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    root = tmp_path_factory.mktemp("tune")
    features = make_feature_dir(root / "features", rows=600, shards=2, seed=5)
    args = tuning_arguments(root, features, **SMALL_BUDGET)
    result = run_stage(STAGE, args)
    return root, args, result


@pytest.mark.slow
def test_the_trials_run_the_real_trainer_with_katibs_substitution(tuned):
    root, _, _ = tuned
    entries = journal(root)
    started = [e for e in entries if e["event"] == "started"]
    assert [e["name"] for e in started] == ["trial-001", "trial-002", "trial-003"]
    for entry in started:
        trial_dir = root / "tuning_trials" / entry["name"]
        # ${trialSpec.Name} became the trial's directory; each rank logged there.
        assert (trial_dir / "logs" / "attempt-1" / "rank-0.log").is_file()
        assert (trial_dir / "logs" / "attempt-1" / "rank-1.log").is_file()
        assert entry["assignments"]["batch_size"] in ("64", "128")
        # Told KFSTACK_TRIAL, the trainer exported no model: nothing keeps a trial's.
        assert not list((trial_dir / "model").glob("*"))
    finished = [e["trial"] for e in entries if e["event"] == "finished"]
    for trial in finished:
        # The tuner read rank 0's Katib lines: one objective per epoch. A trial stopped early
        # was judged at its first report; epochs this small may print more before the stop
        # lands (Katib's collector, too, reports every line in the file when it stops a trial).
        assert trial["status"] in ("Succeeded", "EarlyStopped")
        if trial["status"] == "Succeeded":
            assert len(trial["history"]) == 3
        else:
            assert 1 <= len(trial["history"]) <= 3 and "by report 1" in trial["message"]
        assert 0.0 <= trial["objective"] <= 1.0 and set(trial["metrics"]) == {
            "val_auc",
            "val_log_loss",
            "val_accuracy",
        }


@pytest.mark.slow
def test_the_best_trial_is_handed_on_typed_with_its_report(tuned):
    root, args, result = tuned
    entries = journal(root)
    finished = [e["trial"] for e in entries if e["event"] == "finished"]
    best = max(finished, key=lambda t: t["objective"])
    handed_on = result.outputs[BEST]
    assert (handed_on["learning_rate"], handed_on["batch_size"]) == (
        float(best["parameters"]["learning_rate"]),
        int(best["parameters"]["batch_size"]),
    )
    assert isinstance(handed_on["batch_size"], int)
    # What was not tuned is the run's own value (the trials ran tuning_trial_epochs).
    assert handed_on["epochs"] == args["epochs"] and handed_on["framework"] == "pytorch"
    metrics = args["tuning_metrics"].metadata
    assert metrics["trials_run"] == 3 and metrics["best_val_auc"] == best["objective"]
    report = (root / "tuning_report").read_text()
    assert best["name"] in report and "| trial-003 |" in report.replace("★ ", "").replace("**", "")
    assert "<svg" in (root / "optimisation_plot").read_text()


@pytest.mark.slow
def test_an_interrupted_run_resumes_without_rerunning_finished_trials(tuned, tmp_path):
    root, args, _ = tuned
    journal_path = os.path.join(root, "tuning_trials", STATE_DIR, JOURNAL_FILE)
    with open(journal_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    # Cut the journal where trial-003 had started but not finished (a Ctrl-C then).
    cut = [line for line in lines if not ('"finished"' in line and "trial-003" in line)]
    with open(journal_path, "w") as f:
        f.write("\n".join(cut) + "\n")
    for name in ("trial-001", "trial-002"):
        os.rename(root / "tuning_trials" / name, tmp_path / name)  # would be re-created if re-run
    result = run_stage(STAGE, args)
    assert not (root / "tuning_trials" / "trial-001").exists()
    assert not (root / "tuning_trials" / "trial-002").exists()
    assert (root / "tuning_trials" / "trial-003" / "logs" / "attempt-1" / "rank-0.log").is_file()
    entries = journal(root)
    assert sum(e["event"] == "started" and e["name"] == "trial-003" for e in entries) == 2
    assert args["tuning_metrics"].metadata["trials_run"] == 3
    assert set(result.outputs[BEST]) == set(TRAINING_CODE["hyperparameter_types"])


def test_tune_false_runs_nothing_and_hands_on_the_given_values(tmp_path):
    features = make_feature_dir(tmp_path / "features", rows=200, shards=2, seed=1)
    args = tuning_arguments(tmp_path, features, tune=False, learning_rate=0.004, batch_size=256)
    result = run_stage(STAGE, args)
    handed_on = result.outputs[BEST]
    assert (handed_on["learning_rate"], handed_on["batch_size"]) == (0.004, 256)
    assert not os.path.exists(tmp_path / "tuning_trials" / "trial-001")
    assert "skipped" in (tmp_path / "tuning_report").read_text()
