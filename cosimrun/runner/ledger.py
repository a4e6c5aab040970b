"""The driver's ledger of a sweep: job outcomes entered into the sweep index, the summary, the exit status.

A launcher enters every job's outcome into the :func:`ledger_for` its sweep
directory; ``cosimrun``'s ``main()`` calls :func:`finish` after Hydra returns,
which writes the index whole and then releases the sweep's directory lock
(:mod:`cosimrun.runner.lock`).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from cosimrun.errors import ResultsWriteError
from cosimrun.runner import signals
from cosimrun.runner.index import status_counts, write_index, write_index_rows
from cosimrun.runner.lock import release_all
from cosimrun.runner.outcome import JobOutcome
from cosimrun.runner.signals import INTERRUPTED
from cosimrun.storage.sweep_index import INDEX_FILE, remove_index_parts


class SweepLedger:
    """Driver-side bookkeeping of one sweep directory: outcomes by job number and the index file.

    The index is written when an outcome is entered and when the launcher
    wakes while jobs run (:meth:`flush_due`), at most every *min_interval*
    seconds and at most a tenth of the time, plus :meth:`flush` at the end of
    every batch, so that an interrupted sweep still has an index of what
    finished and a job that finished while another hangs does not stay
    ``pending`` in it. The first write makes the whole file with a new
    generation; later ones append the rows that changed since to its row store
    (:func:`cosimrun.runner.index.write_index_rows`), so a write costs what is
    new, not what the sweep is. :meth:`close` writes the file whole again.
    """

    write_share = 0.1
    """Largest share of the driver's time spent rewriting the index while jobs finish."""

    def __init__(self, sweep_dir: str | os.PathLike[str], min_interval: float = 0.5) -> None:
        self.sweep_dir = Path(sweep_dir).absolute()
        self.index_path = self.sweep_dir / INDEX_FILE
        self.min_interval = min_interval
        self.outcomes: dict[int, JobOutcome] = {}
        self._next_write = -math.inf
        self._dirty = False
        self.experiment = ""
        self._first_start = math.inf
        self._last_end = -math.inf
        self._generation = ""
        """The generation of the index file written whole first; "" until then, and after :meth:`close`."""
        self._changed: set[int] = set()
        """Jobs entered since the last write."""
        self._appends = 0
        """Appends to the index's row store in this generation."""
        self._appending = True
        """Whether changed rows are appended to the row store; false once an append failed (a full disk)."""
        self.write_error: ResultsWriteError | None = None
        """Why the last write of the index failed (it then holds what was written before); None after a write."""

    def add_pending(self, num: int, overrides: list[str]) -> None:
        """Enter a job as submitted, not finished yet; its outcomes share the list *overrides* (not copied)."""
        self.outcomes[num] = JobOutcome(num, "pending", overrides, attempts=0)
        self._changed.add(num)
        self._dirty = True

    def enter(self, outcome: JobOutcome) -> None:
        """Enter a job's outcome (replacing what was there); the index is rewritten when it is due."""
        now = time.monotonic()
        if not outcome.reused and not math.isnan(outcome.job_time_s):
            self._first_start = min(self._first_start, now - outcome.job_time_s)
            self._last_end = now
        _share(outcome, self.outcomes.get(outcome.num))
        self.outcomes[outcome.num] = outcome
        self._changed.add(outcome.num)
        self._dirty = True
        self.flush_due()

    def flush_due(self) -> None:
        """Rewrite the index if something changed and the last rewrite is long enough ago."""
        if time.monotonic() >= self._next_write:
            self.flush()

    def interrupt_pending(self, reason: str = INTERRUPTED) -> None:
        """Mark the jobs not finished yet as interrupted, *reason* (Ctrl-C, SIGTERM) as their error."""
        for num, o in self.outcomes.items():
            if o.status == "pending":
                self.outcomes[num] = replace(o, status="interrupted", error=f"the sweep was {reason}")
                self._changed.add(num)
        self._dirty = True

    def forget(self) -> None:
        """Drop every job and the index written so far: the sweep ran nothing (its cluster could not be reached)."""
        self.outcomes.clear()
        self._changed.clear()
        self._dirty = False
        self.index_path.unlink(missing_ok=True)
        remove_index_parts(self.index_path)
        self._generation = ""

    def flush(self) -> None:
        """Write what changed since the last write: the whole index the first time, then the changed rows appended
        (the whole index each time once an append failed)."""
        if not self._dirty or not self.outcomes:
            return
        with signals.shielded():  # not half-written by an interrupt (raised once it is written)
            start = time.monotonic()
            try:
                start = self._write()
                self.write_error = None
            except ResultsWriteError as exc:
                self.write_error = exc
        end = time.monotonic()
        self._next_write = end + max(self.min_interval, (end - start) / self.write_share)
        self._dirty = self.write_error is not None

    def _write(self) -> float:
        """Write the index (see :meth:`flush`); when the part that counts against :attr:`write_share` began."""
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        if not self._appending:
            self._write_whole()
            return start
        if not self._generation:
            generation = uuid.uuid4().hex
            write_index(self.index_path, self.outcomes.values(), self.attrs(), generation=generation)
            remove_index_parts(self.index_path)  # an earlier launch's, of another generation
            self._generation, self._appends = generation, 0
            changed: Iterable[JobOutcome] = self.outcomes.values()  # the store's first rows are all of them
            start = time.monotonic()  # the whole file, written once, does not put off the appends after it
        else:
            changed = [self.outcomes[num] for num in sorted(self._changed)]
        try:
            write_index_rows(self.index_path, self._generation, self._appends, changed)
        except ResultsWriteError:
            self._appending = False  # the store keeps the rows before; the index is written whole from now on
            self._write_whole()
            return start
        self._appends += 1
        self._changed.clear()
        return start

    def _write_whole(self) -> None:
        write_index(self.index_path, self.outcomes.values(), self.attrs())
        remove_index_parts(self.index_path)
        self._generation = ""
        self._changed.clear()

    def close(self) -> None:
        """Write the index whole (its rows and attributes as a table, without parts), if anything was entered;
        a write that fails leaves :attr:`write_error` set and the index as it was."""
        if not self.outcomes or (not self._dirty and not self._generation):
            return
        with signals.shielded():
            try:
                self.sweep_dir.mkdir(parents=True, exist_ok=True)
                self._write_whole()
                self.write_error = None
            except ResultsWriteError as exc:
                self.write_error = exc
                return
        self._dirty = False

    @property
    def jobs_wall_time_s(self) -> float:
        """From the start of the first job run here to the end of the last one (NaN before any)."""
        return self._last_end - self._first_start if self._last_end >= self._first_start else math.nan

    def attrs(self) -> dict[str, Any]:
        """The sweep-wide attributes of the index file."""
        return {"experiment": self.experiment, "jobs_wall_time_s": self.jobs_wall_time_s}

    @property
    def failed(self) -> list[JobOutcome]:
        """The failed and interrupted jobs' outcomes, by job number."""
        return [o for _, o in sorted(self.outcomes.items()) if o.failed]

    @property
    def unfinished(self) -> bool:
        """Whether a job failed, was interrupted or never ran, or the index lacks what was entered: the command
        did not do all it was asked."""
        return bool(self.failed) or self.write_error is not None or any(
            o.status == "pending" for o in self.outcomes.values())

    def summary(self) -> str:
        """A short block: counts, then one line per failed job with its error, then the index path."""
        rows = list(self.outcomes.values())
        c = status_counts(rows)
        head = f"sweep: {c['n_jobs']} jobs, {c['n_complete']} complete"
        head += f" ({c['n_reused']} reused)" if c["n_reused"] else ""
        head += f", {c['n_failed']} failed"
        head += f", {c['n_interrupted']} interrupted" if c["n_interrupted"] else ""
        head += f", {c['n_pending']} not run" if c["n_pending"] else ""
        lines = [head]
        for o in self.failed:
            if o.status == "failed":
                lines.append(f"  #{o.num} failed: {' '.join(_task_overrides(o.overrides))}: {o.error}")
        lines += [f"  #{o.num} {o.note}" for _, o in sorted(self.outcomes.items()) if o.note and not o.failed]
        if self.write_error is None:
            lines.append(f"index: {self.index_path}")
        elif self.index_path.exists():
            lines.append(f"index: {self.index_path} lacks the jobs entered last: {self.write_error}")
        else:
            lines.append(f"index: not written: {self.write_error}")
        if c["n_interrupted"] or c["n_pending"] or self.write_error is not None:
            lines.append(
                f"to finish it, run the same command with hydra.sweep.dir={self.sweep_dir} hydra.launcher.resume=true"
            )
        return "\n".join(lines)


def _share(outcome: JobOutcome, previous: JobOutcome | None) -> None:
    """Make *outcome*, as it came back from a worker, share what the driver holds already: the overrides list of
    the job's *previous* outcome and one copy of each status, worker, path and summary name (a sweep's driver
    keeps every job's outcome: 10^5 of them)."""
    if previous is not None and previous.overrides == outcome.overrides:
        outcome.overrides = previous.overrides
    outcome.status = sys.intern(outcome.status)
    outcome.worker = sys.intern(outcome.worker)
    outcome.path = sys.intern(outcome.path)
    if outcome.summaries:
        outcome.summaries = {sys.intern(name): value for name, value in outcome.summaries.items()}


def _task_overrides(overrides: Sequence[str]) -> list[str]:
    return [o for o in overrides if not o.startswith("hydra.")]


_ledgers: dict[Path, SweepLedger] = {}


def ledger_for(sweep_dir: str | os.PathLike[str]) -> SweepLedger:
    """The driver's ledger of *sweep_dir* (created on first use)."""
    key = Path(sweep_dir).absolute()
    if key not in _ledgers:
        _ledgers[key] = SweepLedger(key)
    return _ledgers[key]


def finish(stream: TextIO | None = None) -> int:
    """End of the command: flush every index, release the sweep locks, print each summary; 1 if a job failed, was
    interrupted or never ran, or an index could not be written.

    Called by ``cosimrun``'s ``main()`` after Hydra returns, also after
    Ctrl-C, SIGTERM or an error (nothing happens when no sweep ran).
    """
    code = 0
    with signals.shielded(deliver=False), contextlib.ExitStack() as done:  # a signal now only sets the exit status
        done.callback(release_all)
        for sweep_dir in list(_ledgers):
            ledger = _ledgers.pop(sweep_dir)
            if not ledger.outcomes:
                continue
            ledger.close()
            failed = ledger.unfinished
            print(ledger.summary(), file=(stream or (sys.stderr if failed else sys.stdout)))
            code = code or int(failed)
    return code
