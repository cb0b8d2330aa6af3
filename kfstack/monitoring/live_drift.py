"""Live drift: the rows a model server answers, against its training profile, as they come.

The batch drift check (:mod:`kfstack.monitoring.drift`) compares a new data window's profile with
the training profile when a scheduled run comes; a model server sees the same features all the
time. :class:`LiveDrift` keeps the last ``window_rows`` rows it was given (count-based, not
time-based: a quiet hour and a busy minute weigh the same) **binned on the reference profile's
own bins**:

- numeric: the missing bin (None, NaN and the infinities, as
  :func:`kfstack.monitoring.profiling.profile_dataset` counts missing), then the histogram's bins,
  a value beyond the edges in the end bin on its side, exactly as the batch profile bins;
- categorical: the values the reference lists (a value is its ``str``; None is
  :data:`~kfstack.monitoring.drift.MISSING`; a whole float such as ``3.0`` from a numeric matrix
  is ``"3"``, as the integer column it was profiled from), then one bin for every other value.

**When rows are binned.** A request only hands its batch over (:meth:`LiveDrift.observe`: a
reference kept in a pending list, a lock and an append); the pending batches are binned together,
vectorised (many one-row requests gathered into columns first), when the window is read (a
``/metrics`` scrape: :meth:`~LiveDrift.report`, :meth:`~LiveDrift.counts`, :attr:`~LiveDrift.rows`)
or on the request that brings the pending rows to ``pending_rows`` (at most the window), so
memory stays fixed on a server nobody scrapes. Rows enter the window in the order they were
observed, so it holds exactly what binning each batch on arrival would: the last
``window_rows`` rows. A pending batch that cannot be binned (a profiled feature it lacks, text
for a number, columns of different lengths) is dropped alone, logged and counted
(:attr:`~LiveDrift.dropped_rows`); the request it came with was answered long before.

So the window is a fixed ring of bin indices plus the running counts, and a row costs
O(features), paid in bulk. The PSI is computed only when asked (:meth:`LiveDrift.report`, when
``/metrics`` is scraped), with the one :func:`~kfstack.monitoring.drift.population_stability` of
the batch check, and only once the window is full: on fewer rows the index is mostly sampling
noise.

One difference from the batch check, on purpose: a category the reference never listed counts in
its "other" bin here, where the batch check gives each new value a bin of its own. The window
then needs no memory for values it cannot foresee; a new category still shows, as a rise of
"other" (and strongly where the reference lists every value it saw, its "other" share 0).

**No client steers it alone.** One request adds at most ``request_rows`` rows to the window
(default 1% of it: 20 of 2,000), a uniform random sample of a larger one, drawn by the server
where a client cannot foresee it. A single large request of unusual inputs then moves the
window by 1% at most; to hold it above an alert's line a client must keep sending a large share
of the server's requests, which is traffic an operator sees (``kfstack_predictor_requests_total``),
not one body. The window stays a sample of requests more than of rows: a model whose ordinary
clients send large batches watches a sample of each.

The drift thresholds' ``ignored_features`` are measured (each keeps its own PSI) but left out of
:attr:`LiveDriftReport.max_psi`, the figure an alert compares, as the batch decision leaves them
out.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import operator
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from kfstack.errors import InvalidParameterError
from kfstack.monitoring.drift import (
    MISSING,
    DriftThresholds,
    categorical_shares,
    numeric_shares,
    population_stability,
)
from kfstack.monitoring.profiling import PROFILE_FILE
from kfstack.settings import Settings, setting

logger = logging.getLogger("kfstack.live_drift")

# Rows a window holds by default: where undrifted traffic stays below the default PSI line at
# every scrape (BENCHMARKS.md, "Live drift": the false-alarm measurement).
DEFAULT_WINDOW_ROWS = 2000
# Rows observed but not yet binned, at most (the window's size where it is smaller): enough that
# binning them at once costs far less per row than one by one (BENCHMARKS.md, "Live drift
# throughput"), few enough that the request which bins them barely waits.
DEFAULT_PENDING_ROWS = 512
# A profile of a model that takes a matrix may name its columns in order (column i is the i-th
# name): how a request's rows by position map onto the profiled features.
FEATURE_ORDER_KEY = "feature_order"
# auto: on where the model directory has a profile whose features the requests carry, else off
# with the reason logged; on: a server that cannot watch refuses to start; off: never.
AUTO, ON, OFF = "auto", "on", "off"
MODES = (AUTO, ON, OFF)


@dataclasses.dataclass(frozen=True)
class LiveDriftSettings(Settings):
    """A model server's live drift (its ``--live_drift*`` flags): the mode (:data:`MODES`), the
    window's rows, and the drift check's PSI limit and ignored features (defaults: the batch
    check's, :class:`~kfstack.monitoring.drift.DriftThresholds`)."""

    concern = "live drift"

    mode: str = setting(AUTO, choices=MODES)
    window_rows: int = setting(DEFAULT_WINDOW_ROWS, ge=1)
    # 0: 1% of the window (module docstring, "No client steers it alone").
    request_rows: int = setting(0, ge=0)
    max_psi: float = setting(DriftThresholds.max_psi, gt=0.0)
    ignored_features: tuple[str, ...] = ()

    @property
    def thresholds(self) -> DriftThresholds:
        return DriftThresholds(max_psi=self.max_psi, ignored_features=self.ignored_features)


@dataclasses.dataclass(frozen=True)
class FeatureBins:
    """One profiled feature's bins and the reference's share in each (see the module docstring).

    Attributes:
        name: The feature.
        numeric: A numeric feature (else categorical).
        expected: The reference's shares, bin by bin: numeric ``[missing, *histogram]``,
            categorical ``[*values, other]``.
        edges: A numeric feature's histogram edges.
        values: A categorical feature's listed values.
    """

    name: str
    numeric: bool
    expected: tuple[float, ...]
    edges: tuple[float, ...] = ()
    values: tuple[str, ...] = ()


class Reference:
    """A training profile as the bins a window counts in: its numeric features, then its
    categorical ones, each in the profile's order.

    Raises:
        InvalidParameterError: The profile has no feature, or a numeric one without edges.
    """

    def __init__(self, profile: Mapping[str, Any]) -> None:
        features: list[FeatureBins] = []
        for name, entry in (profile.get("numeric") or {}).items():
            try:
                edges = tuple(float(e) for e in entry["histogram"]["edges"])
                expected = numeric_shares(entry)
            except (KeyError, TypeError, ValueError) as err:
                raise InvalidParameterError(
                    f"profile: numeric feature {name} has no histogram ({err})"
                ) from None
            if len(edges) < 2:
                raise InvalidParameterError(f"profile: numeric feature {name} has fewer than two edges")
            features.append(FeatureBins(name, True, tuple(expected), edges=edges))
        for name, entry in (profile.get("categorical") or {}).items():
            values = tuple(str(v) for v in (entry.get("top_values") or {}))
            features.append(FeatureBins(name, False, tuple(categorical_shares(entry, values)), values=values))
        if not features:
            raise InvalidParameterError("profile: no numeric or categorical feature to watch")
        self.features = tuple(features)
        order = profile.get(FEATURE_ORDER_KEY)
        self.feature_order: tuple[str, ...] | None = tuple(order) if order else None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)


def read_reference(model_dir: str) -> Reference | None:
    """The reference of the model directory's ``profile.json``; None when it has none.

    Raises:
        InvalidParameterError: The file is not a profile (:class:`Reference`).
    """
    path = os.path.join(model_dir, PROFILE_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            profile = json.load(f)
    except (OSError, ValueError) as err:
        raise InvalidParameterError(f"{path}: not a readable profile ({err})") from None
    if not isinstance(profile, dict):
        raise InvalidParameterError(f"{path}: not a profile (a JSON object)")
    return Reference(profile)


def category_key(value: Any) -> str:
    """The name a categorical value has in a profile (see the module docstring)."""
    if value is None:
        return MISSING
    if isinstance(value, str):
        return value
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _floats(values: Any, name: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64).reshape(-1)
    except TypeError:  # None among numbers: missing
        pass
    except ValueError as err:
        raise InvalidParameterError(f"live drift: feature {name} is not numeric ({err})") from None
    try:
        return np.array([math.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InvalidParameterError(f"live drift: feature {name} is not numeric ({err})") from None


# What a pending entry holds (see LiveDrift.observe): the rows of a dict batch as tuples of their
# values in window order; a matrix; any other batch as it came.
_ROWS, _MATRIX, _BATCH = "rows", "matrix", "batch"


def _gathering_kind(item: tuple[int, tuple[str, Any, int]]) -> tuple[Any, ...]:
    """How :meth:`LiveDrift._gathered` groups consecutive pending entries."""
    position, (kind, payload, _) = item
    if kind == _ROWS:
        return (_ROWS,)
    if kind == _MATRIX:
        return (_MATRIX, payload.dtype.str, np.atleast_2d(payload).shape[1:])
    return (_BATCH, position)


@dataclasses.dataclass(frozen=True)
class LiveDriftReport:
    """A full window's PSI per feature; ``max_psi`` over the features that decide."""

    psi: dict[str, float]
    ignored_features: tuple[str, ...]

    @property
    def max_psi(self) -> float:
        return max((v for k, v in self.psi.items() if k not in self.ignored_features), default=0.0)

    def drifted_features(self, max_psi: float) -> list[str]:
        return sorted(k for k, v in self.psi.items() if v > max_psi and k not in self.ignored_features)


class LiveDrift:
    """The last ``window_rows`` rows a server answered, binned on ``reference`` (see the module
    docstring). Thread-safe: requests observe while a scrape reports.

    Args:
        reference: The training profile's bins.
        window_rows: Rows the window holds; the PSI is reported once it holds that many.
        thresholds: ``max_psi`` (a report above it is logged once per crossing) and the
            ``ignored_features`` left out of the max.
        columns: The names of a matrix's columns, in order, for :meth:`observe` of a matrix
            (rows by position); None: batches come by name only.
        pending_rows: Observed rows that may wait to be binned (see the module docstring);
            the window's size where that is smaller; 1 bins every batch as it comes.
        request_rows: The most rows one batch adds (a random sample of a larger one); 0: 1% of
            the window, at least 1.
        seed: The sampling's seed (None: the operating system's entropy, which a client cannot
            guess; a test fixes it).

    Raises:
        InvalidParameterError: ``window_rows`` or ``pending_rows`` below 1; an ignored feature or
            a profiled feature that ``columns`` lacks.
    """

    def __init__(
        self,
        reference: Reference,
        window_rows: int = DEFAULT_WINDOW_ROWS,
        thresholds: DriftThresholds | None = None,
        columns: Sequence[str] | None = None,
        pending_rows: int = DEFAULT_PENDING_ROWS,
        request_rows: int = 0,
        seed: int | None = None,
    ) -> None:
        if window_rows < 1:
            raise InvalidParameterError(f"live_drift_window_rows: {window_rows}; at least 1 row")
        if pending_rows < 1:
            raise InvalidParameterError(f"pending_rows: {pending_rows}; at least 1 row")
        if request_rows < 0:
            raise InvalidParameterError(
                f"live_drift_request_rows: {request_rows}; 0 (1% of the window) or more"
            )
        self.reference = reference
        self.window_rows = window_rows
        self.request_rows = request_rows or max(1, window_rows // 100)
        self._sampler = np.random.default_rng(seed)
        self._sampled_rows = 0
        self.thresholds = thresholds or DriftThresholds()
        unknown = sorted(set(self.thresholds.ignored_features) - set(reference.names))
        if unknown:
            raise InvalidParameterError(
                f"live_drift_ignore_features names no profiled feature: {', '.join(unknown)}"
            )
        features = reference.features
        self._numeric = [f for f in features if f.numeric]
        self._categorical = [f for f in features if not f.numeric]
        # Window columns: numeric features first, then categorical (the reference's order).
        sizes = np.array([len(f.expected) for f in (*self._numeric, *self._categorical)], dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self._total_bins = int(sizes.sum())
        # Equal-width histograms (what both batch profilers write) bin by arithmetic, exactly as
        # they do; any other edges by search.
        self._lo = np.array([f.edges[0] for f in self._numeric], dtype=np.float64)
        self._width = np.array([(f.edges[1] - f.edges[0]) or 1.0 for f in self._numeric], dtype=np.float64)
        self._last_bin = np.array([len(f.edges) - 2 for f in self._numeric], dtype=np.float64)
        self._uneven = [
            j
            for j, f in enumerate(self._numeric)
            if not np.allclose(np.diff(f.edges), f.edges[1] - f.edges[0], rtol=1e-9, atol=1e-12)
        ]
        self._category_index = [{v: i for i, v in enumerate(f.values)} for f in self._categorical]
        self._window_names = [f.name for f in (*self._numeric, *self._categorical)]
        # A dict batch's profiled columns in window order, fetched in C (itemgetter of one name
        # returns the value itself, not a 1-tuple).
        if len(self._window_names) > 1:
            self._take_columns: Any = operator.itemgetter(*self._window_names)
        else:
            (only,) = self._window_names
            self._take_columns = lambda batch: (batch[only],)
        self._positions: np.ndarray | None = None
        if columns is not None:
            self._positions = self._column_positions(columns)
        self._ring = np.zeros((window_rows, len(sizes)), dtype=np.int64)
        self._counts = np.zeros(self._total_bins, dtype=np.int64)
        self._next = 0
        self._rows = 0
        self._dropped_rows = 0
        # Observed batches not binned yet, oldest first: (what it holds, the batch or its rows,
        # its row count), see observe().
        self.pending_rows = min(window_rows, pending_rows)
        self._pending: list[tuple[str, Any, int]] = []
        self._pending_count = 0
        # _lock guards the ring, the counts and the pending list, held briefly; _binning is held
        # by the one thread that bins the batches it took, so that they enter the ring before
        # any observed after them.
        self._lock = threading.Lock()
        self._binning = threading.Lock()
        self._above = False

    def _column_positions(self, columns: Sequence[str]) -> np.ndarray:
        where = {name: i for i, name in enumerate(columns)}
        order = [f.name for f in (*self._numeric, *self._categorical)]
        lacking = [name for name in order if name not in where]
        if lacking:
            raise InvalidParameterError(
                f"live drift: the profile's features {', '.join(lacking)} are not among the "
                f"model's columns ({', '.join(columns)})"
            )
        return np.array([where[name] for name in order], dtype=np.int64)

    @property
    def rows(self) -> int:
        """Rows in the window now (the pending ones binned first)."""
        self._bin_pending()
        return self._rows

    @property
    def dropped_rows(self) -> int:
        """Rows of the observed batches that could not be binned, since the start (the pending
        ones binned first)."""
        self._bin_pending()
        return self._dropped_rows

    def bins(self, batch: Any) -> np.ndarray:
        """Each row's bin per feature (``[rows, features]``, numeric features then categorical,
        a bin numbered within its feature): a 2-D array by position (``columns``), else any
        mapping of feature name to values (a dict of lists, a DataFrame) by name; columns the
        profile does not describe are ignored.

        Raises:
            InvalidParameterError: A profiled feature the batch lacks, a non-numeric value of a
                numeric feature, or a matrix where no ``columns`` were given.
        """
        if isinstance(batch, np.ndarray):
            if self._positions is None:
                raise InvalidParameterError("live drift: a matrix needs the model's columns in order")
            matrix = np.atleast_2d(batch)
            if matrix.ndim != 2:
                raise InvalidParameterError(f"live drift: a matrix of {matrix.ndim} dimensions, not rows")
            count = len(self._numeric)
            numeric = np.asarray(matrix[:, self._positions[:count]], dtype=np.float64)
            categorical = [matrix[:, p].tolist() for p in self._positions[count:]]
        else:
            lacking = [f.name for f in self.reference.features if f.name not in batch]
            if lacking:
                raise InvalidParameterError(f"live drift: the batch lacks the features {', '.join(lacking)}")
            self._check_lengths(batch)
            numeric = self._numeric_matrix(batch)
            categorical = [batch[f.name] for f in self._categorical]
        rows = numeric.shape[0]
        out = np.empty((rows, len(self._offsets)), dtype=np.int64)
        if self._numeric:
            # NaN stays NaN through these (no warning) and is sent to the missing bin below.
            index = np.clip(np.floor((numeric - self._lo) / self._width), 0, self._last_bin)
            for j in self._uneven:
                inner = np.asarray(self._numeric[j].edges[1:-1], dtype=np.float64)
                index[:, j] = np.searchsorted(inner, numeric[:, j], side="right")
            # Bin 0 is missing; a present value's histogram bin follows it.
            out[:, : len(self._numeric)] = np.where(np.isfinite(numeric), index + 1, 0)
        for k, (values, lookup) in enumerate(zip(categorical, self._category_index, strict=True)):
            keys = values if set(map(type, values)) <= {str} else [category_key(v) for v in values]
            # dict.get mapped in C, a value not listed counting as the last bin (other).
            out[:, len(self._numeric) + k] = np.fromiter(
                map(lookup.get, keys, itertools.repeat(len(lookup), rows)), dtype=np.int64, count=rows
            )
        return out

    def _check_lengths(self, batch: Any) -> None:
        """Every profiled feature of a batch by name is a column of as many values as the others
        (else a row's features would be counted with another row's)."""
        lengths = {}
        for name in self._window_names:
            try:
                lengths[name] = len(batch[name])
            except TypeError:
                raise InvalidParameterError(f"live drift: feature {name} is not a column of values") from None
        if len(set(lengths.values())) > 1:
            raise InvalidParameterError(
                "live drift: the batch's features have different lengths: "
                + ", ".join(f"{name} {length}" for name, length in lengths.items())
            )

    def _numeric_matrix(self, batch: Any) -> np.ndarray:
        """The numeric features' values, ``[rows, features]``: one conversion for the whole
        batch where every value is a number (NaN for missing), else feature by feature."""
        if not self._numeric:
            return np.zeros((len(batch[self._categorical[0].name]), 0))
        try:
            return np.array([batch[f.name] for f in self._numeric], dtype=np.float64).T
        except (TypeError, ValueError):  # None among the numbers, or a value that is no number
            return np.column_stack([_floats(batch[f.name], f.name) for f in self._numeric])

    def observe(self, batch: Any) -> None:
        """Hands a batch's rows to the window (see :meth:`bins` for what a batch is); they are
        binned later, with the other pending batches, in the order observed (see the module
        docstring), the oldest rows evicted beyond ``window_rows``. Call it with the rows a
        request was answered for, never a refused one.

        The window may keep a reference to ``batch`` until it is binned: the caller must not
        change the batch afterwards (a request's own columns, built for it, are never changed
        again). A batch that cannot be binned is dropped then, logged and counted
        (:attr:`dropped_rows`), not raised here.

        Raises:
            InvalidParameterError: A matrix where no ``columns`` were given (the server's
                wiring, not the request: known at once).
        """
        batch = self._capped(batch)
        if type(batch) is dict:
            entry = self._dict_entry(batch)
        elif isinstance(batch, np.ndarray):
            if self._positions is None:
                raise InvalidParameterError("live drift: a matrix needs the model's columns in order")
            entry = (_MATRIX, batch, len(batch) if batch.ndim > 1 else 1)
        else:
            entry = (_BATCH, batch, self._count_rows(batch))
        with self._lock:
            self._pending.append(entry)
            # A batch of no rows (or none that can be counted) still holds memory until binned.
            self._pending_count += entry[2] or 1
            full = self._pending_count >= self.pending_rows
        if full:
            self._bin_pending()

    @property
    def sampled_rows(self) -> int:
        """Rows left out of the window because their request carried more than
        ``request_rows``."""
        return self._sampled_rows

    def _capped(self, batch: Any) -> Any:
        """``batch``, or a uniform random sample of ``request_rows`` of its rows when it has more;
        a batch whose rows cannot be told apart (malformed: binning says why) as it is."""
        if isinstance(batch, np.ndarray):
            count = len(batch) if batch.ndim > 1 else 1
        else:
            count = self._count_rows(batch)
        if count <= self.request_rows:
            return batch
        with self._lock:
            keep = np.sort(self._sampler.choice(count, self.request_rows, replace=False))
            self._sampled_rows += count - self.request_rows
        if isinstance(batch, np.ndarray):
            return batch[keep]
        if hasattr(batch, "iloc"):
            return batch.iloc[keep]
        try:
            columns = {name: batch[name] for name in self._window_names}
            if any(len(values) != count for values in columns.values()):
                return batch
        except (KeyError, TypeError):
            return batch
        # An array column is sampled in C and comes back as Python numbers (indexing it value by
        # value with numpy integers made this ten times the cost of the rest of observe());
        # any other column by plain integers.
        positions = keep.tolist()
        return {
            name: values[keep].tolist() if isinstance(values, np.ndarray) else [values[i] for i in positions]
            for name, values in columns.items()
        }

    def _dict_entry(self, batch: dict) -> tuple[str, Any, int]:
        """A dict batch's pending entry: its rows as tuples of the profiled values (the batch
        itself where it is large enough to be binned at once, or malformed: then binning says
        why). Tuples of numbers and strings are no work for the garbage collector, where hundreds
        of pending dicts of lists would make it sweep them again and again."""
        try:
            columns = self._take_columns(batch)
            count = len(columns[0])
            if count >= self.pending_rows:
                return (_BATCH, batch, count)
            # By position (a Series' labels play no part), every column as long as the first.
            return (_ROWS, tuple(zip(*columns, strict=True)), count)
        except (KeyError, TypeError, ValueError):  # a feature lacking, not a column, ragged
            return (_BATCH, batch, self._count_rows(batch))

    def _count_rows(self, batch: Any) -> int:
        """A batch by name's rows: the length of its first profiled column (another one's where
        it lacks that; 0 where it has none: it is dropped when binned)."""
        for name in self._window_names:
            try:
                return len(batch[name])
            except (KeyError, TypeError, IndexError):
                continue
        return 0

    def _bin_pending(self) -> None:
        """Bins the pending batches into the window, in order (see the module docstring)."""
        with self._binning:
            with self._lock:
                pending, self._pending, self._pending_count = self._pending, [], 0
            if not pending:
                return
            ids, dropped = self._bin_all(pending)
            ids += self._offsets
            with self._lock:
                if len(ids):
                    self._add(ids)
                self._dropped_rows += sum(count for count, _ in dropped)
        if dropped:
            logger.warning(
                "live drift: %d observed batches (%d rows) dropped, not binnable; the first: %s",
                len(dropped),
                sum(count for count, _ in dropped),
                dropped[0][1],
            )

    def _bin_all(self, pending: list[tuple[str, Any, int]]) -> tuple[np.ndarray, list[tuple[int, Exception]]]:
        """The bins of the pending batches' rows in order, gathered where they can be binned as
        one (:meth:`_gathered`); where that fails, batch by batch, the failing ones dropped (each
        with its rows and why)."""
        try:
            return self._stacked([self.bins(run) for run in self._gathered(pending)]), []
        except Exception:  # one bad batch among them: found below, alone
            pass
        parts, dropped = [], []
        for entry in pending:
            try:
                (batch,) = self._gathered([entry])
                parts.append(self.bins(batch))
            # A batch's content can fail in more ways than bins() names (a matrix narrower than
            # the columns, a value whose conversion raises): whatever it is, that batch alone is
            # left out, and the requests answered since still count.
            except Exception as err:
                dropped.append((entry[2], err))
        return self._stacked(parts), dropped

    def _stacked(self, parts: list[np.ndarray]) -> np.ndarray:
        """Batches' bins as one array (one batch's as it is: a large one is not copied)."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return np.empty((0, len(self._offsets)), dtype=np.int64)
        return np.concatenate(parts)

    def _gathered(self, pending: list[tuple[str, Any, int]]) -> Iterator[Any]:
        """The pending entries as fewer, larger batches, rows in the same order: consecutive
        rows of dicts as one dict of columns, consecutive matrices of one dtype and width as one
        matrix (joining others would convert values: a bool read as the category "1"), any
        other batch as it came."""
        for kind, group in itertools.groupby(enumerate(pending), key=_gathering_kind):
            payloads = [payload for _, (_, payload, _) in group]
            if kind[0] == _ROWS:
                rows = list(itertools.chain.from_iterable(payloads))
                if rows:  # else batches of no rows: nothing to bin
                    yield dict(zip(self._window_names, zip(*rows, strict=True), strict=True))
            elif kind[0] == _MATRIX and len(payloads) > 1:
                yield np.concatenate([np.atleast_2d(matrix) for matrix in payloads])
            else:
                yield from payloads

    def _add(self, ids: np.ndarray) -> None:
        """Puts rows' window bins (``[rows, features]``, numbered across features) into the ring
        after the rows there, evicting the oldest beyond ``window_rows``; under ``_lock``."""
        size = self.window_rows
        if len(ids) >= size:
            self._ring[:] = ids[-size:]
            self._counts[:] = np.bincount(self._ring.ravel(), minlength=self._total_bins)
            self._next, self._rows = 0, size
            return
        slots = (self._next + np.arange(len(ids))) % size
        # Filled slots hold rows that now leave (the ring fills from slot 0 on).
        evicted = self._ring[slots[slots < self._rows]]
        if len(evicted):
            self._counts -= np.bincount(evicted.ravel(), minlength=self._total_bins)
        self._ring[slots] = ids
        self._counts += np.bincount(ids.ravel(), minlength=self._total_bins)
        self._next = (self._next + len(ids)) % size
        self._rows = min(size, self._rows + len(ids))

    def counts(self) -> dict[str, list[int]]:
        """The window's count per bin, per feature (the pending rows binned first)."""
        self._bin_pending()
        with self._lock:
            counts = self._counts.copy()
        return {
            f.name: counts[o : o + len(f.expected)].tolist()
            for f, o in zip((*self._numeric, *self._categorical), self._offsets, strict=True)
        }

    def report(self) -> LiveDriftReport | None:
        """The PSI of each feature's window shares against the reference's (the pending rows
        binned first); None until the window is full. A crossing of ``max_psi`` (either way) is
        logged."""
        self._bin_pending()
        with self._lock:
            if self._rows < self.window_rows:
                return None
            counts = self._counts.copy()
        shares = counts / float(self.window_rows)
        psi = {
            f.name: population_stability(f.expected, shares[o : o + len(f.expected)].tolist())
            for f, o in zip((*self._numeric, *self._categorical), self._offsets, strict=True)
        }
        report = LiveDriftReport(psi, self.thresholds.ignored_features)
        limit = self.thresholds.max_psi
        above = report.max_psi > limit
        # Under the lock: two scrapes at once log one crossing once.
        with self._lock:
            crossed, self._above = above != self._above, above
        if crossed:
            if above:
                logger.warning(
                    "live drift: PSI above %s over the last %d rows: %s",
                    limit,
                    self.window_rows,
                    ", ".join(f"{k} {psi[k]:.3f}" for k in report.drifted_features(limit)),
                )
            else:
                logger.info("live drift: PSI back under %s (max %.3f)", limit, report.max_psi)
        return report


class NoLiveDrift:
    """What a model's ``drift`` is where live drift is off or the model has no profile: it takes
    every batch and keeps none, so a team's model calls ``self.drift.observe(...)`` either way."""

    rows = 0

    def observe(self, batch: Any) -> None:
        return None

    def report(self) -> LiveDriftReport | None:
        return None


NO_LIVE_DRIFT = NoLiveDrift()
