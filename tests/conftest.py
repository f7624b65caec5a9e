"""Suite-wide set-up: nothing the tests run writes into the user's home, and no test leaves the collector paused."""

import gc
import os
import tempfile

import pytest


# The command line keeps compiled CEL programs and passed schema checks in a cache directory
# (webhook/app/diskcache.py); tests and the commands they start share one that lives and dies with the suite.
_CACHE = tempfile.TemporaryDirectory(prefix="aiadmit-test-cache-")
os.environ["AIADMIT_CACHE_DIR"] = _CACHE.name
os.environ.pop("AIADMIT_NO_CACHE", None)


@pytest.fixture(autouse=True)
def collector_left_running():
    """Fails a test that leaves Python's cyclic collector paused, and resumes it for the tests after it.

    The server pauses it during a review until the answer is out (webhook/app/server.py, Held); a pause that
    outlived its answer went unnoticed for a whole suite, as a test far later that failed only in that order."""
    yield
    if not gc.isenabled():
        gc.enable()
        pytest.fail("the cyclic collector was left paused (gc.disable() without gc.enable(): an answer not yet out?)")
