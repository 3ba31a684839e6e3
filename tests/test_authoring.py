"""Authoring cold-start trajectories: drafts, the tool's images, validation, the audit."""

from __future__ import annotations

import numpy as np
import pytest

from agent import protocol
from agent.formats import write_lamost_fits
from agent.protocol import image_reference, parse_turn
from agent.refs import CandidateRef
from agent.render import to_png
from agent.spectrum import Spectrum, SpectrumMeta
from agent.tool import zoom
from agent.trajectory import Step, Trajectory, finish
from annotate import authoring as au
from db.store import Store, StorePermissionError


def _spectrum() -> Spectrum:
    rng = np.random.default_rng(7)
    wave = 10 ** np.arange(np.log10(3700), np.log10(9100), 1e-4)
    flux = 1.0 + 0.2 * (wave / 5000.0) ** -2
    for line in (4102.9, 4341.7, 4862.7):
        flux -= 0.5 * np.exp(-0.5 * ((wave - line) / 35.0) ** 2)
    flux += rng.normal(0, 0.01, wave.size)
    return Spectrum(wave, flux, meta=SpectrumMeta(id="w1", survey="simulated", simulated=True))


class _Cand:
    id = 1
    key = "w1"
    task = "wd"
    spectrum_ref = {"path": "w1.fits", "hdu": None, "row": None}


def _ready_draft(spec, renderer="fast") -> au.Draft:
    d = au.start_draft(_Cand(), renderer=renderer)
    au.add_step(d, spec, 4780, 4940, "H-beta: broad and deep, ~70 A wide.", label="H-beta")
    au.add_step(d, spec, 4280, 4400, "H-gamma as broad.")
    au.set_answer(d, "YES", "Pressure-broadened Balmer lines: a DA white dwarf.", "All broad.")
    return d


@pytest.mark.parametrize("renderer", ["fast", "speco3"])
def test_add_step_renders_what_the_model_sees(renderer):
    spec = _spectrum()
    d = au.start_draft(_Cand(), renderer=renderer)
    res = au.add_step(d, spec, 4940, 4780, "H-beta.", label="H-beta")  # dragged right to left
    step = d.steps[0]
    assert step.window == (4780.0, 4940.0)
    assert step.tool_call == {
        "name": "spectral_visualization_tool",
        "arguments": {"wavelength_range": [4780, 4940], "label": "H-beta"},
    }
    assert step.observation_image == image_reference(renderer, (4780.0, 4940.0))
    same = zoom(spec, [4780, 4940], "H-beta", renderer=renderer)
    assert to_png(res.image) == to_png(same.image)
    assert step.observation_text == same.text
    # clipped at the edge of the data, as the tool clips
    au.add_step(d, spec, 9000, 9500, "red end")
    assert d.steps[1].window[1] < 9500


def test_refused_window_adds_nothing():
    spec = _spectrum()
    d = au.start_draft(_Cand())
    with pytest.raises(au.AuthoringError, match="outside"):
        au.add_step(d, spec, 12000, 13000, "infrared")
    with pytest.raises(au.AuthoringError):
        au.add_step(d, spec, 5000, 5000, "empty")
    with pytest.raises(au.AuthoringError):
        au.add_step(d, spec, 4800, 4900, "no <answer> here")
    assert d.steps == []


def test_edit_reorder_delete():
    spec = _spectrum()
    d = _ready_draft(spec)
    au.edit_step(d, 0, thought="H-beta, FWHM ~70 A.")
    assert d.steps[0].thought == "H-beta, FWHM ~70 A."
    assert d.steps[0].tool_call["arguments"]["label"] == "H-beta"
    res = au.edit_step(d, 1, window=(4050, 4150), spectrum=spec)
    assert d.steps[1].window == (4050.0, 4150.0) and res.image is not None
    assert d.steps[1].thought == "H-gamma as broad."
    au.move_step(d, 1, 0)
    assert d.steps[0].window == (4050.0, 4150.0)
    gone = au.delete_step(d, 0)
    assert gone.window == (4050.0, 4150.0) and len(d.steps) == 1
    with pytest.raises(au.AuthoringError):
        au.delete_step(d, 5)
    with pytest.raises(au.AuthoringError):
        au.edit_step(d, 0, window=(4000, 4100))  # needs the spectrum


def test_validate_lists_every_problem():
    spec = _spectrum()
    d = au.start_draft(_Cand())
    problems = au.validate(d)
    assert any("verdict" in p for p in problems)
    assert any("explanation" in p for p in problems)
    assert any("thought" in p for p in problems)
    au.add_step(d, spec, 4780, 4940, "")
    au.set_answer(d, "NO", "A stars have narrow lines.")
    problems = au.validate(d)
    assert problems == [
        "no step with a thought: zoom at least once and say what it shows",
        "step 1: no thought",
    ]
    d.steps[0].window = (5000.0, 4000.0)
    assert any("not a valid range" in p for p in au.validate(d))
    with pytest.raises(au.AuthoringError):
        au.to_trajectory(d)
    with pytest.raises(au.AuthoringError):
        au.set_answer(d, "MAYBE", "x")


def test_to_trajectory_parses_like_a_model():
    spec = _spectrum()
    d = _ready_draft(spec)
    assert au.validate(d, spec) == []
    t = au.to_trajectory(d)
    assert t.policy == "expert" and t.verdict == "YES" and t.state == "done"
    assert len(t.steps) == 3 and t.steps[-1].answer == "YES"
    for s in t.steps:
        turn = parse_turn(s.raw)
        assert turn.format_ok, turn.errors
        assert turn.thought == s.thought
        assert turn.tool_call == s.tool_call
        assert turn.answer == s.answer
    again = Trajectory.from_json(t.to_json())
    finish(again)
    assert again.format_ok and again.verdict == "YES"
    # the Spec-o3 conversation: one image per zoom after the global view
    msgs = t.to_messages()
    images = [it for m in msgs for it in m["content"] if it.get("type") == "image"]
    assert len(images) == 3


def test_turns_are_written_by_the_protocol():
    t = au.to_trajectory(_ready_draft(_spectrum()))
    for s in t.steps:
        if s.answer is None:
            expected = protocol.format_turn(s.thought, arguments=s.tool_call["arguments"])
        else:
            expected = protocol.format_turn(s.thought, answer=s.answer, explanation=s.explanation)
        assert s.raw == expected
    # the conversation reads back to the same steps
    conv = protocol.from_messages(t.to_messages())
    assert conv.task == "wd"
    assert [(p.thought, p.tool_call, p.answer) for p, _ in conv.turns] == [
        (s.thought, s.tool_call, s.answer) for s in t.steps
    ]
    assert [o.window if o else None for _, o in conv.turns] == [s.window for s in t.steps]


def test_annotate_writes_no_protocol_text_of_its_own():
    """Every Spec-o3 turn in annotate/ is written by agent.protocol: no string outside a
    docstring spells a protocol tag, and no module defines its own TOOL_NAME."""
    import ast
    from pathlib import Path

    root = Path(au.__file__).resolve().parent
    tags = ("<tool_call>", "</tool_call>", "<think>", "</think>", "<answer>", "</answer>")
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in docstrings and any(t in node.value for t in tags):
                    found.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "TOOL_NAME" for t in targets):
                    found.append(f"{path.name}:{node.lineno} defines TOOL_NAME")
    assert found == []


def test_start_from_agent_trajectory():
    call = {"name": protocol.TOOL_NAME, "arguments": {"wavelength_range": [4800, 4920]}}
    agent = Trajectory(
        id="w1",
        task="wd",
        steps=[
            Step(thought="look", tool_call=call, window=(4800.0, 4920.0), observation_text="ok"),
            Step(thought="refused", tool_call=call, window=None, error="tool error: outside"),
            Step(thought="so", answer="NO", explanation="narrow"),
        ],
        verdict="NO",
    )
    d = au.start_draft(_Cand(), renderer="speco3", from_trajectory=agent, trajectory_id=9)
    assert len(d.steps) == 1 and d.steps[0].thought == "look"
    assert d.steps[0].observation_image == image_reference("speco3", (4800.0, 4920.0))
    assert (d.verdict, d.explanation, d.final_thought, d.based_on) == ("NO", "narrow", "so", 9)
    # a model's thought that spells protocol text is kept for the expert to fix, not refused
    odd = Trajectory(
        id="w1",
        task="wd",
        steps=[Step(thought="then \\boxed{YES}", tool_call=call, window=(4800.0, 4920.0))],
    )
    d = au.start_draft(_Cand(), from_trajectory=odd)
    assert d.steps[0].thought == "then \\boxed{YES}"
    assert any("\\boxed" in p for p in au.validate(d))


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "w1.fits"
    write_lamost_fits(_spectrum(), path)
    s = Store(f"sqlite:///{tmp_path / 'a.db'}")
    s.add_candidates([CandidateRef(id="w1", task="wd", path=str(path))])
    s.create_expert("ann", role="expert")
    s.create_expert("bob", role="expert")
    s.create_expert("ada", role="admin")
    return s


def test_audit_flow_multi_round(store):
    c = store.list_candidates(order="id")[0]
    spec = store.load_spectrum(c.id)
    d = au.start_draft(c, renderer="fast")
    au.add_step(d, spec, 4780, 4940, "H-beta broad.")
    with pytest.raises(au.AuthoringError, match="cannot submit"):
        au.submit(store, d, "ann")  # no verdict yet
    assert d.authored_id is None
    au.set_answer(d, "YES", "DA white dwarf.")
    au.save_draft(store, d, "ann")
    assert d.status == "draft" and d.authored_id is not None
    with pytest.raises(StorePermissionError):
        au.save_draft(store, d, "bob")  # not bob's draft
    au.submit(store, d, "ann")
    assert store.authored(d.authored_id).status == "submitted"
    with pytest.raises(StorePermissionError):
        au.audit(store, d.authored_id, "ann", True)  # the author cannot approve
    with pytest.raises(au.AuthoringError, match="comment"):
        au.audit(store, d.authored_id, "ada", False)
    au.audit(store, d.authored_id, "ada", False, "Also zoom on H-gamma.")
    assert store.authored(d.authored_id).status == "rejected"
    # round two: the author revises and resubmits
    d2 = au.load_draft(store, d.authored_id)
    assert d2.author == "ann" and len(d2.steps) == 1 and d2.verdict == "YES"
    au.add_step(d2, spec, 4280, 4400, "H-gamma broad too.")
    au.submit(store, d2, "ann")
    au.audit(store, d2.authored_id, "ada", True, "Good.")
    row = store.authored(d2.authored_id)
    assert row.status == "approved"
    history = au.audit_history(store, d2.authored_id)
    comments = [(h.action, h.comment) for h in history if h.comment]
    assert comments == [("rejected", "Also zoom on H-gamma."), ("approved", "Good.")]
    assert [h.action for h in history].count("submit_authored") == 2
    t = au.authored_to_trajectory(row, c)
    assert [s.thought for s in t.steps[:-1]] == ["H-beta broad.", "H-gamma broad too."]
    assert t.verdict == "YES" and all(parse_turn(s.raw).format_ok for s in t.steps)


# -- the audit view (app.pages.author): what the auditor sees is what the model will see


def _data_uris(html: str) -> list[bytes]:
    import base64
    import re

    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]


def _block(html: str, elem_id: str) -> str:
    start = html.index(f'id="{elem_id}"')
    end = html.find('class="loupe-audit-step"', start + 1)
    return html[start : end if end != -1 else len(html)]


@pytest.mark.parametrize("renderer", ["fast", "speco3"])
def test_audit_view_shows_every_image_the_model_will_see(store, tmp_path, renderer):
    from agent.tool import global_view, render_window
    from app.context import Context, Viewer
    from app.pages import author as author_page

    c = store.list_candidates(order="id")[0]
    spec = store.load_spectrum(c.id)
    d = au.start_draft(c, renderer=renderer)
    au.add_step(d, spec, 4780, 4940, "H-beta: broad and deep.", label="H-beta")
    au.add_step(d, spec, 4280, 4400, "H-gamma as broad.")
    au.set_answer(d, "YES", "Pressure-broadened Balmer lines: a DA white dwarf.")
    au.submit(store, d, "ann")
    ctx = Context(store, login=True)
    html = author_page.audit_view(ctx, Viewer("ada", "admin"), str(d.authored_id))

    pngs = _data_uris(html)
    assert len(pngs) == 3  # the whole spectrum, then one image per zoom
    assert pngs[0] == to_png(global_view(spec, renderer=renderer).image)
    for i, (lo, hi) in enumerate([(4780.0, 4940.0), (4280.0, 4400.0)]):
        block = _block(html, f"audit-step-{i}")
        # each zoom beside its own thought, drawn as the tool draws it
        assert _data_uris(block) == [to_png(render_window(spec, (lo, hi), renderer=renderer))]
        assert ("H-beta: broad" in block) == (i == 0) and ("H-gamma as" in block) == (i == 1)
    assert pngs[0] in _data_uris(_block(html, "audit-overview"))
    assert f"<b>{renderer}</b> renderer" in html and "Verdict YES" in html

    # a spectrum that cannot be read: said, with nothing to look at
    from db.store.candidates import SPECTRA

    assert store.candidate(c.id).spectrum_ref["path"] == str(tmp_path / "w1.fits")
    (tmp_path / "w1.fits").rename(tmp_path / "gone.fits")
    SPECTRA.clear()  # the store keeps spectra it has read
    html = author_page.audit_view(ctx, Viewer("ada", "admin"), str(d.authored_id))
    assert "cannot be drawn" in html and "Do not approve" in html and _data_uris(html) == []
    assert "H-beta: broad" in html  # the thoughts are still there to read


def test_audit_note_says_why_the_list_is_empty(store):
    from app.context import Context, Viewer
    from app.pages import author as author_page

    c = store.list_candidates(order="id")[0]
    d = _ready_draft(store.load_spectrum(c.id))
    d.candidate_id = c.id
    au.submit(store, d, "ann")

    # single-user mode: the one expert wrote it, and an author cannot approve their own
    single = Context(store, login=False, local_expert="ann")
    ann = Viewer("ann", "admin")
    assert author_page.audit_choices(single, ann) == []
    note = author_page.audit_note(single, ann, [])
    assert "single-user mode" in note and "cannot approve their own" in note
    assert "1 of yours" in note and "--login" in note

    team = Context(store, login=True)
    note = author_page.audit_note(team, ann, author_page.audit_choices(team, ann))
    assert "single-user" not in note and "1 of yours await another expert" in note
    ada = Viewer("ada", "admin")
    choices = author_page.audit_choices(team, ada)
    assert len(choices) == 1 and "1 trajectory" in author_page.audit_note(team, ada, choices)
    assert "Log in" in author_page.audit_note(team, None, [])
