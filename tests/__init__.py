"""The test suite: `test_*.py` modules, their shared helpers and fixtures in `tests.support`, child-process
programs in `tests/scripts/`."""
