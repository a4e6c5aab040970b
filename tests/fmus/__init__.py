"""Sources and build helpers of the FMUs used by the FMU component tests (built offline during the tests)."""
