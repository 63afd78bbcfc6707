"""Stream-stream joins: Spark's ``StreamingSymmetricHashJoinExec`` with watermarks on both inputs.

The query modelled (PySpark)::

    left = src_l.withWatermark("event_time", "Dl ms")
    right = src_r.withWatermark("event_time", "Dr ms")
    left.join(right, (l.key == r.key)
                     & (l.event_time >= r.event_time - expr("INTERVAL X MILLISECONDS"))   # lower_ms
                     & (l.event_time <= r.event_time + expr("INTERVAL Y MILLISECONDS")),  # upper_ms
              how)   # inner / left_outer / right_outer / full_outer / left_semi

Semantics (Spark 3.5-4.x ``StreamingSymmetricHashJoinExec``, ``SymmetricHashJoinStateManager``,
``StreamingJoinHelper.getStateValueWatermark``; checked against PySpark 4.3.0 by
``tests/differential/joins_*``), per micro-batch:

* **Late rows** (``eventTimeWatermarkForLateEvents``, the previous batch's watermark): on each side,
  a row with ``event_time <= late_wm`` (microseconds vs ``late_wm * 1000``) is dropped before it
  joins or touches state; both sides' drops add up to ``numRowsDroppedByWatermark``.
* **Join**: the left input rows first, each joined with the right *state* (earlier batches' right
  rows) and then appended to the left state (``matched`` = it found a partner). Then the right input
  rows, each joined with the left state (which now holds this batch's left rows too, so a pair within
  one batch is output once) and appended to the right state unless the right state watermark already
  removes it in this batch (kept when it is an unmatched row of a right/full outer join, so that its
  NULL row is output by the eviction below). A stored row found by a partner is marked ``matched``.
  Left semi: a left row that matched is output once and never stored; a right row outputs the stored
  left rows it matches and **removes them from state** (PySpark 4.3.0; the Spark 3.5 code and
  ``StreamingLeftSemiJoinSuite`` keep them marked ``matched``). Such a removal counts in
  ``numRowsRemoved`` only when the left row was stored by an earlier batch (FINDINGS.md J3). A right
  row that the right state watermark already removes finds only the left rows of earlier batches, not
  the left rows of its own batch (PySpark 4.3.0, as if a left semi join ran its right input first:
  FINDINGS.md JR4; seen when the late filter's watermark lags the eviction one, e.g. the first batch
  after a restart).
* **State value watermarks** (``getStateValueWatermark``, from the global watermark ``wm`` of the
  batch, ms): ``l.t >= r.t - X`` gives the left state watermark ``wm - X - 1`` (``>``: ``wm - X``);
  ``l.t <= r.t + Y`` gives the right one ``wm - Y - 1`` (``<``: ``wm - Y``). A side without such a
  bound has none: **its state never shrinks** (neither does any state without a time-range
  condition), and then no no-data batch runs for the join (``shouldRunAnotherBatch`` needs a state
  watermark predicate).
* **Eviction** after the join: state rows with ``t <= state_wm * 1000`` (µs) are removed. On the
  outer side(s) of an outer join each removed row that never matched is output NULL-padded.
  ``numRowsRemoved`` counts every removed row of both sides (PySpark 4.3.0; Spark 3.x's
  ``onOutputCompletion`` counted only the clean-up of the non-outer sides, so an outer side's
  removals were missing there: tests/differential/FINDINGS.md J2).
* Metrics: ``numRowsTotal`` = rows in both sides' state, ``numRowsUpdated`` = rows appended this
  batch, ``numOutputRows`` = joined + NULL-padded rows.

Spark rejects an outer/semi join whose outer side has no state watermark
(``UnsupportedOperationChecker``: left outer and left semi need ``lower_ms``, right outer needs
``upper_ms``, full outer both); :meth:`StreamJoin.validate` raises :class:`EngineConfigError` for it.
Null event times never satisfy a time-range condition, are never late and never evicted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from monitor.watermark.config import MAX_DELAY_MS, EngineConfigError, WatermarkConfig
from monitor.watermark.events import EventsTable
from monitor.watermark.operators import OpResult, _late_rows
from monitor.watermark.results import JoinOutput, Windows

__all__ = ["JOIN_TYPES", "JoinOperator", "JoinType", "StreamJoin"]

JoinType = Literal["inner", "left_outer", "right_outer", "full_outer", "left_semi"]
JOIN_TYPES: tuple[JoinType, ...] = ("inner", "left_outer", "right_outer", "full_outer", "left_semi")

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class StreamJoin:
    """A stream-stream equi-join on ``key`` of input ``left`` with input ``right``.

    Attributes:
        left / right: the input (``source``) names of the two sides; each has its own
            ``withWatermark`` (delays from ``WatermarkConfig.delay_for``).
        join_type: ``inner``, ``left_outer``, ``right_outer``, ``full_outer`` or ``left_semi``.
        lower_ms: ``l.event_time >= r.event_time - lower_ms`` (``>`` when ``lower_strict``);
            ``None``: no such conjunct. Bounds the LEFT state.
        upper_ms: ``l.event_time <= r.event_time + upper_ms`` (``<`` when ``upper_strict``);
            ``None``: no such conjunct. Bounds the RIGHT state.

        right_time_pruned: the right event time is read neither by the condition nor after the join
            (a key-only join whose rows are aggregated by the left time): Spark's column pruning
            removes it below the join, so right rows are never filtered as late (the right input's
            watermark still moves). ``join -> agg`` chains set it (tests/differential/FINDINGS.md JA1).

    Both ``None`` is a key-only join: its state is never evicted (Spark allows it for inner joins).
    """

    left: str
    right: str
    join_type: JoinType = "inner"
    lower_ms: int | None = None
    upper_ms: int | None = None
    lower_strict: bool = False
    upper_strict: bool = False
    right_time_pruned: bool = False

    def validate(self) -> None:
        """Check the spec as Spark's ``UnsupportedOperationChecker`` does.

        Raises:
            EngineConfigError: naming the field, and for an outer/semi join without the range
                condition that bounds its outer side, the conjunct to add.
        """
        if self.join_type not in JOIN_TYPES:
            raise EngineConfigError(
                f"join_type must be one of {', '.join(JOIN_TYPES)}, got {self.join_type!r}"
            )
        if not self.left or not self.right or self.left == self.right:
            raise EngineConfigError(
                f"join left and right must name two different inputs, got {self.left!r} and {self.right!r}"
            )
        for what, v in (("lower_ms", self.lower_ms), ("upper_ms", self.upper_ms)):
            if v is not None and abs(v) > MAX_DELAY_MS:
                raise EngineConfigError(f"join {what} must be at most {MAX_DELAY_MS} ms, got {v}")
        if self.right_time_pruned and (self.lower_ms is not None or self.upper_ms is not None):
            raise EngineConfigError(
                "join right_time_pruned needs a key-only join: a range condition reads it"
            )
        need_lower = self.join_type in ("left_outer", "left_semi", "full_outer")
        need_upper = self.join_type in ("right_outer", "full_outer")
        if (need_lower and self.lower_ms is None) or (need_upper and self.upper_ms is None):
            missing = []
            if need_lower and self.lower_ms is None:
                missing.append(f"{self.left}.event_time >= {self.right}.event_time - INTERVAL ...")
            if need_upper and self.upper_ms is None:
                missing.append(f"{self.left}.event_time <= {self.right}.event_time + INTERVAL ...")
            raise EngineConfigError(
                f"a stream-stream {self.join_type} join needs a time-range condition bounding its outer "
                f"side, or its unmatched rows are never output and its state never shrinks; Spark "
                f"rejects this query. Add: {' AND '.join(missing)}"
            )

    def left_state_watermark_ms(self, watermark_ms: int) -> int | None:
        """The left state value watermark for the batch watermark ``watermark_ms`` (``None``: none).

        ``StreamingJoinHelper.getStateValueWatermark``: ``wm - lower_ms``, minus 1 for ``>=``.
        """
        if self.lower_ms is None:
            return None
        return watermark_ms - self.lower_ms - (0 if self.lower_strict else 1)

    def right_state_watermark_ms(self, watermark_ms: int) -> int | None:
        """The right state value watermark (``wm - upper_ms``, minus 1 for ``<=``; ``None``: none)."""
        if self.upper_ms is None:
            return None
        return watermark_ms - self.upper_ms - (0 if self.upper_strict else 1)

    @property
    def evicts_state(self) -> bool:
        """Whether any side's state can be evicted (else no no-data batch ever runs for the join)."""
        return self.lower_ms is not None or self.upper_ms is not None

    def describe(self) -> str:
        """The join condition as Spark SQL text (for messages)."""
        parts = [f"{self.left}.key = {self.right}.key"]
        if self.lower_ms is not None:
            op = ">" if self.lower_strict else ">="
            parts.append(f"{self.left}.t {op} {self.right}.t - {self.lower_ms} ms")
        if self.upper_ms is not None:
            op = "<" if self.upper_strict else "<="
            parts.append(f"{self.left}.t {op} {self.right}.t + {self.upper_ms} ms")
        return f"{self.join_type} join ON " + " AND ".join(parts)


class _Side:
    """One side's state: key code -> list of ``[row_index, event_time_us or None, matched, batch seq]``."""

    def __init__(self) -> None:
        self.rows: dict[int, list[list[Any]]] = {}
        self.count = 0

    def append(self, key: int, row: int, t_us: int | None, matched: bool, seq: int) -> None:
        self.rows.setdefault(key, []).append([row, t_us, matched, seq])
        self.count += 1

    def evict(self, limit_us: int | None) -> list[list[Any]]:
        """Remove and return the entries with a time ``<= limit_us`` (none when ``limit_us`` is None)."""
        if limit_us is None:
            return []
        out: list[list[Any]] = []
        for key in list(self.rows):
            keep: list[list[Any]] = []
            for e in self.rows[key]:
                (out if e[1] is not None and e[1] <= limit_us else keep).append(e)
            if keep:
                self.rows[key] = keep
            else:
                del self.rows[key]
        self.count -= len(out)
        return out


class JoinOperator:
    """The join as a :class:`monitor.watermark.operators.Operator` (built by ``make_operator``).

    Raises:
        EngineConfigError: the events have an input that is neither side of the join.
    """

    def __init__(self, events: EventsTable, config: WatermarkConfig, spec: StreamJoin) -> None:
        spec.validate()
        names = events.source_names
        used = {names[c] for c in np.unique(events.source_codes).tolist()} if len(events) else set()
        stray = sorted(used - {spec.left, spec.right})
        if stray:
            raise EngineConfigError(
                f"the events have rows of input(s) {', '.join(map(repr, stray))}, but the join reads only "
                f"{spec.left!r} (left) and {spec.right!r} (right): give each row's side in the source column"
            )
        self._events = events
        self._config = config
        self._spec = spec
        self._left_code = names.index(spec.left) if spec.left in names else -1
        self._right_code = names.index(spec.right) if spec.right in names else -1
        self._left = _Side()
        self._right = _Side()
        self._seq = 0  # batches processed (tells rows stored by this batch from earlier ones)

    @property
    def evicts_state(self) -> bool:
        """See :attr:`StreamJoin.evicts_state` (the runtime asks before a no-data batch)."""
        return self._spec.evicts_state

    def _matches(self, l_us: int | None, r_us: int | None) -> bool:
        s = self._spec
        if s.lower_ms is None and s.upper_ms is None:
            return True
        if l_us is None or r_us is None:
            return False  # a comparison with NULL is not true
        if s.lower_ms is not None:
            d = r_us - s.lower_ms * 1000
            if l_us < d or (s.lower_strict and l_us == d):
                return False
        if s.upper_ms is not None:
            d = r_us + s.upper_ms * 1000
            if l_us > d or (s.upper_strict and l_us == d):
                return False
        return True

    def process(self, rows: I64, late_wm_ms: int, evict_wm_ms: int) -> OpResult:
        """Run one batch (see the module docstring for the order of the steps)."""
        ev = self._events
        s = self._spec
        jt = s.join_type
        self._seq += 1
        valid = ev.valid[rows]
        t = ev.event_time_us[rows]
        late_mask = valid & (t <= late_wm_ms * 1000)
        if s.right_time_pruned:  # no event-time column on the right input: nothing to filter
            late_mask &= ev.source_codes[rows] != self._right_code
        late_idx = rows[late_mask]
        codes = ev.source_codes[rows]
        live = ~late_mask
        left_in = rows[live & (codes == self._left_code)]
        right_in = rows[live & (codes == self._right_code)]
        late_left = int((late_mask & (codes == self._left_code)).sum())
        lw = s.left_state_watermark_ms(evict_wm_ms)
        rw = s.right_state_watermark_ms(evict_wm_ms)
        l_limit = None if lw is None else lw * 1000
        r_limit = None if rw is None else rw * 1000
        out_l: list[int] = []
        out_r: list[int] = []
        updated = 0

        def time_of(i: int) -> int | None:
            return int(ev.event_time_us[i]) if ev.valid[i] else None

        for i in left_in.tolist():
            key = int(ev.key_codes[i])
            lt = time_of(i)
            found = False
            for e in self._right.rows.get(key, ()):
                if self._matches(lt, e[1]):
                    found = True
                    e[2] = True
                    if jt == "left_semi":
                        break  # one output row; only the first partner is looked at (and marked)
                    out_l.append(i)
                    out_r.append(e[0])
            if jt == "left_semi" and found:
                out_l.append(i)
                out_r.append(-1)
                continue
            self._left.append(key, i, lt, found, self._seq)
            updated += 1
        semi_removed = semi_removed_counted = 0
        for i in right_in.tolist():
            key = int(ev.key_codes[i])
            rt = time_of(i)
            found = False
            evicted_now = r_limit is not None and rt is not None and rt <= r_limit
            if jt == "left_semi":
                # PySpark 4.3.0: a stored left row found by a right row is output once and removed
                # from state; counted in numRowsRemoved only when stored by an earlier batch (J3).
                # A right row the right state watermark already removes (not stored) finds only the
                # left rows of earlier batches, not those this batch stored (FINDINGS.md JR4)
                stored = self._left.rows.get(key, [])
                hits = [self._matches(e[1], rt) and not (evicted_now and e[3] == self._seq) for e in stored]
                if any(hits):
                    found = True
                    keep = [e for e, h in zip(stored, hits, strict=True) if not h]
                    for e in (e for e, h in zip(stored, hits, strict=True) if h):
                        out_l.append(e[0])
                        out_r.append(-1)
                        semi_removed += 1
                        semi_removed_counted += int(e[3] != self._seq)
                    self._left.count -= len(stored) - len(keep)
                    if keep:
                        self._left.rows[key] = keep
                    else:
                        del self._left.rows[key]
            for e in () if jt == "left_semi" else self._left.rows.get(key, ()):
                if self._matches(e[1], rt):
                    found = True
                    e[2] = True
                    out_l.append(e[0])
                    out_r.append(i)
            keep_for_null = jt in ("right_outer", "full_outer") and not found
            if not evicted_now or keep_for_null:
                self._right.append(key, i, rt, found, self._seq)
                updated += 1
        joined = len(out_l)
        # eviction: outer sides output their unmatched rows NULL-padded (not counted as removed)
        removed_l = self._left.evict(l_limit)
        removed_r = self._right.evict(r_limit)
        null_left = null_right = 0
        if jt in ("left_outer", "full_outer"):
            for e in removed_l:
                if not e[2]:
                    out_l.append(e[0])
                    out_r.append(-1)
                    null_left += 1
        if jt in ("right_outer", "full_outer"):
            for e in removed_r:
                if not e[2]:
                    out_l.append(-1)
                    out_r.append(e[0])
                    null_right += 1
        late_us = late_wm_ms * 1000 - ev.event_time_us[late_idx]
        output = JoinOutput(
            left_rows=np.asarray(out_l, dtype=np.int64),
            right_rows=np.asarray(out_r, dtype=np.int64),
            joined_rows=joined,
            null_padded_left_rows=null_left,
            null_padded_right_rows=null_right,
            late_left_rows=late_left,
            late_right_rows=len(late_idx) - late_left,
            state_rows_left=self._left.count,
            state_rows_right=self._right.count,
            evicted_left_rows=len(removed_l),
            evicted_right_rows=len(removed_r),
            semi_matched_removed_rows=semi_removed,
            left_state_watermark_ms=lw,
            right_state_watermark_ms=rw,
        )
        return OpResult(
            late=_late_rows(ev, self._config, late_idx, None, None, late_us),
            late_rows=late_idx,
            emitted=Windows(),
            output_rows=len(out_l),
            duplicates_dropped=0,
            state_rows=self._left.count + self._right.count,
            state_rows_removed=len(removed_l) + len(removed_r) + semi_removed_counted,
            state_rows_updated=updated,
            dropped_by_watermark_metric=len(late_idx),
            join=output,
        )

    def state_rows(self) -> int:
        """Rows in both sides' state."""
        return self._left.count + self._right.count

    def snapshot(self) -> dict[str, Any]:
        """``{"left": {key: [[row, event_time_us, matched], ...]}, "right": {...}}``."""
        names = self._events.key_names
        return {
            side: {names[k]: [list(e[:3]) for e in v] for k, v in st.rows.items()}
            for side, st in (("left", self._left), ("right", self._right))
        }
