"""Suite-wide set-up: nothing the tests run writes into the user's home."""

import os
import tempfile

import pytest

from webhook.app import diskcache

# The command line keeps compiled CEL programs and passed schema checks in a cache directory
# (webhook/app/diskcache.py); tests and the commands they start share one that lives and dies with the suite.
_CACHE = tempfile.TemporaryDirectory(prefix="aiadmit-test-cache-")
os.environ["AIADMIT_CACHE_DIR"] = _CACHE.name
os.environ.pop("AIADMIT_NO_CACHE", None)


@pytest.fixture(autouse=True)
def _no_cache_left_active():
    """A command run in-process turns the disk cache on for the process (commands.load_engine): not for the next
    test, which must see what it set up itself."""
    yield
    diskcache.activate(None)
