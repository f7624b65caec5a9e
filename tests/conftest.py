"""Suite-wide set-up: nothing the tests run writes into the user's home."""

import os
import tempfile


# The command line keeps compiled CEL programs and passed schema checks in a cache directory
# (webhook/app/diskcache.py); tests and the commands they start share one that lives and dies with the suite.
_CACHE = tempfile.TemporaryDirectory(prefix="aiadmit-test-cache-")
os.environ["AIADMIT_CACHE_DIR"] = _CACHE.name
os.environ.pop("AIADMIT_NO_CACHE", None)

