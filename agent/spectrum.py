"""The `Spectrum` record.

Wavelengths are always Angstrom. `frame` says whether they are vacuum (SDSS, LAMOST,
DESI) or air (most stellar libraries); the catalogue in `agent.lines` is in vacuum, so
code that compares against it uses `Spectrum.vacuum_wavelength()`.

Readers for each survey layout live in `agent.formats`; `agent.formats.read_spectra` picks
one by content, not by file name alone.

What the agent reads is `wavelength`/`flux`/`ivar`/`mask`. A file that holds more keeps it
for the expert's views only: `arms`, the spectrograph arms as the file holds them before a
reader merged them (DESI's B, R and Z cameras), and `sky`, the sky spectrum the pipeline
subtracted (DESI `B_SKY`-like HDUs, the SDSS COADD `sky` column). Neither reaches the agent
or an export (`to_dict` leaves them out).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from agent.errors import LoupeError
from agent.units import air_to_vacuum, vacuum_to_air  # noqa: F401  (named here for readers)

Frame = Literal["vacuum", "air"]


class SpectrumError(LoupeError, ValueError):
    """Any problem reading or validating a spectrum; the message names the source and the problem."""

    def __init__(self, source: str | Path | None, problem: str):
        self.source = str(source) if source is not None else "<memory>"
        self.problem = problem
        super().__init__(f"{self.source}: {problem}")


@dataclass
class SpectrumMeta:
    id: str = ""
    survey: str = ""  # "LAMOST", "SDSS", "DESI", "MILES", "simulated", ...
    obsid: str | None = None
    ra: float | None = None
    dec: float | None = None
    snr: float | None = None
    survey_class: str | None = None
    survey_subclass: str | None = None
    source: str | None = None  # file path the spectrum was read from
    hdu: int | str | None = None
    row: int | None = None
    simulated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Arm:
    """One spectrograph arm as the file holds it (wavelength in the spectrum's frame, flux in
    its `flux_unit`); `mask` is True where a pixel is bad, as `Spectrum.mask` is."""

    name: str  # "B", "R", "Z"
    wavelength: np.ndarray
    flux: np.ndarray
    ivar: np.ndarray | None
    mask: np.ndarray


@dataclass
class Sky:
    """The sky spectrum on the spectrum's own pixels, in `unit` (the flux unit of the file's
    sky data: the same as the object's in SDSS and DESI files)."""

    flux: np.ndarray
    unit: str


@dataclass
class Spectrum:
    """One 1-D spectrum with explicit units.

    `mask` is True where a pixel is bad (NaN/inf flux, ivar <= 0, survey mask bits);
    bad pixels are never drawn or measured as real data.
    """

    wavelength: np.ndarray  # Angstrom, strictly increasing
    flux: np.ndarray
    ivar: np.ndarray | None = None
    mask: np.ndarray | None = None
    frame: Frame = "vacuum"
    redshift: float = 0.0
    flux_unit: str = "arbitrary"
    meta: SpectrumMeta = field(default_factory=SpectrumMeta)
    arms: tuple[Arm, ...] = ()  # the file's arms before merging (DESI), for the expert's view
    sky: Sky | None = None  # None: the file holds no sky spectrum

    def __post_init__(self) -> None:
        self.wavelength = np.asarray(self.wavelength, dtype=np.float64)
        self.flux = np.asarray(self.flux, dtype=np.float64)
        src = self.meta.source or self.meta.id or None
        if self.wavelength.ndim != 1 or self.flux.shape != self.wavelength.shape:
            raise SpectrumError(
                src,
                f"wavelength and flux must be 1-D of equal length "
                f"(got {self.wavelength.shape} and {self.flux.shape})",
            )
        if self.wavelength.size < 2:
            raise SpectrumError(src, f"too few pixels ({self.wavelength.size})")
        if not np.all(np.isfinite(self.wavelength)):
            raise SpectrumError(src, "wavelength array contains NaN or inf")
        if np.any(np.diff(self.wavelength) <= 0):
            raise SpectrumError(src, "wavelength is not strictly increasing")
        if self.ivar is not None:
            self.ivar = np.asarray(self.ivar, dtype=np.float64)
            if self.ivar.shape != self.flux.shape:
                raise SpectrumError(src, "ivar and flux differ in length")
        bad = ~np.isfinite(self.flux)
        if self.ivar is not None:
            bad |= ~np.isfinite(self.ivar) | (self.ivar <= 0)
        if self.mask is not None:
            m = np.asarray(self.mask).astype(bool)
            if m.shape != self.flux.shape:
                raise SpectrumError(src, "mask and flux differ in length")
            bad |= m
        self.mask = bad
        if bad.all():
            raise SpectrumError(src, "no valid flux pixels (all NaN, inf, masked or ivar<=0)")
        if not np.isfinite(self.redshift):
            raise SpectrumError(src, f"redshift is not finite ({self.redshift})")
        if self.sky is not None and np.shape(self.sky.flux) != self.flux.shape:
            raise SpectrumError(
                src, f"sky has {np.size(self.sky.flux)} pixels, flux {self.flux.size}"
            )

    # -- derived views -------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def good(self) -> np.ndarray:
        return ~self.mask

    def vacuum_wavelength(self) -> np.ndarray:
        return air_to_vacuum(self.wavelength) if self.frame == "air" else self.wavelength

    def rest_wavelength(self) -> np.ndarray:
        """Vacuum rest-frame wavelength: what the zoom tool's ranges refer to."""
        return self.vacuum_wavelength() / (1.0 + self.redshift)

    def error(self) -> np.ndarray | None:
        if self.ivar is None:
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            err = np.where(self.ivar > 0, 1.0 / np.sqrt(self.ivar), np.nan)
        return err

    def replace(self, **changes: Any) -> Spectrum:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (lists), used by RL exports and SpecVI-Bench-like rows."""
        return {
            "wavelength": self.wavelength.tolist(),
            "flux": np.where(self.mask, np.nan, self.flux).tolist(),
            "ivar": None if self.ivar is None else self.ivar.tolist(),
            "frame": self.frame,
            "redshift": float(self.redshift),
            "meta": dataclasses.asdict(self.meta),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Spectrum:
        meta = SpectrumMeta(**(d.get("meta") or {}))
        flux = np.array([np.nan if v is None else v for v in d["flux"]], dtype=float)
        ivar = d.get("ivar")
        return cls(
            wavelength=np.asarray(d["wavelength"], dtype=float),
            flux=flux,
            ivar=None if ivar is None else np.asarray(ivar, dtype=float),
            frame=d.get("frame", "vacuum"),
            redshift=float(d.get("redshift") or 0.0),
            meta=meta,
        )
