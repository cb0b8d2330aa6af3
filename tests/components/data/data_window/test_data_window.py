"""The data_window component: the window a run reads, given or relative to its scheduled time,
as the two ISO dates the data step takes; a bad window fails the step naming the parameter. Its
plain function (the component's own body over ``kfstack.monitoring.window``, whose rules are
tested in tests/monitoring/test_window.py) and the component under kfp.local."""

from __future__ import annotations

import datetime

import pytest

from kfstack.components.data.data_window.component import data_window
from kfstack.errors import InvalidParameterError
from tests.kfp_local import run_pipeline, task_outputs

# The placeholders as a task receives them where KFP fills none in (a run that is not scheduled).
UNFILLED_SCHEDULE = "{{$.pipeline_job_schedule_time_utc}}"
UNFILLED_CREATE = "{{$.pipeline_job_create_time_utc}}"


def window(
    window_start: str = "",
    window_end: str = "",
    window_days: int = 0,
    window_lag_days: int = 0,
    scheduled_time: str = "",
    created_time: str = "",
) -> tuple[str, str]:
    """The component's plain function, as its task calls it."""
    return data_window.python_func(
        window_start=window_start,
        window_end=window_end,
        window_days=window_days,
        window_lag_days=window_lag_days,
        scheduled_time=scheduled_time,
        created_time=created_time,
    )


def test_an_explicit_window_is_exactly_its_dates_and_is_said(capsys):
    assert window("2013-07-01", "2013-07-31") == ("2013-07-01", "2013-07-31")
    assert "data window: 2013-07-01 .. 2013-07-31" in capsys.readouterr().out
    assert window("2013-07-01") == ("2013-07-01", "")  # open end
    assert window() == ("", "")  # all the data
    assert "data window: all the data" in capsys.readouterr().out


def test_a_relative_window_counts_back_from_the_scheduled_time_less_the_lag():
    scheduled = "2026-11-24T03:00:00Z"
    assert window(window_days=7, scheduled_time=scheduled, created_time="2026-11-25T09:00:00Z") == (
        "2026-11-17",
        "2026-11-23",
    )
    lag = (datetime.date(2026, 11, 24) - datetime.date(2013, 7, 1)).days
    assert window(window_days=30, window_lag_days=lag, scheduled_time=scheduled) == (
        "2013-06-01",
        "2013-06-30",
    )


def test_unfilled_placeholders_fall_back_to_the_creation_time_then_now():
    assert window(window_days=2, scheduled_time=UNFILLED_SCHEDULE, created_time="2026-01-10T23:59:00Z") == (
        "2026-01-08",
        "2026-01-09",
    )
    before = datetime.datetime.now(datetime.UTC).date()
    start, end = window(window_days=1, scheduled_time=UNFILLED_SCHEDULE, created_time=UNFILLED_CREATE)
    after = datetime.datetime.now(datetime.UTC).date()
    yesterday = {str(day - datetime.timedelta(days=1)) for day in (before, after)}
    assert start == end and end in yesterday


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"window_start": "2013-07-31", "window_end": "2013-07-01"}, "window_start 2013-07-31 is after"),
        ({"window_start": "2013-07-01", "window_days": 7}, "either window_start/window_end or window_days=7"),
        ({"window_days": 1, "window_lag_days": -2}, "window_lag_days=-2 must be >= 0"),
        ({"window_days": 1, "scheduled_time": "yesterday"}, "not an RFC 3339 time"),
    ],
)
def test_a_bad_window_fails_the_step_naming_the_parameter(arguments, message):
    with pytest.raises(InvalidParameterError, match=message):
        window(**arguments)


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_runs_under_kfp_local(tmp_path):
    from kfp import dsl

    @dsl.pipeline(name="team-window")
    def team_window():
        # As `kfstack run --local` fills KFP's time placeholders in: no schedule, its own time.
        data_window(
            window_start="",
            window_end="",
            window_days=7,
            window_lag_days=0,
            scheduled_time="",
            created_time="2026-11-24T03:00:00Z",
        )

    run = run_pipeline(team_window, tmp_path / "root")
    assert task_outputs(run, "data-window")["parameterValues"] == {"start": "2026-11-17", "end": "2026-11-23"}
