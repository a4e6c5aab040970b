import pytest

pytest.importorskip("cosimrun_example", reason="install the example plugin: pip install ./plugins/cosimrun-example")
