"""A resume takes over the members of an ensemble file only when all of its data still reads
(:class:`cosimrun.runner.ensembles.Finished`): a file damaged after its ensemble finished runs its members again,
as a job's damaged results file does, instead of counting them ``complete`` from its summary alone."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import pytest

from cosimrun.config.build import build_experiment
from cosimrun.ensemble import run_members
from cosimrun.runner import ensembles
from cosimrun.storage.ensemble import unreadable, write_ensemble

KEY = "components.mass1.params.stiffness"
EXPERIMENT = {
    "name": "two_mass",
    "master": {"name": "gauss_seidel"},
    "components": {
        "mass1": {"type": "mass_spring_damper", "params": {"stiffness": 10.0, "x0": 1.0}},
        "mass2": {"type": "mass_spring_damper_force", "params": {"coupling_stiffness": 100.0}},
    },
    "connections": ["mass1.x -> mass2.x_in", "mass1.v -> mass2.v_in", "mass2.force -> mass1.force"],
}


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    """A sweep directory holding one finished ensemble of jobs 3 and 4 (stiffness 5 and 20)."""
    exp = build_experiment(EXPERIMENT)
    result = run_members(exp.system, exp.master, [{"mass1.stiffness": 5.0}, {"mass1.stiffness": 20.0}],
                         t0=0.0, tf=0.2, dt=0.001)
    (tmp_path / ensembles.ENSEMBLE_DIR).mkdir()
    write_ensemble(tmp_path / ensembles.ENSEMBLE_DIR / "3-4.abc.h5", result, jobs=[3, 4],
                   overrides=[f"{KEY}=5", f"{KEY}=20"],
                   attrs={"experiment": "two_mass", ensembles.CONFIG_KEY: "key", "keys": json.dumps([KEY])})
    return tmp_path


def _flip_bytes_of_a_history(path: Path) -> str:
    """Invert 16 bytes in the middle of the first compressed chunk of ``mass1.x``; its dataset's path."""
    with h5py.File(path, "r") as f:
        info = f["ensemble/mass1.x"].id.get_chunk_info(0)
    with path.open("r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        data = fh.read(16)
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(bytes(b ^ 0xFF for b in data))
    return "/ensemble/mass1.x"


def test_the_members_of_a_readable_ensemble_file_are_taken_over(sweep_dir: Path) -> None:
    path = sweep_dir / ensembles.ENSEMBLE_DIR / "3-4.abc.h5"
    assert unreadable(path) is None
    finished = ensembles.Finished(sweep_dir)
    assert sorted(finished.by_job) == [3, 4]
    assert [(p, m, key, stored) for p, m, key, _, stored, _, _ in finished.by_job[4]] == [(path, 1, "key", (20.0,))]


def test_the_members_of_an_ensemble_file_with_a_history_that_no_longer_reads_run_again(sweep_dir: Path) -> None:
    path = sweep_dir / ensembles.ENSEMBLE_DIR / "3-4.abc.h5"
    damaged = _flip_bytes_of_a_history(path)
    problem = unreadable(path)
    assert problem is not None and problem.startswith(f"{damaged}: ")
    assert ensembles.Finished(sweep_dir).by_job == {}


def test_the_members_of_a_cut_off_ensemble_file_run_again(sweep_dir: Path) -> None:
    path = sweep_dir / ensembles.ENSEMBLE_DIR / "3-4.abc.h5"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 3 // 4])  # a copy that stopped
    assert unreadable(path) is not None
    assert ensembles.Finished(sweep_dir).by_job == {}


def test_the_members_of_an_ensemble_whose_input_file_changed_since_run_again(sweep_dir: Path) -> None:
    """An ensemble file records the files its members read (``inputs``): changed bytes run them again."""
    from cosimrun.runner.inputs import recorded

    table = sweep_dir / "signal.csv"
    table.write_text("time,y\n0,1\n1,3\n", encoding="utf-8")
    path = sweep_dir / ensembles.ENSEMBLE_DIR / "3-4.abc.h5"
    with h5py.File(path, "r+") as f:
        tab = {"type": "table", "params": {"path": str(table)}}
        f["ensemble"].attrs[ensembles.INPUTS] = recorded({"components": {"tab": tab}})
    assert sorted(ensembles.Finished(sweep_dir).by_job) == [3, 4]
    table.write_text("time,y\n0,1\n1,4\n", encoding="utf-8")
    assert ensembles.Finished(sweep_dir).by_job == {}


def test_the_members_of_an_ensemble_file_whose_data_changed_but_still_reads_run_again(sweep_dir: Path) -> None:
    """The file carries each dataset's CRC-32 as written (``data_crc32``): one value changed in place, which reads
    as well as before, runs the members again."""
    path = sweep_dir / ensembles.ENSEMBLE_DIR / "3-4.abc.h5"
    with h5py.File(path, "r") as f:
        sums = json.loads(f["ensemble"].attrs["data_crc32"])
        assert sums["mass1.x"][0] == f["ensemble/mass1.x"].shape[0]
        assert {"member", "time", "status", "job", "overrides", "final.mass1.x"} <= set(sums)
    with h5py.File(path, "r+") as f:
        f["ensemble/final.mass1.x"][1] += 1e-9
    assert unreadable(path) == ("/ensemble/final.mass1.x: CRC-32 mismatch (the data changed after it was "
                                "written)")
    assert ensembles.Finished(sweep_dir).by_job == {}


def test_an_ensemble_file_with_a_dataset_added_or_gone_is_not_taken_over(sweep_dir: Path) -> None:
    path = sweep_dir / ensembles.ENSEMBLE_DIR / "3-4.abc.h5"
    with h5py.File(path, "r+") as f:
        f["ensemble"].create_dataset("extra", data=[1.0])
    assert unreadable(path) == "/ensemble/extra: not written with the file"
    with h5py.File(path, "r+") as f:
        del f["ensemble/extra"], f["ensemble/failure_time"]
    assert unreadable(path) == "/ensemble/failure_time: missing"
    assert ensembles.Finished(sweep_dir).by_job == {}


def test_an_ensemble_file_written_before_checksums_is_taken_over_when_it_reads_whole(sweep_dir: Path) -> None:
    path = sweep_dir / ensembles.ENSEMBLE_DIR / "3-4.abc.h5"
    with h5py.File(path, "r+") as f:
        del f["ensemble"].attrs["data_crc32"]
    assert unreadable(path) is None
    assert sorted(ensembles.Finished(sweep_dir).by_job) == [3, 4]
    damaged = _flip_bytes_of_a_history(path)
    assert (unreadable(path) or "").startswith(f"{damaged}: ")
