"""Data windows: explicit, relative to the scheduled or creation time, and refused when wrong."""

import datetime

import pytest

from kfstack.errors import InvalidParameterError
from kfstack.monitoring.window import DataWindow, parse_time, resolve_window

NOW = datetime.datetime(2026, 11, 24, 5, 0, tzinfo=datetime.UTC)
UNFILLED = "{{$.pipeline_job_schedule_time_utc}}"


def days(window: DataWindow) -> tuple[str, str]:
    return window.as_strings()


def test_an_explicit_window_is_exactly_its_dates():
    assert days(resolve_window("2013-07-01", "2013-07-31", 0, 0, now=NOW)) == ("2013-07-01", "2013-07-31")
    assert days(resolve_window("2013-07-01", "", 0, 0, now=NOW)) == ("2013-07-01", "")
    assert resolve_window("", "", 0, 0, now=NOW).bounded is False
    assert resolve_window("", "", 0, 0, now=NOW).describe() == "all the data"


def test_a_relative_window_ends_the_day_before_the_scheduled_time_less_the_lag():
    scheduled = "2026-11-24T03:00:00Z"
    assert days(resolve_window("", "", 7, 0, scheduled, "2026-11-25T09:00:00Z", now=NOW)) == (
        "2026-11-17",
        "2026-11-23",
    )
    # A scheduled run that starts late reads the same days as if it had started on time.
    assert days(resolve_window("", "", 1, 0, "2026-11-24T00:00:00+00:00", now=NOW)) == (
        "2026-11-23",
        "2026-11-23",
    )
    # A lag replays the bundled 2013 flights on a schedule.
    lag = (datetime.date(2026, 11, 24) - datetime.date(2013, 7, 1)).days
    assert days(resolve_window("", "", 30, lag, scheduled, now=NOW)) == ("2013-06-01", "2013-06-30")


def test_without_a_scheduled_time_the_creation_time_then_now_decide():
    assert days(resolve_window("", "", 2, 0, UNFILLED, "2026-01-10T23:59:00Z", now=NOW)) == (
        "2026-01-08",
        "2026-01-09",
    )
    assert days(resolve_window("", "", 1, 0, "", "{{$.pipeline_job_create_time_utc}}", now=NOW)) == (
        "2026-11-23",
        "2026-11-23",
    )
    assert parse_time(UNFILLED) is None and parse_time("") is None
    # A time with an offset is read in UTC.
    assert parse_time("2026-11-24T01:00:00+02:00") == datetime.datetime(
        2026, 11, 23, 23, 0, tzinfo=datetime.UTC
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("2013-07-31", "2013-07-01", 0, 0), "window_start 2013-07-31 is after window_end 2013-07-01"),
        (("2013-07-01", "", 7, 0), "either window_start/window_end or window_days=7"),
        (("", "", -1, 0), "window_days=-1 must be >= 0"),
        (("", "", 1, -2), "window_lag_days=-2 must be >= 0"),
        (("July", "", 0, 0), "window_start='July' is not a date"),
    ],
)
def test_bad_windows_are_refused_naming_the_parameter(arguments, message):
    with pytest.raises(InvalidParameterError, match=message):
        resolve_window(*arguments, now=NOW)


def test_a_filled_in_time_that_is_not_one_is_refused():
    with pytest.raises(InvalidParameterError, match="not an RFC 3339 time"):
        resolve_window("", "", 1, 0, "yesterday", now=NOW)
