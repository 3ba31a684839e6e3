"""Hunts for lost or misplaced work on the expert's desk, in Chromium at 1366x768.

    python bench/desk_fuzz.py [--seeds 200] [--first 0] [--steps 30]

Each seed drives three pages of one app: two tabs of the expert ada (one browser, shared
storage) and one of the expert bob, with a random sequence of everything an expert does:
typing a comment (Enter saves it), a reject's reason (Enter or the Save button; Esc keeps
it), a correction (label, wrong step, reasoning and note; Ctrl+Enter or the Save button, or
Esc), grades and issue flags by key and by mouse, a spectral type typed, the template (`t`),
the redshift nudged or adopted, `j`/`k`, accept, skip and flag by key and by mouse, a held
`a` (key auto-repeat), undo by key and by mouse, reloads, switching tabs and jumping to the
candidate another tab shows. A reference model (`bench/desk_model.py`) says what every
candidate must then hold for each expert: decision, draft, and the texts the browser keeps.
Each write's refusal (another tab holds it, another expert labelled it, or it changed since
the tab drew it) must come exactly where the model says. Every difference is a mismatch,
printed with the seed and the steps that led to it.

A fresh demo store per seed, served once per run on one address. Ends with
`desk_fuzz_mismatches: N`. tests/test_desk_fuzz.py runs fixed seeds with `run_seed`.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.desk_model import DECIDED, Model, Tab, clean

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
EXPERTS = {"ada": "pw-ada-fuzz-1234", "bob": "pw-bob-fuzz-1234"}
WORDS = ("tio", "swan", "halpha", "mg2", "odd", "sky", "dab", "c2", "mgiant", "blue")
BOX = {
    "comment": "#vet-comment textarea, #vet-comment input",
    "reason": "#reject-reason input, #reject-reason textarea",
    "explanation": "#correct-explanation textarea",
    "note": "#correct-note textarea, #correct-note input",
}
IDLE = "() => !!window.loupeIdle && window.loupeIdle()"
WAIT_MS = 45_000
VIEWPORT = {"width": 1366, "height": 768}
# What one step does, and how often (weights).
ACTIONS = {
    "type_comment": 4, "comment_enter": 1, "type_reason": 2, "reject": 2, "correction": 3,
    "grade": 3, "flag": 2, "spectype": 1, "template": 1, "redshift": 1, "esc": 1, "j": 3,
    "k": 2, "accept": 3, "skip": 1, "flagdec": 1, "held_a": 1, "undo": 2, "reload": 1,
    "switch": 3, "jump": 1,
}  # fmt: skip
DRAFTED = ("grade", "issues", "spectype", "redshift", "redshift_source", "comment", "label",
           "wrong_step", "template")  # fmt: skip


class Run:
    """One seed: the pages, the model and what was done."""

    def __init__(self, browser: Any, url: str, ctx: Any, rng: random.Random) -> None:
        self.ctx, self.url, self.rng = ctx, url, rng
        self.log: list[str] = []
        self.bad: list[str] = []
        verdicts = {f"{c.key}|{c.task}": c.verdict for c in _candidates(ctx)}
        self.model = Model(verdicts)
        self.model.elsewhere = self._elsewhere
        self.contexts = {e: browser.new_context(viewport=VIEWPORT) for e in EXPERTS}
        self.pages: dict[str, Any] = {}
        self.tabs: dict[str, Tab] = {}
        for name, expert in (("ada1", "ada"), ("ada2", "ada"), ("bob1", "bob")):
            page = self.contexts[expert].new_page()
            if name.endswith("1"):
                _login(page, url, expert)
            else:
                _open(page, url)
            self.pages[name] = page
            self.tabs[name] = Tab(name, expert)
            self.model.serve(self.tabs[name], head(page))
        self.current = "ada1"

    def _elsewhere(self, tab: Tab, key: str) -> bool:
        """Whether the store leases `key` to another page of `tab`'s expert than its own."""
        mine = self.pages[tab.name].evaluate("() => window.loupeTab ? window.loupeTab() : ''")
        cid, task = key.split("|")
        c = self.ctx.store.find_candidate(cid, task)
        return self.ctx.queue().held_elsewhere(tab.expert, c.id, mine)

    def close(self) -> None:
        for c in self.contexts.values():
            c.close()

    # -- helpers ---------------------------------------------------------------------------

    @property
    def page(self) -> Any:
        return self.pages[self.current]

    @property
    def tab(self) -> Tab:
        return self.tabs[self.current]

    def said(self) -> str:
        try:
            return self.page.inner_text("#vet-message")
        except Exception:
            return ""

    def expect(self, refused: str | None, what: str) -> None:
        """The page's message says a refusal exactly where the model predicts one."""
        msg = self.said()
        got = "Not saved" in msg or "Not undone" in msg
        if got != (refused is not None):
            self.bad.append(f"{what}: model {'refused (' + refused + ')' if refused else 'saved'}"
                            f", page says {msg[:160]!r}")  # fmt: skip

    def served(self) -> None:
        """The tab's page was answered: it holds what it shows, as it is now."""
        self.model.serve(self.tab, head(self.page))

    def check_form(self, key: str) -> None:
        """The form shows the candidate's own values (before a write reads them)."""
        m, e = self.model, self.tab.expert
        page = self.page
        for name in ("comment",):
            got = page.input_value(BOX[name].split(", ")[0]) if _has(page, BOX[name]) else ""
            want = m.box(e, key, name)
            if got.strip() != want.strip():
                self.bad.append(f"{key} ({self.current}): the {name} box shows {got!r}, "
                                f"model {want!r}")  # fmt: skip
        grade = page.evaluate("() => (document.querySelector('#vet-grade input:checked') || "
                              "{}).value || ''")  # fmt: skip
        want_g = m.mark(e, key, "grade")
        if (grade or None) != (None if want_g is None else str(want_g)):
            self.bad.append(f"{key} ({self.current}): grade shows {grade!r}, model {want_g!r}")

    # -- the steps -------------------------------------------------------------------------

    def step(self, action: str) -> str:
        page, tab, m, rng = self.page, self.tab, self.model, self.rng
        key = head(page)
        tab.head = key
        e = tab.expert
        if action == "switch":
            self.current = rng.choice([n for n in self.pages if n != self.current])
            return f"switch to {self.current} ({head(self.page)})"
        if key is None and action not in ("j", "k", "undo", "reload"):
            return f"{action}: nothing shown"
        stale = key is not None and m.held_by_other(tab, key)
        if action == "type_comment":
            if stale:
                return "type_comment: skipped (the tab is stale)"
            self.check_form(key)
            word = rng.choice(WORDS)
            new = _type(page, BOX["comment"], m.box(e, key, "comment"), word)
            m.typed(e, key, "comment", new)
            return f"{self.current}: comment +{word} on {key}"
        if action == "comment_enter":
            text = clean(m.box(e, key, "comment"))
            page.focus(BOX["comment"])
            page.keyboard.press("End")
            page.keyboard.press("Enter")
            idle(page)
            if text is None:
                return f"{self.current}: comment Enter on {key}: empty"
            refused = m.refusal(tab, key)
            self.expect(refused, f"comment Enter on {key}")
            if refused is None:
                m.set_mark(tab, key, comment=text)
                m.answered(tab, key)
            return f"{self.current}: comment Enter on {key}" + (
                f" refused {refused}" * bool(refused)
            )
        if action in ("type_reason", "reject"):
            blur(page)
            if rng.random() < 0.5:
                page.keyboard.press("r")
            else:
                page.click("#btn-reject")
            page.wait_for_selector("#reject-reason", state="visible", timeout=WAIT_MS)
            word = ""
            if not stale and (action == "type_reason" or rng.random() < 0.6):
                word = rng.choice(WORDS)
                m.typed(e, key, "reason", _type(page, BOX["reason"], m.box(e, key, "reason"), word))
            if action == "type_reason":
                if rng.random() < 0.5:
                    page.keyboard.press("Escape")
                return f"{self.current}: reason +{word} on {key}"
            return self.decision(key, "reject", mouse=rng.random() < 0.4)
        if action == "correction":
            return self.correction(key, stale)
        if action == "grade":
            n = rng.choice("1234")
            blur(page)
            if m.mark(e, key, "grade") == int(n):
                return f"{self.current}: grade {n} on {key}: already"
            if rng.random() < 0.5:
                page.keyboard.press(n)
            else:
                page.click(f"#vet-grade label:has-text('{n}')")
            idle(page)
            refused = m.refusal(tab, key)
            self.expect(refused, f"grade {n} on {key}")
            if refused is None:
                m.set_mark(tab, key, grade=int(n))
                m.answered(tab, key)
            return f"{self.current}: grade {n} on {key}" + (f" refused {refused}" * bool(refused))
        if action == "flag":
            f = rng.choice("RCS")
            blur(page)
            if rng.random() < 0.5:
                page.keyboard.press(f"Shift+{f}")
            else:
                # the flags' boxes in their order (a text match would find "s" in "redshift")
                page.locator("#vet-issues label").nth("RCS".index(f)).click()
            idle(page)
            have = set(m.mark(e, key, "issues") or "") ^ {f}
            refused = m.refusal(tab, key)
            self.expect(refused, f"flag {f} on {key}")
            if refused is None:
                m.set_mark(tab, key, issues="".join(x for x in "RCS" if x in have) or None)
                m.answered(tab, key)
            return f"{self.current}: flag {f} on {key}" + (f" refused {refused}" * bool(refused))
        if action == "spectype":
            typed = rng.choice(("M5 III", "DA", "C-N5", "K0 V"))
            box = "#vet-spectype input, #vet-spectype textarea"
            page.fill(box, typed)
            page.focus(box)
            page.keyboard.press("Enter")
            idle(page)
            blur(page)
            idle(page)
            if (m.mark(e, key, "spectype") or "") == typed:
                return f"{self.current}: type {typed} on {key}: already"
            refused = m.refusal(tab, key)
            self.expect(refused, f"type {typed} on {key}")
            if refused is None:
                m.set_mark(tab, key, spectype=typed)
                m.answered(tab, key)
            return f"{self.current}: type {typed} on {key}" + (
                f" refused {refused}" * bool(refused)
            )
        if action == "template":
            return self.template(key)
        if action == "redshift":
            return self.redshift(key)
        if action == "esc":
            page.keyboard.press("Escape")
            return "Esc"
        if action in ("j", "k"):
            blur(page)
            wrote = key is not None and m.leave(tab, key)
            page.keyboard.press(action)
            idle(page)
            self.served()
            return f"{self.current}: {action} from {key} to {head(page)}" + (
                " (comment left)" * wrote)  # fmt: skip
        if action in ("accept", "skip", "flagdec"):
            return self.decision(key, {"flagdec": "flag"}.get(action, action),
                                 mouse=rng.random() < 0.4)  # fmt: skip
        if action == "held_a":
            return self.decision(key, "accept", held=True)
        if action == "undo":
            blur(page)
            target = m.undo_target(tab)
            if rng.random() < 0.5:
                page.keyboard.press("u")
            else:
                page.click("#btn-undo")
            idle(page)
            msg = self.said()
            if target is None:
                if "Nothing to undo" not in msg:
                    self.bad.append(f"undo: model has nothing to undo, page says {msg[:120]!r}")
                return f"{self.current}: undo: nothing"
            refused = m.held_by_other(tab, target)
            self.expect("elsewhere" if refused else None, f"undo of {target}")
            if not refused:
                m.undo(tab, target)
            self.served()
            return f"{self.current}: undo {target}" + (" refused (elsewhere)" * refused)
        if action == "reload":
            idle(page)
            page.reload(wait_until="load")
            page.wait_for_function("() => !!window.loupeHeadKey && window.loupeIdle()",
                                   timeout=120_000)  # fmt: skip
            page.wait_for_timeout(300)
            tab.decided.clear()  # the session's own decisions are the page's
            self.served()
            return f"{self.current}: reload: {head(page)}"
        if action == "jump":
            others = [head(p) for n, p in self.pages.items() if n != self.current]
            others = [k for k in others if k is not None and k != key]
            if not others:
                return "jump: nothing to jump to"
            to = rng.choice(others)
            cid, task = to.split("|")
            page.fill("#jump-id input, #jump-id textarea", cid)
            page.focus("#jump-id input, #jump-id textarea")
            page.keyboard.press("Enter")
            idle(page)
            if page.is_visible("#jump-task"):
                page.click(f"#jump-task label:has-text('{task}')")
                idle(page)
            self.served()
            return f"{self.current}: jump to {to}: {head(page)}"
        raise ValueError(f"unknown action {action!r}")

    def decision(self, key: str, action: str, mouse: bool = False, held: bool = False) -> str:
        page, tab, m = self.page, self.tab, self.model
        e = tab.expert
        blur(page) if action != "reject" else None
        blocked = action != "reject" and m.blocked(e, key)
        if not blocked and action != "reject":
            self.check_form(key)
        if action == "reject":
            if mouse:
                page.click("#btn-save-reject")
            else:
                page.focus(BOX["reason"])
                page.keyboard.press("Enter")
        elif held:
            page.keyboard.down("a")
            for _ in range(6):
                page.wait_for_timeout(33)
                page.keyboard.down("a")
            page.keyboard.up("a")
        elif mouse:
            page.click({"accept": "#btn-accept", "skip": "#btn-skip", "flag": "#btn-flag"}[action])
        else:
            page.keyboard.press(action[0])
        idle(page, 300)
        how = "held " * held + "mouse " * mouse
        if blocked:
            return f"{self.current}: {how}{action} on {key}: blocked (text typed)"
        refused = m.refusal(tab, key)
        self.expect(refused, f"{action} on {key}")
        if refused is None:
            m.decide(tab, key, action)
        self.served()
        return f"{self.current}: {how}{action} on {key}" + (f" refused {refused}" * bool(refused))

    def correction(self, key: str, stale: bool) -> str:
        page, tab, m, rng = self.page, self.tab, self.model, self.rng
        e = tab.expert
        blur(page)
        if rng.random() < 0.5:
            page.keyboard.press("c")
        else:
            page.click("#btn-correct")
        page.wait_for_selector("#correct-panel", state="visible", timeout=WAIT_MS)
        idle(page)
        done = []
        if not stale:
            want = m.panel(e, key)
            got_step = page.input_value("#correct-step input")
            if str(want[1] or "none") != got_step:
                self.bad.append(f"{key}: the panel's step shows {got_step!r}, model {want[1]!r}")
            if rng.random() < 0.6:
                label = rng.choice(("YES", "NO"))
                if label != want[0]:
                    page.click(f"#correct-label label:has-text('{label}')")
                    idle(page)
                    refused = m.refusal(tab, key)
                    self.expect(refused, f"label {label} on {key}")
                    if refused is None:
                        m.set_view(tab, key, label=label)
                        m.answered(tab, key)
                    done.append(f"label {label}")
            if rng.random() < 0.4:
                page.click("#correct-step input")
                items = page.locator("ul[role=listbox] li")
                options = [o.strip().splitlines()[-1].strip() for o in items.all_inner_texts()]
                i = rng.randrange(len(options))
                pick = options[i]
                items.nth(i).click()
                idle(page)
                now = m.panel(e, key)[1]
                new = None if pick == "none" else int(pick)
                if new != now:
                    refused = m.refusal(tab, key)
                    self.expect(refused, f"step {pick} on {key}")
                    if refused is None:
                        m.set_view(tab, key, wrong_step=new)
                        m.answered(tab, key)
                done.append(f"step {pick}")
            for name in ("explanation", "note"):
                if rng.random() < 0.6:
                    word = rng.choice(WORDS)
                    m.typed(e, key, name, _type(page, BOX[name], m.box(e, key, name), word))
                    done.append(f"{name} +{word}")
        end = rng.random()
        if end < 0.25:
            page.keyboard.press("Escape")
            return f"{self.current}: correction on {key} ({', '.join(done)}), Esc"
        label = m.panel(e, key)[0]
        if label not in ("YES", "NO"):
            page.keyboard.press("Escape")
            return f"{self.current}: correction on {key}: no label"
        if end < 0.6:
            page.click("#btn-save-correct")
        else:
            page.focus(BOX["explanation"])
            page.keyboard.press("Control+Enter")
        idle(page, 300)
        refused = m.refusal(tab, key)
        self.expect(refused, f"correction on {key}")
        if refused is None:
            m.decide(tab, key, "correct")
        self.served()
        return (f"{self.current}: correction on {key} ({', '.join(done)}) saved"
                + (f" refused {refused}" * bool(refused)))  # fmt: skip

    def template(self, key: str) -> str:
        from app.pages import desk

        page, tab, m = self.page, self.tab, self.model
        blur(page)
        shown = page.input_value("#desk-template input") or "none"
        new = desk.next_template(self.ctx, shown, task=key.split("|")[1])
        page.keyboard.press("t")
        idle(page)
        refused = m.refusal(tab, key)
        self.expect(refused, f"template {new} on {key}")
        if refused is None:
            m.set_view(tab, key, template=None if new == "none" else new)
            m.set_mark(tab, key, spectype=None if new == "none" else new)
            m.answered(tab, key)
        return f"{self.current}: t on {key}: {new}" + (f" refused {refused}" * bool(refused))

    def redshift(self, key: str) -> str:
        page, tab, m, rng = self.page, self.tab, self.model, self.rng
        e = tab.expert
        blur(page)
        est = _estimate(self.ctx, key)
        z = m.mark(e, key, "redshift")
        z = est if z is None else z
        shown = round(float(z), 4) + 0.0
        got = float(page.input_value("#desk-z input[type=number]") or "nan")
        if abs(got - shown) > 5e-5:
            self.bad.append(f"{key}: the redshift box shows {got}, model {shown}")
        k = rng.choice(("]", "[", "="))
        if k == "=":
            new, source = est, "agent"
        else:
            new = round(min(7.0, max(-0.01, shown + (0.001 if k == "]" else -0.001))), 5) + 0.0
            source = "expert"
        page.keyboard.press(k)
        idle(page)
        refused = m.refusal(tab, key)
        self.expect(refused, f"redshift {k} on {key}")
        if refused is None:
            m.set_mark(tab, key, redshift=round(float(new), 5) + 0.0, redshift_source=source)
            m.answered(tab, key)
        return f"{self.current}: {k} on {key} -> {new:.5f}" + (
            f" refused {refused}" * bool(refused)
        )

    # -- the end ---------------------------------------------------------------------------

    def compare(self) -> list[str]:
        """Every difference between the model and what the store and the pages hold."""
        from annotate import drafts

        out = list(self.bad)
        store = self.ctx.store
        for p in self.pages.values():
            if p.evaluate("() => window.loupeSending()") != 0:
                out.append("a page still says it is saving a decision")
        for key, c in sorted(self.model.cands.items()):
            ident, task = key.split("|")
            info = store.find_candidate(ident, task)
            for expert in EXPERTS:
                m = c.of(expert)
                me = store.expert(expert)
                r = next(iter(store.reviews(candidate_id=info.id, expert=me.id)), None)
                got = None if r is None or r.action == "undo" else {
                    k: getattr(r, k) for k in DECIDED}  # fmt: skip
                if got is not None and got["redshift"] is not None:
                    got["redshift"] = round(got["redshift"], 5)
                want = m.top()
                if want is not None and want["redshift"] is not None:
                    want = {**want, "redshift": round(want["redshift"], 5)}
                if got != want:
                    out.append(f"{key} ({expert}): review {got} != model {want}")
                d = drafts.get(store, expert, info.id)
                got_d = {k: d[k] for k in DRAFTED if k in d}
                if "redshift" in got_d:
                    got_d["redshift"] = round(got_d["redshift"], 5)
                want_d = {k: v for k, v in m.draft.items() if v is not None}
                if "redshift" in want_d:
                    want_d["redshift"] = round(want_d["redshift"], 5)
                if got_d != want_d:
                    out.append(f"{key} ({expert}): draft {got_d} != model {want_d}")
                page = self.pages["ada1" if expert == "ada" else "bob1"]
                kept = page.evaluate("k => window.loupeTexts(k)", key) or {}
                for name in ("comment", "reason", "explanation", "note"):
                    got_t = kept[name] if name in kept else self.model.saved(expert, key, name)
                    if (got_t or "").strip() != self.model.box(expert, key, name).strip():
                        out.append(f"{key} ({expert}): kept {name} {got_t!r} != model "
                                   f"{self.model.box(expert, key, name)!r}")  # fmt: skip
        return out


# -- the page ---------------------------------------------------------------------------


def head(page: Any) -> str | None:
    return page.evaluate("() => window.loupeHeadKey ? window.loupeHeadKey() : null")


def idle(page: Any, settle_ms: int = 80) -> None:
    page.wait_for_function(IDLE, timeout=WAIT_MS, polling=50)
    page.wait_for_timeout(settle_ms)
    page.wait_for_function(IDLE, timeout=WAIT_MS, polling=50)


def blur(page: Any) -> None:
    page.evaluate("() => document.activeElement && document.activeElement.blur()")


def _has(page: Any, sel: str) -> bool:
    return page.locator(sel).count() > 0


def _type(page: Any, sel: str, current: str, word: str) -> str:
    """Type `word` at the end of the box; what the box then holds."""
    page.focus(sel)
    page.keyboard.press("End")
    text = " " + word if current else word
    page.keyboard.type(text)
    return current + text


def _open(page: Any, url: str) -> None:
    page.goto(url, wait_until="load", timeout=120_000)
    page.wait_for_function("() => !!window.loupeHeadKey && !!window.loupeHeadKey() && "
                           "window.loupeIdle()", timeout=120_000)  # fmt: skip
    page.wait_for_timeout(300)


def _login(page: Any, url: str, expert: str) -> None:
    page.goto(url, wait_until="load", timeout=120_000)
    page.fill("input[name=username]", expert)
    page.fill("input[name=password]", EXPERTS[expert])
    page.click("button[type=submit]")
    page.wait_for_function("() => !!window.loupeHeadKey && !!window.loupeHeadKey() && "
                           "window.loupeIdle()", timeout=120_000)  # fmt: skip
    page.wait_for_timeout(300)


def _candidates(ctx: Any) -> list:
    return ctx.store.list_candidates(limit=100_000, order="id")


_estimates: dict[tuple[int, str], float] = {}


def _estimate(ctx: Any, key: str) -> float:
    """The agent's (or pipeline's) redshift of the candidate, as `=` adopts it."""
    from app.pages import desk

    ident, task = key.split("|")
    c = ctx.store.find_candidate(ident, task)
    k = (id(ctx), key)
    if k not in _estimates:
        traj = ctx.store.trajectory(c.trajectory_id) if c.trajectory_id is not None else None
        _estimates[k] = desk.estimate(ctx.store.load_spectrum(c.id), traj)[0]
    return _estimates[k]


def run_seed(browser: Any, url: str, ctx: Any, seed: int, steps: int = 30
             ) -> tuple[list[str], list[str]]:  # fmt: skip
    """One seed's sequence on the app at `url` (served on `ctx`'s fresh store, login on,
    with the experts of EXPERTS): (mismatches, the steps done)."""
    rng = random.Random(seed)
    run = Run(browser, url, ctx, rng)
    names, weights = zip(*ACTIONS.items(), strict=True)
    try:
        for _ in range(steps):
            action = rng.choices(names, weights)[0]
            try:
                run.log.append(run.step(action))
            except Exception as e:  # a step that timed out is a finding too
                run.log.append(f"{action}: error {type(e).__name__}: {str(e)[:200]}")
                run.bad.append(f"step {len(run.log)} ({action}) failed: {str(e)[:200]}")
                break
        for p in run.pages.values():
            idle(p, 400)
        return run.compare(), run.log
    finally:
        run.close()


def fresh_store(root: Path, template: Path) -> Any:
    """A copy of the template's seeded store, with the fuzz's experts, login on."""
    import shutil

    from annotate.team.experts import create_expert
    from app.main import make_context
    from commands.serve import seed_demo

    if not (template / "loupe.db").exists():
        ctx = make_context(f"sqlite:///{template / 'loupe.db'}",
                           data_roots=[str(template / "data")],
                           export_dir=str(template / "exports"))  # fmt: skip
        seed_demo(ctx, template / "data" / "demo", n_per_class=2)
        for name, pw in EXPERTS.items():
            create_expert(ctx.store, name, "expert", pw)
        ctx.store.close()
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template / "loupe.db", root / "loupe.db")
    return make_context(f"sqlite:///{root / 'loupe.db'}", login=True,
                        data_roots=[str(template / "data")],
                        export_dir=str(root / "exports"))  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20, help="how many seeds to run")
    ap.add_argument("--first", type=int, default=0, help="the first seed")
    ap.add_argument("--steps", type=int, default=30, help="steps per seed")
    ap.add_argument("--verbose", action="store_true", help="print every seed's steps")
    args = ap.parse_args()
    if not os.path.exists(CHROMIUM):
        print(f"{CHROMIUM} is absent: nothing run")
        print("desk_fuzz_mismatches: n/a")
        return 1
    from playwright.sync_api import sync_playwright

    from app.main import listen_socket, serve

    total = failed = 0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        template = Path(tmp) / "template"
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        sock = listen_socket("127.0.0.1", 0)
        for seed in range(args.first, args.first + args.seeds):
            ctx = fresh_store(Path(tmp) / f"seed{seed}", template)
            srv = serve(ctx, sock=sock.dup())
            try:
                bad, log = run_seed(b, srv.url, ctx, seed, args.steps)
            except Exception as e:  # the seed's set-up failed: a finding too
                bad, log = [f"error: {type(e).__name__}: {str(e)[:300]}"], []
            finally:
                srv.close()
                ctx.store.close()
            total += len(bad)
            failed += bool(bad)
            print(f"seed {seed}: {len(bad)} mismatch(es)" if bad else f"seed {seed}: ok",
                  flush=True)  # fmt: skip
            for line in bad:
                print("  " + line)
            if bad or args.verbose:
                for i, line in enumerate(log):
                    print(f"    {i:2d}. {line}")
        sock.close()
        b.close()
    print(f"{args.seeds} seeds x {args.steps} steps in {time.perf_counter() - t0:.0f} s; "
          f"{failed} seed(s) with mismatches")  # fmt: skip
    print(f"desk_fuzz_mismatches: {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
