import os

import pytest
from hypothesis import settings

import dmlops

# Hypothesis profiles, chosen with HYPOTHESIS_PROFILE (scripts/test runs "ci"):
#   ci     derandomized and without deadlines, so a run is reproducible and never flaky on a loaded
#          machine; 2,000 examples per property (each operator's differential fuzz test among them);
#          hypothesis prints the failing example and its reproduction blob.
#   dev    the default for a bare `pytest`: random, fewer examples, a quick local run.
#   long   a long local hunt: 20,000 examples per property.
#   asan   the run under AddressSanitizer (scripts/test's sanitizer stage), where every call is
#          several times slower.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True, max_examples=2000)
settings.register_profile("dev", deadline=None, max_examples=300)
settings.register_profile("long", deadline=None, print_blob=True, max_examples=20000)
settings.register_profile("asan", derandomize=True, deadline=None, print_blob=True, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(autouse=True)
def restore_threads():
    """Tests may change the thread count; put the default back after each."""
    before = dmlops.get_num_threads()
    yield
    dmlops.set_num_threads(before)
