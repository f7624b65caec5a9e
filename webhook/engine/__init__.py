"""The engine layer: `Engine` (core.py) evaluates and mutates; its parts each do one job."""

from webhook.engine.core import BudgetExceeded, Engine

__all__ = ["BudgetExceeded", "Engine"]
