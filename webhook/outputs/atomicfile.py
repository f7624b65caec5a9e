"""Replace a file all at once: readers (a server reloading its certificate, an editor) never see half of it."""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, data: bytes, mode: int, durable: bool = True) -> None:
    """Write `data` to a temporary file beside `path`, flush it to disk, then rename it over `path`.

    `durable=False` skips the flush to disk (a cache: after a crash an entry may be lost, never seen half-written).
    """
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
