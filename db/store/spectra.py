"""What the store keeps of the spectra the views drew: a cache bounded in bytes."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any


class SpectrumCache:
    """The spectra the views drew last, bounded in bytes (`LOUPE_MAX_SPECTRUM_CACHE_MB`,
    default 32), least recently used first out. A count of entries bounds nothing: one
    file may hold ten million pixels. What is kept is each spectrum's display copy
    (`agent.display`), read in a limited worker (`agent.formats.sandbox`)."""

    def __init__(self, budget_bytes: int | None = None) -> None:
        mb = os.environ.get("LOUPE_MAX_SPECTRUM_CACHE_MB", "32")
        try:
            default = int(float(mb) * 2**20)
        except ValueError:
            default = 32 * 2**20
        self.budget = default if budget_bytes is None else int(budget_bytes)
        self.held = 0
        self._items: OrderedDict[tuple, tuple[Any, frozenset, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, windows: frozenset) -> Any:
        """The spectrum kept under `key` if it shows `windows` at full resolution."""
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            spec, shown, _ = hit
            if "display" in spec.meta.extra and not windows <= shown:
                return None  # a reduced copy made for other windows
            self._items.move_to_end(key)
            return spec

    def put(self, key: tuple, spec: Any, windows: frozenset) -> None:
        from agent.display import nbytes

        size = nbytes(spec)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.held -= old[2]
            if size > self.budget:
                return  # larger than the whole cache: served, not kept
            self._items[key] = (spec, windows, size)
            self.held += size
            while self.held > self.budget:
                _, (_, _, gone) = self._items.popitem(last=False)
                self.held -= gone

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.held = 0


SPECTRA = SpectrumCache()
