"""The desk's keys as documented: every key keys.js acts on is in the `?` cheat sheet and in
README's key list; `t` starts with the task's own classes."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from app.pages import desk
from app.ui.assets import CHEATSHEET

REPO = Path(__file__).resolve().parent.parent


def _keys_js_keys() -> set[str]:
    js = (REPO / "app" / "keys.js").read_text(encoding="utf-8")
    keys: set[str] = set()
    for table in ("KEYS", "DESK", "TOGGLES", "ISSUES"):
        body = re.search(rf"const {table} = \{{(.*?)\}};", js, re.S).group(1)
        keys |= {k.strip('"') for k in re.findall(r'("[^"]+"|\b\w+)\s*:\s*"', body)}
    # keys compared one by one in the handlers
    keys |= {k.replace("Escape", "Esc") for k in re.findall(r'key === "([^"]+)"', js)}
    keys |= set(re.findall(r'\["1", "2", "3", "4"\]', js) and ["1", "2", "3", "4"])
    return keys


def test_the_cheat_sheet_and_readme_list_every_key():
    keys = _keys_js_keys()
    assert {"a", "r", "c", "s", "f", "j", "k", "u", "z", "[", "]", "{", "}", "=", "t", "n", "m",
            "0", "?", "R", "C", "S"} <= keys  # fmt: skip
    sheet = set(re.findall(r"<kbd>([^<]+)</kbd>", CHEATSHEET))
    missing = sorted(k for k in keys if k not in sheet and not (k.isdigit() and "1" in sheet))
    assert missing == [], f"keys not in the cheat sheet: {missing}"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    listed = readme[readme.index("Keys: `a` accept") :].split("- **Author**")[0]
    missing = sorted(k for k in keys if len(k) == 1 and f"`{k}`" not in listed and k not in "1234")
    assert missing == [], f"keys not in README's key list: {missing}"
    assert "`1`-`4`" in listed and "Esc leaves the box and keeps it" in listed
    assert "Esc saves" not in readme and "Esc cancels" not in listed  # Esc discards nothing
    assert "cancels" not in CHEATSHEET


def test_template_cycling_starts_with_the_tasks_classes():
    ctx = SimpleNamespace(templates=[])
    assert desk.next_template(ctx, "none", task="m_giant") == "M giant"
    assert desk.next_template(ctx, "M giant", task="m_giant") == "M dwarf"
    assert desk.next_template(ctx, "none", task="wd") == "DA white dwarf"
    assert desk.next_template(ctx, "none", task="carbon") == "carbon star"
    names = desk.template_names(ctx)
    for task, first in desk.TASK_TEMPLATES.items():
        assert set(first) <= set(names), task  # every name is a built-in template
    seen, cur = [], "none"
    for _ in range(len(names)):
        cur = desk.next_template(ctx, cur, task="cv")
        seen.append(cur)
    assert sorted(seen) == sorted(names) and seen[-1] == "none"  # every one, once


def test_line_markers_follow_the_shown_redshift():
    """A z = 1.5 quasar in a file with no redshift: Mg II 2800 is drawn at 7000 Å, in the
    whole spectrum and in a zoom on it, and back at rest with no z given."""
    import numpy as np

    from agent.spectrum import Spectrum
    from app import plots
    from app.markers import Marker

    w = np.linspace(3600.0, 9800.0, 3000)
    spec = Spectrum(w, np.ones_like(w), np.ones_like(w))
    mg = [Marker("Mg II", 2800.0)]

    def lines(fig):
        return [s["x0"] for s in fig["layout"].get("shapes", []) if s["type"] == "line"]

    assert lines(plots.global_figure(spec, markers=mg, marker_z=1.5)) == [7000.0]
    assert lines(plots.global_figure(spec, markers=mg)) == []  # 2800 Å is off the data
    zoom = plots.window_figure(spec, (6900.0, 7100.0), title="Mg II 2800", markers=mg,
                               marker_z=1.5)  # fmt: skip
    assert lines(zoom) == [7000.0]
    obs = plots.global_figure(spec.replace(redshift=0.5), markers=mg, frame="observed",
                              marker_z=1.5)  # fmt: skip
    assert lines(obs) == [7000.0]  # observed: where an object at z = 1.5 puts it


def test_fleiss_kappa_of_a_single_item_is_not_a_number():
    import math

    from annotate.audit.agreement import fleiss_kappa

    assert math.isnan(fleiss_kappa([["YES", "NO"]]))  # shown as n/a, not -1
    assert fleiss_kappa([["YES", "NO"], ["NO", "YES"]]) == -1.0


def test_the_normalised_view_normalises_the_template_too():
    """`n` draws the spectrum over its continuum: the template beside it is divided by its
    own continuum, taken the same way, so it runs level about 1 (it was drawn as a slope)."""
    import numpy as np

    from agent.spectrum import Spectrum
    from agent.templates import builtin_templates
    from app import plots
    from app.traces import decode

    w = np.linspace(3800.0, 9000.0, 3000)
    for name in ("DA white dwarf", "M giant", "QSO"):
        t = next(t for t in builtin_templates() if t.name == name)
        flux = np.interp(w, t.wavelength, t.flux) * (1.0 + w / 5000.0)  # tilted, as observed
        spec = Spectrum(w, flux, np.ones_like(w))
        for normalised in (False, True):
            fig = plots.global_figure(spec, normalised=normalised, template=t, template_z=0.0)
            tr = fig["data"][-1]
            assert tr["name"].startswith(f"template: {name}")
            x, y = decode(tr["x"]).astype(float), decode(tr["y"]).astype(float)
            slope = np.polyfit((x - x.mean()) / np.ptp(x), y, 1)[0]  # change over the range
            if normalised:
                assert abs(np.median(y) - 1.0) < 0.1, (name, np.median(y))
                assert abs(slope) < 0.15, (name, slope)
            elif name == "DA white dwarf":
                assert abs(slope) > 0.5 * np.median(y)  # the raw template slopes
