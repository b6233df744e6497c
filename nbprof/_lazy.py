"""A module imported where it is first used, not where it is named.

A reader's helper process reads pieces of a trace with numpy alone; importing pandas with
the reader's modules (0.15 s of the 0.3-0.4 s such a helper took to start afresh) only
delayed its first piece. Those modules name pandas through :data:`pandas` below, and type
checkers see the real module (``if TYPE_CHECKING: import pandas as pd``).
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class _Later(types.ModuleType):
    """Stands for the module of its name until an attribute is asked of it: then the
    module is imported and its names copied here, so that later lookups find them at
    once (a name the module gains later is still looked up in it)."""

    def __getattr__(self, name: str) -> Any:
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, name)


pandas: Any = _Later("pandas")
