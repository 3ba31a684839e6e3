"""The vet page's panels are built in one pass over the spectrum as the display shows it:
the figures it sends are the same, to the byte, as those built a figure at a time before
(the digests below were taken from that code), for every display option."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import numpy as np
import pytest

from agent.spectrum import Arm, Sky, Spectrum, SpectrumMeta
from agent.trajectory import Step, Trajectory
from app import plots
from app.pages import vet as vet_page
from app.views import Display


def _spec(frame: str = "vacuum", z: float = 0.3, seed: int = 3) -> Spectrum:
    rng = np.random.default_rng(seed)
    w = np.linspace(3600.0, 9800.0, 5200)
    f = 2.0 + w / 4000.0 + 0.05 * rng.normal(size=w.size)
    for c in (4863.0, 6565.0):  # two emission lines, observed
        f = f + 1.5 * np.exp(-0.5 * ((w / (1 + z) - c) / 5.0) ** 2)
    ivar = np.full(w.size, 400.0)
    ivar[1200:1230] = 0.0  # a masked stretch
    half = w.size // 2 + 40
    arms = (
        Arm("B", w[:half], f[:half] * 1.02, ivar[:half], np.zeros(half, bool)),
        Arm("R", w[half - 80 :], f[half - 80 :] * 0.98, ivar[half - 80 :],
            np.zeros(w.size - half + 80, bool)),
    )  # fmt: skip
    sky = Sky(0.3 + 0.1 * rng.random(w.size), "arbitrary")
    return Spectrum(w, f, ivar, frame=frame, redshift=z, arms=arms, sky=sky,
                    meta=SpectrumMeta(id="obj-7"))  # fmt: skip


def _traj() -> Trajectory:
    def zoom(lo, hi, label):
        return Step(thought=f"look at **{label}**", window=(lo, hi),
                    tool_call={"name": "spectral_visualization_tool",
                               "arguments": {"wavelength_range": [lo, hi], "label": label}})  # fmt: skip

    return Trajectory(
        id="obj-7", task="wd",
        steps=[zoom(4800, 4950, "Hβ"), Step(thought="bad call", error="no window"),
               zoom(6480, 6650, "Hα"), zoom(100, 200, "off the data"),
               Step(thought="done", answer="YES", explanation="broad Balmer")],
        verdict="YES", confidence=0.8, policy="rules",
    )  # fmt: skip


DISPLAYS = {
    "default": Display(),
    "plain": Display(markers=False, error=False),
    "smooth-observed": Display(smooth=7, frame="observed"),
    "normalised": Display(normalised=True, smooth=3),
    "all-markers-template": Display(all_markers=True, template="QSO", z=0.31, z_key="obj-7"),
    "normalised-template-observed": Display(
        normalised=True, template="DA white dwarf", frame="observed"
    ),  # fmt: skip
    "arms-sky": Display(arms=True, sky=True),
    "arms-sky-normalised-observed": Display(
        arms=True, sky=True, normalised=True, frame="observed", smooth=5
    ),  # fmt: skip
}


def _digest(p) -> str:
    parts = [plots.to_json(p.gfig), plots.to_json(p.zoom_fig) if p.zoom_fig else "",
             p.thoughts_html, repr(p.choices), repr(p.redshift), p.answer]  # fmt: skip
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _panels(spec: Spectrum, display: Display):
    ctx = SimpleNamespace(read=SimpleNamespace(load_spectrum=lambda cid: spec), templates=[])
    info = {"cid": 1, "tid": 1, "id": "obj-7", "task": "wd"}
    return vet_page._build_panels(ctx, info, _traj(), display)


# taken from the figure-at-a-time builder (plots.global_figure, plots.step_figures)
EXPECTED = {
    "all-markers-template/vacuum": "65fa8c16a4bd8b9e",
    "arms-sky/vacuum": "d888bdb834135e8e",
    "arms-sky-normalised-observed/vacuum": "c1f14fab658d6634",
    "default/vacuum": "18c9fc264b72608d",
    "normalised/vacuum": "30f03b0574a7a753",
    "normalised-template-observed/vacuum": "76e5a129ba09c12f",
    "plain/vacuum": "1616a3df2619c559",
    "smooth-observed/vacuum": "2b83e85691b1dad4",
    "all-markers-template/air": "e7338f6aab02b747",
    "arms-sky/air": "4e4b789237ebfb5d",
    "arms-sky-normalised-observed/air": "4d31dd0916e821cf",
    "default/air": "0f1f46b23cc2a77f",
    "normalised/air": "9667c9a48ef06e6f",
    "normalised-template-observed/air": "901548362422f8fe",
    "plain/air": "9f7f9c7ce86e7143",
    "smooth-observed/air": "2792c07a91f38a60",
}


@pytest.mark.parametrize("frame", ["vacuum", "air"])
@pytest.mark.parametrize("name", sorted(DISPLAYS))
def test_panels_are_the_figures_built_a_figure_at_a_time(name, frame):
    got = _digest(_panels(_spec(frame), DISPLAYS[name]))
    assert got == EXPECTED[f"{name}/{frame}"], (
        f"{name}/{frame}: the panels' JSON changed; if on purpose (a new look), take the "
        "digests again"
    )
