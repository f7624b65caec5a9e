"""The caller's time budget: checked between units of work, never inside a CEL program."""

from __future__ import annotations

import time
from typing import Optional


class BudgetExceeded(Exception):
    """The caller's deadline (time.monotonic()) passed."""


def check_deadline(deadline: Optional[float]) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise BudgetExceeded()
