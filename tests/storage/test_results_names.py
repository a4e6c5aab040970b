"""Reading a results file: unknown components and ports are ``UnknownNameError`` (also ``KeyError``)."""

from __future__ import annotations

import pytest

from cosimrun.errors import UnknownNameError
from cosimrun.storage import HDF5Writer, load_results


@pytest.fixture
def results(tmp_path):
    with HDF5Writer(tmp_path / "run.h5", experiment="demo") as writer:
        writer.add_component("plant", {"x": ("m", "real"), "hit": (None, "event")})
    return load_results(tmp_path / "run.h5")


def test_unknown_component(results):
    with pytest.raises(UnknownNameError, match=r"unknown component 'plnt' in run.h5; did you mean 'plant'\? "
                                               r"\(known: plant\)") as info:
        results.history("plnt")
    assert isinstance(info.value, KeyError)
    assert (info.value.kind, info.value.name, info.value.known) == ("component", "plnt", ["plant"])


def test_unknown_port(results):
    with pytest.raises(UnknownNameError, match=r"unknown port 'xx' of component 'plant'; did you mean 'x'\?"):
        results.history("plant", ["xx"])
    with pytest.raises(UnknownNameError, match=r"unknown port 'time' of component 'plant'"):
        results.history("plant", ["time"])
    assert list(results.history("plant", ["x"])) == ["x"]
