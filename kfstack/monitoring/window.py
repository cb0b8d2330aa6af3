"""Data windows: the date range of the data a run reads, given or relative to the run's time.

A retraining run reads a new window of data each time. Given explicitly (``window_start`` and
``window_end``, ISO dates, both inclusive) it is what it says. Given as a length
(``window_days``), it ends the day before the run's *reference time* less ``window_lag_days``:

    end   = reference day - 1 - lag
    start = end - (days - 1)

The reference time is the run's scheduled time when KFP gives one (a recurring run: each
scheduled run then reads the days since the last one, even when it starts late), otherwise the
run's creation time, otherwise now. The lag lets data that arrives late settle, and lets a
schedule replay a historical data set (of 2013, say: a lag of N days maps
today onto a day of 2013).

A time KFP did not fill in reaches a task as the placeholder text itself (``kfp.local`` leaves
``{{$.pipeline_job_schedule_time_utc}}`` as it is): it counts as not given.
"""

from __future__ import annotations

import dataclasses
import datetime

from kfstack.errors import InvalidParameterError
from kfstack.settings import Settings, named

_PLACEHOLDER_START = "{{"
# The names resolve_window's callers give a window's ends.
_WINDOW_ARGUMENTS = {"start": "window_start", "end": "window_end"}


def parse_day(text: str, name: str) -> datetime.date:
    """An ISO date (``2013-07-01``).

    Raises:
        InvalidParameterError: Not one, naming ``name``.
    """
    try:
        return datetime.date.fromisoformat(text.strip())
    except ValueError:
        raise InvalidParameterError(f"{name}={text!r} is not a date (YYYY-MM-DD)") from None


def parse_time(text: str) -> datetime.datetime | None:
    """A KFP time placeholder's value (RFC 3339, ``2026-11-24T03:00:00Z``); None when empty or
    not filled in (see the module docstring).

    Raises:
        InvalidParameterError: A filled-in value that is not a time.
    """
    text = text.strip()
    if not text or text.startswith(_PLACEHOLDER_START):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidParameterError(f"run time {text!r} is not an RFC 3339 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


@dataclasses.dataclass(frozen=True)
class DataWindow(Settings):
    """A date range, both ends inclusive; an empty window (no start, no end) is all the data."""

    concern = "data window"

    start: datetime.date | None = None
    end: datetime.date | None = None

    def check(self) -> list[str]:
        if self.start and self.end and self.start > self.end:
            return [f"{self.argument('start')} {self.start} is after {self.argument('end')} {self.end}"]
        return []

    @classmethod
    def parse(cls, start: str, end: str) -> DataWindow:
        """From ISO dates; an empty string leaves that end open. Messages name the ends as
        :func:`resolve_window` takes them (``window_start``, ``window_end``).

        Raises:
            InvalidParameterError: A bad date, or start after end.
        """
        with named(_WINDOW_ARGUMENTS):
            return cls(
                parse_day(start, _WINDOW_ARGUMENTS["start"]) if start.strip() else None,
                parse_day(end, _WINDOW_ARGUMENTS["end"]) if end.strip() else None,
            )

    @property
    def bounded(self) -> bool:
        return self.start is not None or self.end is not None

    def as_strings(self) -> tuple[str, str]:
        """``(start, end)`` as ISO dates, empty for an open end (component outputs)."""
        return (self.start.isoformat() if self.start else "", self.end.isoformat() if self.end else "")

    def describe(self) -> str:
        start, end = self.as_strings()
        return f"{start or 'the beginning'} .. {end or 'the end'}" if self.bounded else "all the data"


def resolve_window(
    window_start: str,
    window_end: str,
    window_days: int,
    window_lag_days: int,
    scheduled_time: str = "",
    created_time: str = "",
    now: datetime.datetime | None = None,
) -> DataWindow:
    """The run's window (see the module docstring).

    Args:
        window_start, window_end: Explicit ISO dates; when either is given, ``window_days`` must
            be 0 and the window is exactly these.
        window_days: Length of a window relative to the run's time; 0 with no explicit dates:
            all the data.
        window_lag_days: Days between the window's end and the run's day (>= 0).
        scheduled_time, created_time: KFP's ``pipeline_job_schedule_time_utc`` and
            ``pipeline_job_create_time_utc`` placeholders as the task received them.
        now: The clock (tests).

    Raises:
        InvalidParameterError: Bad dates, both an explicit window and a length, a negative length
            or lag.
    """
    problems = []
    if window_days < 0:
        problems.append(f"window_days={window_days} must be >= 0")
    if window_lag_days < 0:
        problems.append(f"window_lag_days={window_lag_days} must be >= 0")
    explicit = bool(window_start.strip() or window_end.strip())
    if explicit and window_days:
        problems.append(
            f"give either window_start/window_end or window_days={window_days}, not both "
            f"(window_days counts back from the run's time)"
        )
    if problems:
        raise InvalidParameterError("; ".join(problems))
    if explicit or not window_days:
        return DataWindow.parse(window_start, window_end)
    reference = (
        parse_time(scheduled_time) or parse_time(created_time) or now or datetime.datetime.now(datetime.UTC)
    )
    end = reference.astimezone(datetime.UTC).date() - datetime.timedelta(days=1 + window_lag_days)
    return DataWindow(end - datetime.timedelta(days=window_days - 1), end)
