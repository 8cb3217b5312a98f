import os

import pytest
from hypothesis import settings

import dmlops

# CI: derandomized and without deadlines, so a run is reproducible and never flaky on a
# loaded machine; hypothesis prints the failing example and its reproduction blob.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True, max_examples=150)
settings.register_profile("dev", deadline=None, max_examples=300)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True)
def restore_threads():
    """Tests may change the thread count; put the default back after each."""
    before = dmlops.get_num_threads()
    yield
    dmlops.set_num_threads(before)
