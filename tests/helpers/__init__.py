"""What more than one test module uses, by subject: plain helpers in `<subject>.py` (imported by name), pytest
fixtures in `<subject>_fixtures.py` (registered once in tests/conftest.py's `pytest_plugins`, used by name and
never imported). A test module imports from here and from tests/conftest.py, never from another test module
(tests/test_layers.py checks it). conftest registers this package for pytest's assert rewriting, so an `assert`
in a helper reports its values as one in a test does."""
