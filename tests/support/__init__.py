"""What the tests share: fixtures (loaded as pytest plugins by `tests/conftest.py`) and helpers.

A test module imports helpers from here, never from another test module or from `conftest`; each helper is defined
once (`tests/test_suite_layout.py` checks both).
"""
