"""The serve settings: how long a served item stays leased, how large an upload may be,
how long a login session lasts.

One dataclass holds the defaults; the store (a claim's lease, `QueueConfig`, a login's
lifetime), the workflow layer, `launch.py serve`'s flags and the app's context all read
them from here. It lives in `db` because the store is the lowest layer that needs them
(app -> annotate -> db). A team changes the lease for everyone through the store's settings
(`lease_seconds`), which win over this default.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeSettings:
    lease_seconds: float = 600.0  # a served item stays reserved for its expert this long
    max_upload_bytes: int = 50 * 1024 * 1024  # one spectrum file; survey files are a few MB
    session_seconds: float = 12 * 3600.0  # a working day; the store refuses the token after

    @property
    def max_upload_mb(self) -> float:
        return self.max_upload_bytes / (1024 * 1024)

    @property
    def session_hours(self) -> float:
        return self.session_seconds / 3600


DEFAULTS = ServeSettings()
