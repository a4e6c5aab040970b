"""Each member's samples as its scalar run's recorder takes them, for ensembles whose members handle state events
or switch modes.

A run with event sources records, besides its samples at the instants it accepts (micro step 0), the sample after
each micro step of the events at an instant, and its event ports (true in the sample after the micro step in which
their event fired: :meth:`~cosimrun.core.component.CoSimComponent.handle_event`). Its members' instants differ
(each event is the member's own), so the ensemble keeps them in the ragged layout of members on their own clocks:
``time`` and ``micro`` of shape ``(samples, members)`` and each history over the same, padded after a member's last
sample (time NaN, micro -1, values NaN).

:class:`SampleLog` takes rows of members as the ensemble runs them (:meth:`SampleLog.point`, :meth:`SampleLog.after`:
arrays over the members concerned, no work per member) and lays them out at the end (:meth:`SampleLog.layout`). With
``record_every`` = N (``storage.decimate``) it keeps what the recorder's thinning keeps: every N-th point counted
per member from the first, both samples at every event instant and the last.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PAD_MICRO = -1
"""The micro step of a padding row (after a member's last sample)."""


@dataclass
class Layout:
    """Every member's samples over ``(samples, members)``: instants (NaN padded), micro steps (-1 padded) and
    ``component.port`` -> values (NaN padded; an event port's as 0.0 / 1.0)."""

    time: np.ndarray
    micro: np.ndarray
    history: dict[str, np.ndarray]


class SampleLog:
    """The samples of *members* members: the real outputs *keys* and the event ports *event_keys*
    (``component.port``), thinned by *record_every* as the scalar recorder thins them."""

    def __init__(self, members: int, keys: list[str], event_keys: list[str], record_every: int = 1) -> None:
        self.members, self.keys, self.event_keys = members, list(keys), list(event_keys)
        self.every = record_every
        self._skip = np.zeros(members, dtype=np.int64)
        """Points (micro step 0) each member drops before the next one kept."""
        self._rows: list[tuple[np.ndarray, np.ndarray, int, dict[str, np.ndarray]]] = []

    def point(self, ids: np.ndarray, t: np.ndarray | float, values: dict[str, np.ndarray],
              keep: np.ndarray | bool = False) -> None:
        """The samples of members *ids* at the instants *t* they accepted (micro step 0), real outputs *values*
        (one per member of *ids*; event ports false); kept every ``record_every``-th point of each member, and
        where *keep* (the sample before an event, the last)."""
        if not len(ids):
            return
        if self.every > 1:
            skip = self._skip[ids]
            kept = (skip == 0) | keep
            self._skip[ids] = np.where(skip == 0, self.every - 1, skip - 1)
            if not kept.all():
                ids, values = ids[kept], {key: v[kept] for key, v in values.items()}
                t = t[kept] if np.ndim(t) else t
        self._add(ids, t, 0, values, {})

    def after(self, ids: np.ndarray, t: np.ndarray | float, micro: int, values: dict[str, np.ndarray],
              events: dict[str, np.ndarray]) -> None:
        """The samples of members *ids* after micro step *micro* of their events at *t*: real outputs *values*,
        event ports *events* (each member's, true where its event fired in that micro step)."""
        if len(ids):
            self._add(ids, t, micro, values, events)

    def _add(self, ids: np.ndarray, t: np.ndarray | float, micro: int, values: dict[str, np.ndarray],
             events: dict[str, np.ndarray]) -> None:
        n = len(ids)
        row = {key: np.array(np.broadcast_to(values[key], (n,)), dtype=float) for key in self.keys}
        for key in self.event_keys:
            flags = events.get(key)
            row[key] = np.zeros(n) if flags is None else np.asarray(flags, dtype=float)
        self._rows.append((np.array(ids, dtype=np.int64), np.array(np.broadcast_to(t, (n,)), dtype=float),
                           micro, row))

    def layout(self) -> Layout:
        """Every member's samples in the order of its run (by instant and micro step, in the order taken), up to
        its first non-finite real value (which ends its run)."""
        members = self.members
        if self._rows:
            ids = np.concatenate([r[0] for r in self._rows])
            t = np.concatenate([r[1] for r in self._rows])
            micro = np.concatenate([np.full(len(r[0]), r[2], dtype=np.int32) for r in self._rows])
        else:
            ids, t, micro = np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int32)
        order = np.lexsort((micro, t, ids))
        ids = ids[order]
        counts = np.bincount(ids, minlength=members)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        rank = np.arange(len(ids)) - starts[ids]
        if self.keys and len(ids):  # as the recorder, nothing from a member's first non-finite sample on
            finite = np.ones(len(ids), dtype=bool)
            for key in self.keys:
                finite &= np.isfinite(np.concatenate([r[3][key] for r in self._rows])[order])
            bad = np.flatnonzero(~finite)
            if len(bad):
                first = np.full(members, len(ids))
                np.minimum.at(first, ids[bad], rank[bad])
                sound = rank < first[ids]
                order, ids, rank = order[sound], ids[sound], rank[sound]
                counts = np.bincount(ids, minlength=members)
        rows = int(counts.max(initial=0))
        time = np.full((rows, members), np.nan)
        time[rank, ids] = t[order]
        micro_out = np.full((rows, members), PAD_MICRO, dtype=np.int32)
        micro_out[rank, ids] = micro[order]
        history = {}
        for key in (*self.keys, *self.event_keys):
            values = np.concatenate([r[3][key] for r in self._rows]) if self._rows else np.zeros(0)
            out = np.full((rows, members), np.nan)
            out[rank, ids] = values[order]
            history[key] = out
        return Layout(time, micro_out, history)


__all__ = ["PAD_MICRO", "Layout", "SampleLog"]
