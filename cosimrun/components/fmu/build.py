"""Building FMUs from C: compiler discovery, :func:`build_c_fmu`, the shipped examples and their cache.

The C sources are package data in ``c/``: :data:`FMI2_CS_FRAMEWORK` (the
minimal FMI 2.0 co-simulation framework ``cosimrun_fmi2cs.h`` that small C
models include, on ``cosimrun_fmi.h``: :data:`HEADERS`) and the examples of
:data:`EXAMPLES`. ``path: example:NAME``
builds an example into :func:`cache_directory` on first use
(:func:`resolve_example`), keyed by a digest of everything the build depends on.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from cosimrun.errors import FMUError, UnknownNameError
from cosimrun.fmi.extraction import cache_directory


def _c_source(name: str) -> str:
    """The text of the shipped C source file *name* (package data in ``c/``)."""
    return (resources.files("cosimrun.components.fmu") / "c" / name).read_text(encoding="utf-8")


FRAMEWORK_HEADER = "cosimrun_fmi2cs.h"
"""File name of :data:`FMI2_CS_FRAMEWORK` when a model is compiled."""

FMI2_CS_FRAMEWORK = _c_source(FRAMEWORK_HEADER)
"""A minimal FMI 2.0 co-simulation framework in C (``c/cosimrun_fmi2cs.h``; written next to a model to compile it)."""

HEADERS: dict[str, str] = {FRAMEWORK_HEADER: FMI2_CS_FRAMEWORK, "cosimrun_fmi.h": _c_source("cosimrun_fmi.h")}
"""The shipped headers by file name, written next to a model to compile it: the framework and ``cosimrun_fmi.h``,
what it shares with other C frameworks (the instance, logging, get and set of variables)."""


def fmi_headers() -> Path:
    """The FMI header directory that FMPy ships."""
    import fmpy

    return Path(fmpy.__file__).parent / "c-code"


def find_c_compiler(cc: str | None = None) -> str:
    """*cc*, ``$CC``, ``gcc`` or ``cc``; ``FMUError`` when none is installed."""
    for candidate in (cc, os.environ.get("CC"), "gcc", "cc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    raise FMUError("building an FMU from C needs a C compiler (gcc, cc or clang on PATH, or $CC)")


def build_c_fmu(
    out: str | os.PathLike[str],
    *,
    model_identifier: str,
    model_description: str,
    source: str,
    defines: Mapping[str, Any] | None = None,
    cc: str | None = None,
) -> Path:
    """Compile *source* (a model on :data:`FMI2_CS_FRAMEWORK`) into a co-simulation FMU at *out*.

    The FMU holds *model_description* as ``modelDescription.xml`` and the shared
    library for this platform; it is written atomically (a concurrent build of
    the same file is harmless). Returns the path of the FMU.
    """
    import fmpy

    out = Path(out)
    compiler = find_c_compiler(cc)
    with tempfile.TemporaryDirectory(prefix="cosimrun-fmu-build-") as tmp:
        work = Path(tmp)
        for name, text in HEADERS.items():
            (work / name).write_text(text)
        src = work / f"{model_identifier}.c"
        src.write_text(source)
        lib_rel = f"binaries/{fmpy.platform}/{model_identifier}{fmpy.sharedLibraryExtension}"
        lib = work / lib_rel
        lib.parent.mkdir(parents=True)
        flags = [f"-D{k}={v}" for k, v in (defines or {}).items()]
        cmd = [compiler, "-shared", "-fPIC", "-O2", "-ffp-contract=off", f"-I{fmi_headers()}", f"-I{work}",
               *flags, "-o", str(lib), str(src), "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise FMUError(f"compiling FMU {model_identifier!r} failed ({' '.join(cmd)}):\n{proc.stderr}")
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.{os.getpid()}.{threading.get_ident()}.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("modelDescription.xml", model_description)
            zf.write(lib, lib_rel)
        os.replace(partial, out)
    return out


@dataclass(frozen=True)
class Example:
    """A small FMU shipped as C source."""

    identifier: str
    description: str
    model_description: str
    source: str
    defines: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        """Hash of everything the built file depends on."""
        import fmpy

        h = hashlib.sha256()
        for part in (*HEADERS.values(), self.model_description, self.source, repr(sorted(self.defines.items())),
                     fmpy.platform, fmpy.__version__):
            h.update(part.encode())
        return h.hexdigest()[:16]

    def build(self, out: str | os.PathLike[str], cc: str | None = None) -> Path:
        """Compile this example into the FMU file *out* (see :func:`build_c_fmu`)."""
        return build_c_fmu(out, model_identifier=self.identifier, model_description=self.model_description,
                           source=self.source, defines=self.defines, cc=cc)


def _example(name: str) -> Example:
    example = EXAMPLES.get(name)
    if example is None:
        raise UnknownNameError("example FMU", name, EXAMPLES)
    return example


def build_example(name: str, directory: str | os.PathLike[str], cc: str | None = None) -> Path:
    """Build example FMU *name* (see :data:`EXAMPLES`) as ``<directory>/<name>.fmu``."""
    return _example(name).build(Path(directory) / f"{name}.fmu", cc)


_digests: dict[str, tuple[Example, str]] = {}
"""The digest of each example FMU by name, with the example it is of (every job of a sweep resolves its FMU)."""


def _digest(name: str, example: Example) -> str:
    """``example.digest()``, computed once per example."""
    kept = _digests.get(name)
    if kept is None or kept[0] is not example:
        kept = _digests[name] = (example, example.digest())
    return kept[1]


def resolve_example(name: str) -> Path:
    """The cached build of example FMU *name* (built with the C compiler on first use)."""
    example = _example(name)
    target = cache_directory() / "fmus" / f"{name}-{_digest(name, example)}.fmu"
    if not target.is_file():
        example.build(target)
    return target


EXAMPLES: dict[str, Example] = {
    "pendulum": Example(
        identifier="pendulum",
        description="torque -> q [rad], omega [rad/s]; parameters like cosimrun's pendulum; end stop inside the FMU",
        model_description=_c_source("pendulum.xml"),
        source=_c_source("pendulum.c"),
    ),
}
"""Example FMUs shipped as C source (``path: example:NAME``)."""
