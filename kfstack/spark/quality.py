"""Validate and quarantine, as functions a team's PySpark job may call (needs pyspark).

The pattern kfstack's own feature job follows, offered to any job: every row either goes on or
is quarantined with the *first* rule it breaks, nothing is dropped silently, the rows per
reason are counted, and the job fails when too large a share was rejected -- after it wrote the
quarantine, so the rejected rows can be looked at::

    from kfstack.spark import quality

    rules = [
        ("missing_id", F.col("id").isNull()),
        ("unparseable_amount", F.col("amount_raw").isNotNull() & F.col("amount").isNull()),
        ("negative_amount", F.col("amount") < 0),
    ]
    tagged = quality.tag_rows(df, rules).persist()
    report = quality.count_reasons(tagged)              # one aggregation
    quality.quarantined_rows(tagged).write.parquet(quarantine_uri)
    report.check(max_quarantine_fraction=0.05)          # DataQualityError above it
    quality.valid_rows(tagged).write.parquet(os.environ["KFSTACK_OUTPUT_URI"])
    quality.write_report(report.metrics())              # the step's Metrics

A rule is ``(reason, broken)``: ``broken`` is a boolean Column, true when the row breaks the
rule. A null ``broken`` (a comparison with a missing value) counts as *not* broken, so a rule
for the missing value itself (``missing_<field>``) goes before the rules that compare it.

Using kfstack is a convenience, never a requirement of the contract (:mod:`kfstack.contracts`):
:func:`write_report` only writes the JSON file ``KFSTACK_REPORT_PATH`` names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# A job writes its report through this module too (the contract's writer, re-exported).
from kfstack.contracts import write_report as write_report
from kfstack.errors import DataQualityError, InvalidParameterError

REASON = "reason"
TOP_REASONS_IN_ERRORS = 3

Rule = tuple[str, Column]


def tag_rows(df: DataFrame, rules: Sequence[Rule], reason_column: str = REASON) -> DataFrame:
    """``df`` with ``reason_column``: the reason of the first rule the row breaks, null for a
    row that breaks none. Lazy: nothing runs until the rows are used.

    Raises:
        InvalidParameterError: No rules, a reason named twice, or ``df`` already has a column
            named ``reason_column``.
    """
    reasons = [reason for reason, _ in rules]
    if not reasons:
        raise InvalidParameterError("quality rules: give at least one (reason, condition) pair")
    if len(set(reasons)) != len(reasons):
        twice = sorted({reason for reason in reasons if reasons.count(reason) > 1})
        raise InvalidParameterError(
            f"quality rules: each reason names one rule; named twice: {', '.join(twice)}"
        )
    if reason_column in df.columns:
        raise InvalidParameterError(
            f"the rows already have a column {reason_column!r}: name the reason column otherwise"
        )
    first_broken = F.coalesce(
        *[F.when(F.coalesce(broken, F.lit(False)), F.lit(reason)) for reason, broken in rules]
    )
    return df.withColumn(reason_column, first_broken)


def valid_rows(tagged: DataFrame, reason_column: str = REASON) -> DataFrame:
    """The rows of :func:`tag_rows` that broke no rule, without the reason column."""
    return tagged.where(F.col(reason_column).isNull()).drop(reason_column)


def quarantined_rows(tagged: DataFrame, reason_column: str = REASON) -> DataFrame:
    """The rows of :func:`tag_rows` that broke a rule, with their reason."""
    return tagged.where(F.col(reason_column).isNotNull())


@dataclasses.dataclass(frozen=True)
class QualityReport:
    """How many rows were read and rejected, per reason.

    Attributes:
        rows_read: Every row tagged.
        quarantined_by_reason: Reason -> rows that broke that rule first (reasons that no row
            broke are absent).
    """

    rows_read: int
    quarantined_by_reason: Mapping[str, int]

    @property
    def rows_quarantined(self) -> int:
        return sum(self.quarantined_by_reason.values())

    @property
    def rows_valid(self) -> int:
        return self.rows_read - self.rows_quarantined

    @property
    def quarantined_fraction(self) -> float:
        return self.rows_quarantined / self.rows_read if self.rows_read else 0.0

    def top_reasons(self, n: int = TOP_REASONS_IN_ERRORS) -> list[tuple[str, int]]:
        """The ``n`` reasons with the most rows (ties by name)."""
        return sorted(self.quarantined_by_reason.items(), key=lambda item: (-item[1], item[0]))[:n]

    def metrics(self) -> dict[str, float]:
        """The counts as a report's numbers (the step's Metrics): ``rows_read``, ``rows_valid``,
        ``rows_quarantined``, ``quarantined_fraction`` and ``quarantined.<reason>``."""
        values: dict[str, float] = {
            "rows_read": self.rows_read,
            "rows_valid": self.rows_valid,
            "rows_quarantined": self.rows_quarantined,
            "quarantined_fraction": self.quarantined_fraction,
        }
        values.update(
            {f"quarantined.{reason}": n for reason, n in sorted(self.quarantined_by_reason.items())}
        )
        return values

    def check(self, max_quarantine_fraction: float, where: str = "") -> None:
        """Fails the job when more than ``max_quarantine_fraction`` (0-1) of the rows was
        quarantined.

        Args:
            max_quarantine_fraction: The largest share of rejected rows the job accepts.
            where: Where the rejected rows were written, named in the message.

        Raises:
            InvalidParameterError: ``max_quarantine_fraction`` is not within 0-1.
            DataQualityError: Too many rows were quarantined; names the top reasons.
        """
        if not 0.0 <= max_quarantine_fraction <= 1.0:
            raise InvalidParameterError(
                f"max_quarantine_fraction={max_quarantine_fraction!r} must be within 0 and 1"
            )
        if self.quarantined_fraction <= max_quarantine_fraction:
            return
        reasons = ", ".join(f"{reason} ({n})" for reason, n in self.top_reasons())
        kept = f" The rejected rows are in {where}." if where else ""
        raise DataQualityError(
            f"{self.rows_quarantined} of {self.rows_read} rows ({self.quarantined_fraction:.1%}) were "
            f"quarantined, above max_quarantine_fraction={max_quarantine_fraction:.1%}; top reasons: "
            f"{reasons}.{kept}"
        )


def count_reasons(tagged: DataFrame, reason_column: str = REASON) -> QualityReport:
    """The rows per reason of :func:`tag_rows`' rows: one aggregation (a Spark job; persist the
    tagged rows first when they are written afterwards)."""
    counted = {row[0]: int(row[1]) for row in tagged.groupBy(reason_column).count().collect()}
    rows_read = sum(counted.values())
    by_reason = {str(reason): n for reason, n in counted.items() if reason is not None}
    return QualityReport(rows_read=rows_read, quarantined_by_reason=dict(sorted(by_reason.items())))
