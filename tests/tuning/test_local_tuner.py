"""The embedded trial loop's semantics, with a scripted trainer (fast): early stopping, failed
trials, the budget, the goal, parallel trials and resume. The real trainer runs through it in
tests/tuning/test_tuning_the_flights_trainers.py."""

from __future__ import annotations

import json
import math
import threading

import pytest

from kfstack.errors import InvalidParameterError, TrainingFailedError, TuningFailedError
from kfstack.tuning.local_tuner import JOURNAL_FILE, LocalTuner, TrialRun, parallel_cap
from kfstack.tuning.spec import TuningSettings
from kfstack.tuning.trials import EARLY_STOPPED, FAILED, KILLED, SUCCEEDED
from kfstack_examples.flights.training.settings import OBJECTIVE, TRAINER_CODE


def scripted(curve, fail_when=None, log=None):
    """A trial runner that prints Katib lines: epoch e of a trial with learning rate lr scores
    ``curve(lr, e)``; stops between epochs when asked, like the trainer's process group."""

    def run(trial: TrialRun, line, stop: threading.Event) -> None:
        lr = float(trial.assignments["learning_rate"])
        if curve is by_trial_number:
            lr = float(trial.name.rsplit("-", 1)[1])
        if log is not None:
            log.append(trial)
        if fail_when and fail_when(lr):
            raise TrainingFailedError(f"rank 0 failed (exit code 1)\nTraceback ...\nValueError: lr {lr}")
        for epoch in range(1, 5):
            if stop.is_set():
                return
            line(f"epoch={epoch} val_auc={curve(lr, epoch):.4f} val_log_loss=0.5 val_accuracy=0.7")

    return run


def good_when_large(lr: float, epoch: int) -> float:
    return 0.5 + 0.05 * epoch * (1 + math.log10(lr / 0.0003))


def by_trial_number(number: float, epoch: int) -> float:
    """Trials 1 and 2 learn well, trial 3 poorly (whatever the sampler picked)."""
    return 0.6 + 0.02 * epoch if number < 3 else 0.5 + 0.01 * epoch


def spec(**overrides) -> TuningSettings:
    values = {
        "code": TRAINER_CODE,
        "objective": OBJECTIVE,
        "algorithm": "random",
        "algorithm_settings": '{"random_state": 3}',
        "search_space": json.dumps(
            {"learning_rate": {"type": "double", "min": 0.0003, "max": 0.03, "scale": "log"}}
        ),
        "max_trials": 6,
        "parallel_trials": 1,
        "trial_epochs": 4,
        "start_step": 2,
        "min_trials_required": 2,
    }
    return TuningSettings(**{**values, **overrides})


def test_trials_run_to_the_budget_and_the_best_is_the_highest(tmp_path):
    result = LocalTuner(spec(), scripted(good_when_large), str(tmp_path)).run()
    assert len(result.trials) == 6
    observed = [t for t in result.trials if t.objective is not None]
    assert result.best.objective == max(t.objective for t in observed)
    assert result.reason == "ExperimentMaxTrialsReached"
    # Values reach the trial as Katib formats them: str() of the sampled float.
    for trial in result.trials:
        assert str(float(trial.parameters["learning_rate"])) == trial.parameters["learning_rate"]


def test_medianstop_stops_a_trial_worse_than_the_mean_at_start_step(tmp_path):
    # Two trials succeed first (the rule needs 2), then a poor one must stop at its epoch 2:
    # its best by then, 0.52, is below the mean of the others' first-two-epoch averages (0.63).
    result = LocalTuner(spec(max_trials=3), scripted(by_trial_number), str(tmp_path)).run()
    first, second, poor = result.trials
    assert first.status == SUCCEEDED and second.status == SUCCEEDED
    assert poor.status == EARLY_STOPPED
    assert poor.history == [0.51, 0.52]  # stopped right after the start_step-th report
    assert "0.5200" in poor.message and "0.6300" in poor.message


def test_failed_trials_count_against_max_failed_trials(tmp_path):
    tuning = spec(max_failed_trials=2)
    with pytest.raises(TuningFailedError, match=r"(?s)2 trial\(s\) failed.*ValueError: lr") as caught:
        LocalTuner(tuning, scripted(good_when_large, fail_when=lambda lr: True), str(tmp_path)).run()
    assert [t.status for t in caught.value.result.trials] == [FAILED, FAILED]


def test_a_reached_goal_ends_the_run_and_stops_the_running_trials(tmp_path):
    tuning = spec(goal=0.6, parallel_trials=2, algorithm_settings='{"random_state": 5}')
    result = LocalTuner(tuning, scripted(good_when_large), str(tmp_path), cores=2).run()
    assert result.goal_reached and result.reason == "ExperimentGoalReached"
    assert len(result.trials) < 6
    assert all(t.status in (SUCCEEDED, KILLED, EARLY_STOPPED) for t in result.trials)


def test_require_goal_fails_when_the_trials_never_reach_it(tmp_path):
    tuning = spec(goal=0.99, require_goal=True, max_trials=2, early_stopping="none")
    with pytest.raises(TuningFailedError, match=r"without reaching tuning_goal=0\.99"):
        LocalTuner(tuning, scripted(good_when_large), str(tmp_path)).run()


def test_parallel_trials_are_capped_to_the_cores(caplog):
    assert parallel_cap(3, processes_per_trial=2, cores=2) == 1
    assert parallel_cap(3, processes_per_trial=1, cores=8) == 3
    with caplog.at_level("WARNING"):
        LocalTuner(
            spec(parallel_trials=3), scripted(good_when_large), "unused", processes_per_trial=2, cores=2
        )
    assert "running 1 at a time" in caplog.text


def test_a_resumed_run_does_not_rerun_finished_trials(tmp_path):
    ran: list[TrialRun] = []
    first = LocalTuner(spec(max_trials=3), scripted(good_when_large, log=ran), str(tmp_path)).run()
    assert len(ran) == 3
    # The same journal with a larger budget: 3 finished trials are kept, 2 new ones run.
    with pytest.raises(InvalidParameterError, match="other settings"):
        LocalTuner(spec(max_trials=5), scripted(good_when_large), str(tmp_path)).run()
    ran.clear()
    again = LocalTuner(spec(max_trials=3), scripted(good_when_large, log=ran), str(tmp_path)).run()
    assert ran == [] and [t.name for t in again.trials] == [t.name for t in first.trials]


def test_a_trial_cut_short_runs_again_with_its_parameters(tmp_path):
    tuning = spec(max_trials=2, early_stopping="none")
    journal = tmp_path / JOURNAL_FILE
    # What an interrupted run leaves: the spec, one finished trial, one started.
    LocalTuner(tuning, scripted(good_when_large), str(tmp_path)).run()
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    cut = [e for e in entries if not (e["event"] == "finished" and e["trial"]["name"] == "trial-002")]
    journal.write_text("".join(json.dumps(e) + "\n" for e in cut) + '{"event": "finis')  # torn last line
    ran: list[TrialRun] = []
    result = LocalTuner(tuning, scripted(good_when_large, log=ran), str(tmp_path)).run()
    started = next(e for e in entries if e["event"] == "started" and e["name"] == "trial-002")
    assert ran == [TrialRun("trial-002", started["assignments"])]
    assert [t.name for t in result.trials] == ["trial-001", "trial-002"]


def test_katib_only_algorithms_are_refused_locally_naming_the_supported_ones():
    with pytest.raises(InvalidParameterError, match=r"runs on Katib only.*random, tpe, multivariate-tpe"):
        LocalTuner(
            spec(algorithm="bayesianoptimization", algorithm_settings="{}"), scripted(good_when_large), "x"
        )
