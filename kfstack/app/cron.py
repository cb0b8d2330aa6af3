"""Cron expressions for KFP recurring runs, checked before anything is sent to the cluster.

KFP's ScheduledWorkflow controller reads a cron expression with robfig/cron and **six** fields,
seconds first: ``sec min hour dom month dow``. Its parser takes the seconds field as optional at
the *other* end, so the familiar 5-field ``0 3 * * *`` ("03:00 daily") is read there as
"second 0 of minute 3 of every hour" -- a silent, 24-times-too-often schedule. Hence
:func:`parse_cron` converts a 5-field expression by prepending ``0`` seconds and says so
(:attr:`CronSchedule.converted`), and refuses any other field count.

Each field is ``*``, ``?`` (day of month and day of week only, "no restriction"), or a list
``a,b,...`` of items; an item is a number or name, ``a-b``, ``a-b/n`` or ``*/n``. Names: months
``JAN``-``DEC``, days ``SUN``-``SAT`` (any case). Anything else (``@daily`` descriptors,
``L``/``W``/``#`` Quartz extensions, ``5/15``) is refused with the field named: robfig reads some of
them differently from Quartz, and a schedule that means something else than its author thought is
worse than none.
"""

from __future__ import annotations

import dataclasses
import re

from kfstack.errors import InvalidParameterError


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] stands for low + i
    allows_question_mark: bool = False


_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
FIELDS = (
    _Field("second", 0, 59),
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31, allows_question_mark=True),
    _Field("month", 1, 12, names=_MONTHS),
    _Field("day-of-week", 0, 6, names=_DAYS, allows_question_mark=True),
)
_ITEM = re.compile(
    r"^(?:(?P<star>\*)|(?P<low>[A-Za-z0-9]+)(?:-(?P<high>[A-Za-z0-9]+))?)"  # *, a or a-b
    r"(?:/(?P<step>[^/]*))?$"  # /n
)


@dataclasses.dataclass(frozen=True)
class CronSchedule:
    """A cron expression KFP reads as its author meant it.

    Attributes:
        expression: Six fields, ``sec min hour dom month dow``, single spaces.
        original: The expression as given (whitespace normalised).
        converted: ``original`` had five fields and got ``0`` seconds prepended.
    """

    expression: str
    original: str
    converted: bool


def parse_cron(text: str) -> CronSchedule:
    """Checks ``text`` field by field; converts a 5-field expression to KFP's 6-field form.

    Raises:
        InvalidParameterError: Not 5 or 6 fields, or a field that is not one of the forms above
            (the message names the field and what is wrong with it).
    """
    fields = text.split()
    original = " ".join(fields)
    if original.startswith("@"):
        raise InvalidParameterError(
            f"cron {original!r}: descriptors such as @daily are not accepted; write the fields, "
            f"e.g. '0 0 0 * * *' (sec min hour day-of-month month day-of-week)"
        )
    if len(fields) == 5:
        fields = ["0", *fields]
    elif len(fields) != 6:
        raise InvalidParameterError(
            f"cron {original!r}: {len(fields)} field(s); expected 6 (sec min hour day-of-month month "
            f"day-of-week, KFP's form) or 5 (min hour day-of-month month day-of-week, converted by "
            f"prepending 0 seconds)"
        )
    for field, value in zip(FIELDS, fields, strict=True):
        problem = _field_problem(field, value)
        if problem:
            raise InvalidParameterError(f"cron {original!r}: {field.name} field {value!r}: {problem}")
    expression = " ".join(fields)
    return CronSchedule(expression=expression, original=original, converted=expression != original)


def _field_problem(field: _Field, value: str) -> str | None:
    """What is wrong with ``value`` as ``field``; ``None`` when nothing is."""
    if value == "?":
        return None if field.allows_question_mark else "'?' is allowed in day-of-month and day-of-week only"
    items = value.split(",")
    for item in items:
        problem = _item_problem(field, item)
        if problem:
            return f"item {item!r}: {problem}" if len(items) > 1 else problem
    return None


def _item_problem(field: _Field, item: str) -> str | None:
    if not item:
        return "empty list item"
    if item == "?":
        return "'?' stands alone, not in a list"
    match = _ITEM.match(item)
    if not match:
        return f"not *, a number{' or name' if field.names else ''}, a-b, a-b/n or */n"
    low_text, high_text, step = match["low"], match["high"], match["step"]
    if low_text is not None and high_text is None and step is not None:
        # robfig reads "5/15" as 5-<max>/15, Quartz-style; refused so nobody guesses.
        return f"a step needs a range or *: write {low_text}-{field.high}/{step} or */{step}"
    if low_text is None:  # * or */n
        low, high = field.low, field.high
    else:
        low, problem = _value(field, low_text)
        if problem:
            return problem
        high = low
        if high_text is not None:
            high, problem = _value(field, high_text)
            if problem:
                return problem
            if high < low:
                return f"range {low_text}-{high_text} runs backwards"
    if step is not None:
        if not step.isdigit():
            return f"step {step!r} is not a whole number"
        if int(step) < 1:
            return "step must be at least 1"
        # A step past the end of its range fires once, at its start: a typo, not a schedule.
        if int(step) > max(high - low, 1):
            return f"step {step} is larger than the range it steps through ({low}-{high})"
    return None


def _value(field: _Field, text: str) -> tuple[int, str | None]:
    """``text`` as a number of ``field``, and what is wrong with it (``None`` when nothing)."""
    if text.isdigit():
        number = int(text)
    elif text.upper() in field.names:
        number = field.low + field.names.index(text.upper())
    elif field.names:
        return 0, f"{text!r} is not a number or one of {field.names[0]}-{field.names[-1]}"
    else:
        return 0, f"{text!r} is not a number"
    if not field.low <= number <= field.high:
        return number, f"{number} is out of range {field.low}-{field.high}"
    return number, None
