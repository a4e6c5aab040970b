"""Import an SSP archive into a config directory: ``experiment/NAME.yaml`` and the FMUs under ``fmus/NAME/``.

Everything is prepared in a staging directory inside the target directory
(FMUs copied out of the archive, read, the config mapped and built once as a
run would build it) and moved into place only when all of that succeeded: a
refused archive leaves the target directory as it was (directories the import
created are removed again). The result runs with
``cosimrun --config-dir DIR +experiment=NAME``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from cosimrun.errors import ConfigError, CosimrunError
from cosimrun.fmi.description import FMUModel, read_fmu
from cosimrun.ssp.mapping import experiment_config
from cosimrun.ssp.reader import SSPArchive, SSPError, SystemDecl, read_ssp

NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
"""Experiment names the import writes (a file name Hydra can select with ``+experiment=NAME``)."""


@dataclass
class ImportResult:
    """What :func:`import_ssp` wrote and what it chose."""

    experiment: Path
    """The experiment file, ``DIR/experiment/NAME.yaml``."""
    fmus: list[Path]
    notes: list[str] = field(default_factory=list)
    """Choices made where the SSP says nothing (``run.tf``, ``run.dt``)."""
    unused_entries: list[str] = field(default_factory=list)
    """Archive entries the SSD does not refer to: not imported."""
    annotations: dict[str, int] = field(default_factory=dict)
    """The annotations of the SSD and its SSV files, ignored: how many of each ``type``."""

    @property
    def annotation_notice(self) -> str | None:
        """One line listing the ignored annotations by type, the most frequent first (``None`` when there are none)."""
        if not self.annotations:
            return None
        n = sum(self.annotations.values())
        ranked = sorted(self.annotations.items(), key=lambda item: (-item[1], item[0]))
        kinds = ", ".join(f"{kind} ({count})" for kind, count in ranked)
        return (f"ignored {n} annotation{'' if n == 1 else 's'} (tool-specific data, which SSP lets an importer "
                f"ignore; none changes what cosimrun maps): {kinds}")


def import_ssp(ssp: str | os.PathLike[str], directory: str | os.PathLike[str], name: str | None = None, *,
               force: bool = False) -> ImportResult:
    """Write the system of archive *ssp* as experiment *name* (default: the archive's stem) into *directory*.

    Raises :class:`~cosimrun.ssp.reader.SSPError` (a :class:`ConfigError`)
    naming the file and element that cannot be imported, and ``ConfigError``
    for a bad name or targets that exist (unless *force*).
    """
    source = Path(ssp)
    name = source.stem if name is None else name
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError("--name", f"{name!r} cannot name an experiment file; use letters, digits, '_', '-', '.'")
    root = Path(directory)
    targets = (root / "experiment" / f"{name}.yaml", root / "fmus" / name)
    if not force:
        for target in targets:
            if target.exists():
                raise ConfigError(None, f"{target} exists; pass --force to replace it, or choose another --name")
    system, archive = read_ssp(source)
    with archive.zip:
        created = _make_dirs(root)
        staging = Path(tempfile.mkdtemp(prefix=".ssp-import-", dir=root))
        try:
            files = _copy_fmus(system, archive, staging / "fmus" / name)
        except BaseException:
            _remove(staging, created)
            raise
    try:
        models = _read_models(system, files)
        paths = {comp.name: f"../fmus/{name}/{files[comp.source].name}" for comp in system.components}
        config, notes = experiment_config(system, models, paths, name)
        (staging / "experiment").mkdir()
        _check_builds(config, staging / "experiment")
        staged = staging / "experiment" / f"{name}.yaml"
        staged.write_text(_yaml(config, source.name))
        _move_into_place(staging, root, name, targets, force)
    except BaseException:
        _remove(staging, created)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    fmus = sorted(targets[1] / f.name for f in set(files.values()))
    return ImportResult(targets[0], fmus, notes, system.unused_entries, dict(system.annotations))


def _make_dirs(root: Path) -> list[Path]:
    """Create *root*, ``experiment/`` and ``fmus/`` as needed; the ones created, outermost first."""
    created = []
    for path in (root, root / "experiment", root / "fmus"):
        if not path.exists():
            path.mkdir()
            created.append(path)
    return created


def _remove(staging: Path, created: list[Path]) -> None:
    """Undo a failed import: the staging directory and the directories it created."""
    shutil.rmtree(staging, ignore_errors=True)
    for path in reversed(created):
        shutil.rmtree(path, ignore_errors=True)


def _copy_fmus(system: SystemDecl, archive: SSPArchive, target: Path) -> dict[str, Path]:
    """Copy each FMU the components use (once per archive entry) into *target*; entry -> file."""
    target.mkdir(parents=True)
    files: dict[str, Path] = {}
    taken: set[str] = set()
    for comp in system.components:
        if comp.source in files:
            continue
        stem, suffix = PurePosixPath(comp.source).stem, PurePosixPath(comp.source).suffix or ".fmu"
        file_name, n = f"{stem}{suffix}", 1
        while file_name in taken:
            n += 1
            file_name = f"{stem}_{n}{suffix}"
        taken.add(file_name)
        files[comp.source] = target / file_name
        archive.copy(comp.source, files[comp.source])
    return files


def _read_models(system: SystemDecl, files: dict[str, Path]) -> dict[str, FMUModel]:
    models = {}
    for comp in system.components:
        try:
            models[comp.name] = read_fmu(files[comp.source])
        except (ValueError, CosimrunError) as exc:
            raise SSPError(comp.where, f"component {comp.name!r}: FMU {comp.source}: "
                                       f"{str(exc).replace(str(files[comp.source]), comp.source)}") from None
    return models


def _check_builds(config: dict[str, object], experiment_dir: Path) -> None:
    """Build the experiment as a run would (FMUs loaded, ports, units, connections checked), then free it."""
    from cosimrun.config.build import build_experiment
    from cosimrun.runner.configtext import relocate_paths

    try:
        experiment = build_experiment(relocate_paths(config, experiment_dir))
    except ConfigError as exc:
        raise ConfigError(exc.key, f"the imported experiment does not build: {exc.message}") from None
    experiment.system.free()


def _yaml(config: dict[str, object], source: str) -> str:
    body = yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)
    return f"# @package _global_\n# Imported from {source} by cosimrun ssp import.\n{body}"


def _move_into_place(staging: Path, root: Path, name: str, targets: tuple[Path, Path], force: bool) -> None:
    """Move the FMUs, then the experiment file (last: its presence means the import completed)."""
    experiment, fmus = targets
    if force:
        if fmus.exists():
            shutil.rmtree(fmus)
        experiment.unlink(missing_ok=True)
    os.replace(staging / "fmus" / name, fmus)
    os.replace(staging / "experiment" / f"{name}.yaml", experiment)
