"""KFP component: the date range of data a run reads -- given, or relative to the run's time."""

from typing import NamedTuple

from kfp import dsl

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def data_window(
    window_start: str,
    window_end: str,
    window_days: int,
    window_lag_days: int,
    scheduled_time: str,
    created_time: str,
    settings_overrides: dict = {},  # noqa: B006
    # Outputs as KFP reads them: inline, for the task runs this function's source alone (no
    # module around it), which mypy cannot type -- hence the ignore.
) -> NamedTuple("DataWindow", [("start", str), ("end", str)]):  # type: ignore[valid-type]
    """Resolves the run's data window.

    Never cached: a scheduled run must see the days since the last one, not an earlier run's
    window.

    Args:
        window_start: First date read (ISO ``2013-07-01``); with window_end, the window exactly.
        window_end: Last date read (inclusive).
        window_days: Without explicit dates: a window of this many days ending the day before
            the run's time less window_lag_days; 0 and no dates: all the data.
        window_lag_days: Days between the window's end and the run's day (late data; replaying
            a historical data set on a schedule).
        scheduled_time: KFP's ``pipeline_job_schedule_time_utc`` (a recurring run's scheduled
            time); empty or not filled in: created_time is used.
        created_time: KFP's ``pipeline_job_create_time_utc``; empty or not filled in: now.
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.

    Returns:
        The window's first and last date (ISO; empty: open).
    """
    from kfstack.settings import with_overrides

    arguments = with_overrides(locals())
    from kfstack.monitoring.window import resolve_window

    window = resolve_window(
        window_start, window_end, window_days, arguments["window_lag_days"], scheduled_time, created_time
    )
    print(f"data window: {window.describe()}")
    start, end = window.as_strings()
    return (start, end)
