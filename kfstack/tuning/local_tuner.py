"""The embedded tuner: Katib's trial loop on this machine, with Katib's semantics.

What a Katib Experiment does, in the same order, with the same counts:

- Trials are created ``parallel_trials`` at a time (capped to what fits the local cores, with a
  one-line warning) up to ``max_trials``; each gets its parameters from the algorithm's sampler
  (:mod:`.samplers`) and, with medianstop, the stop rule of that moment (:mod:`.median_stop`).
- A trial runs through the caller's runner (the real trainer through the local launcher, so it
  can be distributed); its primary replica's output is parsed as Katib's collector parses it
  (:mod:`.metric_lines`), and its stop rule is checked as the collector checks it.
- A trial ends Succeeded, EarlyStopped, Failed, or MetricsUnavailable (it never printed the
  objective); succeeded and early-stopped trials are told to the sampler with their objective
  under the metric strategy, as Katib's suggestion services are.
- The run ends, in Katib's order: goal reached (succeeded); as many failed trials as
  ``max_failed_trials`` (failed: :class:`~kfstack.errors.TuningFailedError`); ``max_trials``
  finished (succeeded). Trials still running then are stopped and count as Killed.

Every trial is journaled in ``<state_dir>/trials.jsonl`` when it starts and when it ends, so an
interrupted run resumes (``kfstack run --local --resume RUN_DIR``): finished trials are not run
again; a trial that was running is run again from its start with the same parameters.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping

import optuna

from kfstack.cancellation import sigterm_raises
from kfstack.errors import InvalidParameterError, KfstackError, TuningFailedError
from kfstack.tuning import samplers
from kfstack.tuning.median_stop import StopRule, StopRuleCheck, median_stop_rule
from kfstack.tuning.metric_lines import MetricReport, objective_value, parse_line, values_of
from kfstack.tuning.spec import MEDIANSTOP, TuningSettings
from kfstack.tuning.trials import (
    EARLY_STOPPED,
    FAILED,
    FAILED_OUTCOMES,
    KILLED,
    METRICS_UNAVAILABLE,
    OBSERVED_OUTCOMES,
    SUCCEEDED,
    TrialRecord,
    TuningResult,
)

logger = logging.getLogger(__name__)

JOURNAL_FILE = "trials.jsonl"
# Katib's Experiment condition reasons (status_util.go), reused as the local run's end reasons.
GOAL_REACHED = "ExperimentGoalReached"
MAX_TRIALS_REACHED = "ExperimentMaxTrialsReached"
MAX_FAILED_REACHED = "ExperimentFailed"
MESSAGE_LINES = 5
WAIT_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class TrialRun:
    """One trial to run: its name (Katib's ``${trialSpec.Name}``) and parameter assignments,
    as strings, exactly as Katib substitutes them into the trial template."""

    name: str
    assignments: dict[str, str]


TrialRunner = Callable[[TrialRun, Callable[[str], None], threading.Event], None]
"""Runs a trial to its end: calls the second argument with every line its primary replica prints
and stops the trial as soon as the event is set (then returns normally). Raises a
:class:`~kfstack.errors.KfstackError` when the trial failed."""


def parallel_cap(requested: int, processes_per_trial: int, cores: int | None = None) -> int:
    """Trials at once that fit the cores (each trial runs ``processes_per_trial`` replicas)."""
    cores = cores or os.cpu_count() or 1
    return max(1, min(requested, cores // max(1, processes_per_trial)))


class Journal:
    """``trials.jsonl``: the tuning spec, then every trial's start and end, appended."""

    def __init__(self, state_dir: str) -> None:
        os.makedirs(state_dir, exist_ok=True)
        self.path = os.path.join(state_dir, JOURNAL_FILE)
        self._lock = threading.Lock()

    def _append(self, entry: dict) -> None:
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def read(self) -> list[dict]:
        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="utf-8") as f:
            # A line cut short by a kill mid-write is the last one: skip it.
            entries = []
            for line in f:
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
            return entries

    def begin(self, spec: dict) -> tuple[list[TrialRecord], list[TrialRun]]:
        """Starts or resumes: the trials that finished, and those that were cut short.

        Raises:
            InvalidParameterError: The journal was written by a run with another spec.
        """
        entries = self.read()
        if not entries:
            self._append({"event": "spec", "spec": spec})
            return [], []
        if entries[0].get("spec") != spec:
            raise InvalidParameterError(
                f"{self.path} was written by a tuning run with other settings; resume with the "
                f"same tuning parameters, or start a new run"
            )
        finished = [TrialRecord.from_dict(e["trial"]) for e in entries if e["event"] == "finished"]
        done = {trial.name for trial in finished}
        cut_short = [
            TrialRun(e["name"], e["assignments"])
            for e in entries
            if e["event"] == "started" and e["name"] not in done
        ]
        return finished, cut_short

    def started(self, trial: TrialRun) -> None:
        self._append({"event": "started", "name": trial.name, "assignments": trial.assignments})

    def finished(self, record: TrialRecord) -> None:
        self._append({"event": "finished", "trial": record.to_dict()})


class _TrialWatch:
    """The collector's view of one running trial: its reports and its stop rule."""

    def __init__(self, tuning: TuningSettings, rule: StopRule | None) -> None:
        self.tuning = tuning
        self.check = StopRuleCheck(rule) if rule else None
        self.reports: list[MetricReport] = []
        self.tail: list[str] = []
        self.stop = threading.Event()
        self.early_stopped = False
        self.killed = False

    def line(self, line: str) -> None:
        self.tail = [*self.tail[-(MESSAGE_LINES * 4) :], line]
        reports = parse_line(line, list(self.tuning.metric_strategies))
        self.reports += reports
        for report in reports:
            if self.check and report.name == self.tuning.objective and self.check.observe(report.value):
                self.early_stopped = True
                self.stop.set()

    def record(self, trial: TrialRun, seconds: float, error: BaseException | None) -> TrialRecord:
        tuning = self.tuning
        metrics = {}
        for name, strategy in tuning.metric_strategies.items():
            value = objective_value(values_of(self.reports, name), strategy)
            if value is not None:
                metrics[name] = value
        history = values_of(self.reports, tuning.objective)
        objective = metrics.get(tuning.objective)
        if self.killed:
            status, message = KILLED, "stopped: the tuning run ended"
        elif self.early_stopped and self.check is not None:
            rule = self.check.rule
            status = EARLY_STOPPED
            message = (
                f"medianstop: best {tuning.objective} by report {rule.start_step} was {self.check.best:.4f}, "
                f"{rule.comparison} than the rule's {rule.value:.4f}"
            )
        elif error is not None:
            status, message = FAILED, _last_lines(str(error))
        elif objective is None:
            status = METRICS_UNAVAILABLE
            message = f"the trial never printed {tuning.objective}=<value>"
        else:
            status, message = SUCCEEDED, ""
        return TrialRecord(
            name=trial.name,
            parameters=dict(trial.assignments),
            status=status,
            objective=objective if status in OBSERVED_OUTCOMES else None,
            metrics=metrics,
            history=history,
            seconds=round(seconds, 2),
            message=message,
        )


def _last_lines(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (
        "\n".join(lines[:1] + lines[-MESSAGE_LINES:]) if len(lines) > MESSAGE_LINES + 1 else "\n".join(lines)
    )


class LocalTuner:
    """Runs a tuning spec's trials on this machine (see the module docstring).

    Args:
        tuning: The spec.
        run_trial: Runs one trial (:data:`TrialRunner`).
        state_dir: Where the journal lives (a resumed run passes the same directory).
        processes_per_trial: Replicas each trial starts (caps the parallel trials).
        cores: The cores to fit trials into; default: this machine's.
    """

    def __init__(
        self,
        tuning: TuningSettings,
        run_trial: TrialRunner,
        state_dir: str,
        processes_per_trial: int = 1,
        cores: int | None = None,
    ) -> None:
        samplers.check_embedded(tuning)
        self.tuning = tuning
        self._parameters = {p.name: p for p in tuning.parameters}
        self.run_trial = run_trial
        self.journal = Journal(state_dir)
        self.parallel = parallel_cap(tuning.parallel_trials, processes_per_trial, cores)
        if self.parallel < tuning.parallel_trials:
            logger.warning(
                "tuning_parallel_trials=%d: only %d trial(s) of %d process(es) fit %d core(s); "
                "running %d at a time",
                tuning.parallel_trials,
                self.parallel,
                processes_per_trial,
                cores or os.cpu_count() or 1,
                self.parallel,
            )

    # -- the sampler -------------------------------------------------------------------------

    def _study(self, finished: list[TrialRecord]) -> optuna.Study:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(
            sampler=samplers.make_sampler(self.tuning), direction=samplers.direction(self.tuning)
        )
        for record in finished:
            self._tell_finished(study, record)
        return study

    def _tell_finished(self, study: optuna.Study, record: TrialRecord) -> None:
        """A finished trial from the journal, as the sampler would have seen it."""
        distributions = samplers.search_space(self.tuning)
        params = self._optuna_params(record.parameters)
        observed = record.status in OBSERVED_OUTCOMES and record.objective is not None
        study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions=distributions,
                value=record.objective if observed else None,
                state=optuna.trial.TrialState.COMPLETE if observed else optuna.trial.TrialState.FAIL,
            )
        )

    def _ask(self, study: optuna.Study, number: int) -> tuple[TrialRun, optuna.Trial]:
        trial = study.ask(fixed_distributions=samplers.search_space(self.tuning))
        assignments = {
            name: samplers.katib_value(self._parameters[name], value) for name, value in trial.params.items()
        }
        return TrialRun(f"trial-{number:03d}", assignments), trial

    # -- the loop ----------------------------------------------------------------------------

    def _rule(self, finished: list[TrialRecord]) -> StopRule | None:
        tuning = self.tuning
        if tuning.early_stopping != MEDIANSTOP:
            return None
        return median_stop_rule(
            (t.history for t in finished if t.status == SUCCEEDED),
            metric=tuning.objective,
            direction=tuning.direction,
            min_trials_required=tuning.min_trials_required,
            start_step=tuning.start_step,
        )

    def _end_reason(self, finished: list[TrialRecord]) -> str | None:
        """Why the run ends now, in Katib's order, or None to go on."""
        tuning = self.tuning
        observed = [
            t.objective for t in finished if t.status in OBSERVED_OUTCOMES and t.objective is not None
        ]
        if observed and any(tuning.reached(value) for value in observed):
            return GOAL_REACHED
        failed = sum(1 for t in finished if t.status in FAILED_OUTCOMES)
        if failed and failed >= tuning.max_failed_trials:
            return MAX_FAILED_REACHED
        if len(finished) >= tuning.max_trials:
            return MAX_TRIALS_REACHED
        return None

    def _execute(self, trial: TrialRun, watch: _TrialWatch) -> TrialRecord:
        started = time.monotonic()
        error: BaseException | None = None
        try:
            self.run_trial(trial, watch.line, watch.stop)
        except KfstackError as err:
            error = err
        return watch.record(trial, time.monotonic() - started, error)

    def run(self) -> TuningResult:
        """Runs (or resumes) the trials until the run ends.

        Returns:
            The trials and the best one.

        Raises:
            TuningFailedError: ``max_failed_trials`` trials failed (the last one's message), or
                ``require_goal`` and the trials ended without reaching it.
            CancelledError: SIGTERM; the running trials were stopped first.
        """
        tuning = self.tuning
        # As the journal reads it back (JSON: the declaration's tuples are lists there).
        finished, cut_short = self.journal.begin(json.loads(json.dumps(dataclasses.asdict(tuning))))
        if finished or cut_short:
            logger.info("resuming: %d trial(s) finished, %d to run again", len(finished), len(cut_short))
        study = self._study(finished)
        # Trials cut short by an interruption run again first, with their parameters: the
        # sampler hands out enqueued parameters on its next asks.
        pending = list(cut_short)
        for run in cut_short:
            study.enqueue_trial(self._optuna_params(run.assignments))
        created = len(finished) + len(cut_short)
        running: dict[concurrent.futures.Future, tuple[TrialRun, optuna.Trial, _TrialWatch]] = {}
        reason = self._end_reason(finished)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="trial")
        try:
            with sigterm_raises():
                while reason is None or running:
                    # Katib creates trials up to parallelTrialCount running, maxTrialCount in all.
                    while (
                        reason is None
                        and len(running) < self.parallel
                        and (pending or created < tuning.max_trials)
                    ):
                        if pending:
                            run = pending.pop(0)
                            optuna_trial = study.ask(fixed_distributions=samplers.search_space(tuning))
                        else:
                            created += 1
                            run, optuna_trial = self._ask(study, created)
                        watch = _TrialWatch(tuning, self._rule(finished))
                        self.journal.started(run)
                        logger.info("%s: %s", run.name, run.assignments)
                        running[pool.submit(self._execute, run, watch)] = (run, optuna_trial, watch)
                    done, _ = concurrent.futures.wait(
                        running, timeout=WAIT_SECONDS, return_when=concurrent.futures.FIRST_COMPLETED
                    )
                    for future in done:
                        run, optuna_trial, watch = running.pop(future)
                        record = future.result()
                        self.journal.finished(record)
                        finished.append(record)
                        observed = record.status in OBSERVED_OUTCOMES
                        if observed:
                            study.tell(optuna_trial, record.objective)
                        else:
                            study.tell(optuna_trial, state=optuna.trial.TrialState.FAIL)
                        logger.info("%s: %s %s", record.name, record.status, record.objective)
                    if reason is None:
                        reason = self._end_reason(finished)
                        if reason is not None:
                            for _, _, watch in running.values():  # Katib kills them too
                                watch.killed = True
                                watch.stop.set()
        except BaseException:
            for _, _, watch in running.values():
                watch.stop.set()
            raise
        finally:
            pool.shutdown(wait=True)
        return self._result(finished, reason)

    def _optuna_params(self, assignments: Mapping[str, str]) -> dict:
        """Recorded assignments (Katib's strings) as the sampler's values."""
        return {
            name: samplers.optuna_value(self._parameters[name], value) for name, value in assignments.items()
        }

    def _result(self, trials: list[TrialRecord], reason: str) -> TuningResult:
        tuning = self.tuning
        observed = [t for t in trials if t.status in OBSERVED_OUTCOMES and t.objective is not None]
        best = None
        for trial in observed:  # the first of equals, as Katib's status loop keeps it
            if best is None or tuning.better(trial.objective, best.objective):  # type: ignore[arg-type]
                best = trial
        result = TuningResult(
            algorithm=tuning.algorithm,
            objective=tuning.objective,
            direction=tuning.direction,
            trials=trials,
            best=best,
            goal_reached=reason == GOAL_REACHED,
            reason=reason,
        )
        if reason == MAX_FAILED_REACHED:
            last = [t for t in trials if t.status in FAILED_OUTCOMES][-1]
            raise TuningFailedError(
                f"{result.count(*FAILED_OUTCOMES)} trial(s) failed (tuning_max_failed_trials="
                f"{tuning.max_failed_trials}); the last, {last.name} {last.parameters}: {last.message}",
                result=result,
            )
        if tuning.require_goal and not result.goal_reached:
            best_text = (
                f"best {tuning.objective}={best.objective:.4f}"
                if best and best.objective is not None
                else "no trial reported the objective"
            )
            raise TuningFailedError(
                f"the {len(trials)} trial(s) ended without reaching tuning_goal={tuning.goal} "
                f"({best_text}) and tuning_require_goal is set",
                result=result,
            )
        if best is None:
            raise TuningFailedError("no trial reported the objective", result=result)
        return result
