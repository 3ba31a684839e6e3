"""The serve settings: how long a served item stays leased, how large an upload may be,
how long a login session lasts.

One dataclass holds the defaults; `launch.py serve`'s flags, the app's context and the
workflow layer (the queue's lease when the team has stored none, the login session) all
read them from here. A team changes the lease for everyone through the store's settings
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
