"""What a VI file says of an object in the community's terms: a TARGETID for every row, and
the expert's spectral type in Prospect's vocabulary.

TARGETID: a DESI spectrum keeps its own. Any other gets an integer of its own that no DESI
TARGETID can take: DESI's TARGETID packs its fields into bits 0-61 (OBJID 0-21, BRICKID
22-41, RELEASE 42-57, MOCK 58, SKY 59, GAIADR 60-61; an unassigned fibre's is negative), so
Loupe's set bit 62 (2**62 = 4611686018427387904), say what the rest holds in bits 56-61, and
carry the survey's own id where it has one in bits 0-55:

- kind 1, LAMOST: the obsid, `2**62 + 1 * 2**56 + obsid`;
- kind 2, SDSS `PLATE-MJD-FIBER`: `2**62 + 2 * 2**56 + PLATE * 10**9 + MJD * 10**4 + FIBER`
  (the decimal digits of the last part read as plate, MJD, fibre);
- kind 0, any other: `2**62 + h`, h the first 7 bytes of SHA-256 of `survey:object_id`
  (UTF-8), big-endian: stable across stores and runs.

>>> target_id("LAMOST", "123456789") - 2**62 - 2**56
123456789
>>> (target_id("SDSS", "0266-51602-0001") - 2**62 - 2 * 2**56)
266516020001
>>> target_id("DESI", "39627652591521181")
39627652591521181
>>> prospect_spectype("DB white dwarf"), prospect_spectype("galaxy, passive"), prospect_spectype("")
('STAR', 'GALAXY', '')
"""

from __future__ import annotations

import hashlib
import re

from agent.templates import BUILTIN

LOUPE_BIT = 1 << 62
KIND_SHIFT = 56
PAYLOAD = (1 << KIND_SHIFT) - 1
KIND_HASH, KIND_LAMOST, KIND_SDSS = 0, 1, 2
_SDSS = re.compile(r"([0-9]{1,7})-([0-9]{5})-([0-9]{1,4})")
# Prospect's VI_spectype choices (prospect.viewer's VI panel)
PROSPECT_SPECTYPES = ("STAR", "GALAXY", "QSO")
_KINDS = {name.casefold(): kind.upper() for name, kind, _ in BUILTIN}


def _int(text: str | int | None) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def target_id(survey: str | None, object_id: str, desi_targetid: object = None) -> int:
    """The TARGETID a VI row carries for this object (see the module's docstring)."""
    survey = (survey or "").strip()
    own = _int(desi_targetid)
    if own is not None:
        return own
    if survey.upper() == "DESI" and _int(object_id) is not None:
        return int(object_id)
    oid = str(object_id).strip()
    if survey.upper() == "LAMOST" and oid.isascii() and oid.isdigit() and int(oid) <= PAYLOAD:
        return LOUPE_BIT | KIND_LAMOST << KIND_SHIFT | int(oid)
    m = _SDSS.fullmatch(oid)
    if survey.upper() == "SDSS" and m:
        plate, mjd, fiber = (int(g) for g in m.groups())
        return LOUPE_BIT | KIND_SDSS << KIND_SHIFT | plate * 10**9 + mjd * 10**4 + fiber
    digest = hashlib.sha256(f"{survey}:{object_id}".encode()).digest()
    return LOUPE_BIT | int.from_bytes(digest[:7], "big")


def prospect_spectype(spectype: str | None) -> str:
    """The expert's spectral type as Prospect's VI_spectype (STAR, GALAXY or QSO; empty if
    none): a template's own class, else the class the text names, else STAR (every task
    Loupe vets is one of stars)."""
    t = (spectype or "").strip()
    if not t:
        return ""
    if t.upper() in PROSPECT_SPECTYPES:
        return t.upper()
    if t.casefold() in _KINDS:
        return _KINDS[t.casefold()]
    low = t.casefold()
    if "qso" in low or "quasar" in low:
        return "QSO"
    if "galaxy" in low:
        return "GALAXY"
    return "STAR"
