"""Hunts for lost keystrokes on the expert's desk, in Chromium.

    python bench/desk_fuzz.py [--seeds 200] [--first 0] [--steps 30]

Each seed drives the Vet tab with a random sequence of what an expert does: words typed in
the comment box and the reject reason, grades (1-4), issue flags (Shift+R/C/S), focus
changes, Esc, j/k, accept, skip, a reject with its reason (Enter), undo and page reloads.
A small reference model (`Model`) says what each candidate must then hold: its decision
(action, comment, reason, grade, flags, as the review's revisions stack up and undo takes
the last one back), its draft in the store (grade, flags) and the texts the page keeps for
it. After the sequence the store and the page's kept texts must equal the model; every
difference is a mismatch, printed with the seed and the steps that led to it.

A fresh demo store per seed, served once per run on one address. Ends with
`desk_fuzz_mismatches: N`. tests/test_desk_fuzz.py runs a few fixed seeds (and every seed
that ever failed) with `run_seed`.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
EXPERT = "local"  # the single-user mode's expert
WORDS = ("tio", "swan", "halpha", "mg2", "odd", "sky", "dab", "c2", "mgiant", "blue")
COMMENT = "#vet-comment textarea, #vet-comment input"
REASON = "#reject-reason input, #reject-reason textarea"
IDLE = "() => !!window.loupeIdle && window.loupeIdle()"
WAIT_MS = 45_000
# What one step does, and how often (weights).
ACTIONS = {
    "type_comment": 5, "comment_enter": 1, "type_reason": 3, "reject_enter": 2, "grade": 3,
    "flag": 3, "blur": 1, "esc": 1, "j": 4, "k": 3, "accept": 3, "skip": 2, "undo": 2,
    "reload": 1,
}  # fmt: skip
REVIEWED = ("action", "comment", "explanation", "grade", "issues")


def _clean(text: str | None) -> str | None:
    return (text or "").strip() or None


@dataclass
class Cand:
    """One candidate (id and task) as the model holds it."""

    stack: list[dict[str, Any]] = field(default_factory=list)  # decisions, newest last
    written: int = -1  # when its review was last written: undo takes the latest
    draft: dict[str, Any] = field(default_factory=dict)  # the store's draft: grade, issues
    texts: dict[str, str] = field(default_factory=dict)  # what the page keeps: comment, reason

    def saved(self, name: str) -> str:
        """What the page shows in a box when it keeps nothing for it."""
        if self.stack:
            top = self.stack[-1]
            if name == "comment":
                return top["comment"] or ""
            return (top["explanation"] or "") if top["action"] == "reject" else ""
        return (self.draft.get("comment") or "") if name == "comment" else ""

    def box(self, name: str) -> str:
        return self.texts.get(name, self.saved(name))

    def top(self) -> dict[str, Any] | None:
        return self.stack[-1] if self.stack else None


class Model:
    """What the store and the page must hold for each candidate after each step."""

    def __init__(self) -> None:
        self.cands: dict[str, Cand] = {}
        self.clock = 0

    def of(self, key: str) -> Cand:
        return self.cands.setdefault(key, Cand())

    def _wrote(self, c: Cand) -> None:
        self.clock += 1
        c.written = self.clock

    def typed(self, key: str, name: str, word: str) -> None:
        c = self.of(key)
        box = c.box(name)
        new = f"{box} {word}" if box else word
        c.texts[name] = new
        if new == c.saved(name):
            del c.texts[name]

    def _amend(self, c: Cand, **changes: Any) -> None:
        top = dict(c.stack[-1])
        new = {**top, **changes}
        if new != top:
            c.stack[-1] = new
            self._wrote(c)

    def mark(self, key: str, name: str, value: Any) -> None:
        """A grade or the issue flags set on the candidate."""
        c = self.of(key)
        if c.stack:
            self._amend(c, **{name: value})
        elif value is None:
            c.draft.pop(name, None)
        else:
            c.draft[name] = value

    def flags(self, key: str) -> str:
        c = self.of(key)
        return (c.top() or {}).get("issues") or "" if c.stack else c.draft.get("issues") or ""

    def grade(self, key: str) -> int | None:
        c = self.of(key)
        return c.top()["grade"] if c.stack else c.draft.get("grade")

    def blocked(self, key: str) -> bool:
        """a, s, f wait while a reject reason is typed on the candidate."""
        return (self.of(key).texts.get("reason") or "").strip() != ""

    def decide(self, key: str, action: str) -> None:
        c = self.of(key)
        top = c.top() or {}
        new = {
            "action": action,
            "comment": _clean(c.box("comment")),
            "explanation": _clean(c.box("reason")) if action == "reject" else None,
            "grade": c.draft.get("grade", top.get("grade")),
            "issues": c.draft.get("issues", top.get("issues")),
        }
        c.texts.clear()  # the decision holds them
        c.draft = {}
        if new == c.top():
            return  # an identical decision again: nothing written
        c.stack.append(new)
        self._wrote(c)

    def comment_saved(self, key: str) -> None:
        """Enter in the comment box: the comment amends the decision, or is the draft's."""
        c = self.of(key)
        text = _clean(c.box("comment"))
        if text is None:
            return
        if c.stack:
            self._amend(c, comment=text)
        else:
            c.draft["comment"] = text

    def leave(self, key: str) -> None:
        """j or k away from a decided candidate: an edited comment amends the decision."""
        c = self.of(key)
        if not c.stack:
            return
        text = _clean(c.box("comment"))
        if text != c.stack[-1]["comment"]:
            self._amend(c, comment=text)
            c.texts.pop("comment", None)

    def undo(self) -> str | None:
        """u: the most recently written decision is taken back; the candidate undone."""
        live = [(c.written, k) for k, c in self.cands.items() if c.stack]
        if not live:
            return None
        key = max(live)[1]
        c = self.cands[key]
        taken = c.stack.pop()
        self._wrote(c)
        if not c.stack:  # undecided again: the undone values are its draft
            c.draft = {k: taken[k] for k in ("grade", "issues", "comment") if taken[k]}
        reason = taken["explanation"] if taken["action"] == "reject" else None
        for name, value in (("comment", taken["comment"]), ("reason", reason)):
            if value:
                c.texts[name] = value
        return key


# -- the page


def head_key(page) -> str | None:
    return page.evaluate("() => window.loupeHeadKey ? window.loupeHeadKey() : null")


def idle(page, settle_ms: int = 60) -> None:
    page.wait_for_function(IDLE, timeout=WAIT_MS, polling=50)
    page.wait_for_timeout(settle_ms)
    page.wait_for_function(IDLE, timeout=WAIT_MS, polling=50)


def blur(page) -> None:
    page.evaluate("() => document.activeElement && document.activeElement.blur()")


def open_page(page, url: str) -> None:
    page.goto(url, wait_until="load", timeout=120_000)
    page.wait_for_function(
        "() => !!window.loupeHeadKey && !!window.loupeHeadKey() && window.loupeIdle()",
        timeout=120_000,
    )  # fmt: skip
    page.wait_for_timeout(300)


def _says(page, text: str) -> bool:
    return text in page.inner_text("#vet-message")


def step(page, model: Model, rng: random.Random, action: str) -> str:
    """Do `action` on the page and in the model; returns what was done, for the log."""
    key = head_key(page)
    if key is None and action not in ("j", "k", "undo", "reload"):
        return f"{action}: nothing shown"
    if action == "type_comment":
        word = rng.choice(WORDS)
        page.focus(COMMENT)
        page.keyboard.press("End")
        page.keyboard.type(" " + word if model.of(key).box("comment") else word)
        model.typed(key, "comment", word)
        return f"comment +{word} on {key}"
    if action == "comment_enter":
        page.focus(COMMENT)
        page.keyboard.press("End")
        page.keyboard.press("Enter")
        idle(page)
        model.comment_saved(key)
        return f"comment Enter on {key}"
    if action in ("type_reason", "reject_enter"):
        blur(page)
        page.keyboard.press("r")
        page.wait_for_selector("#reject-reason", state="visible", timeout=WAIT_MS)
        page.focus(REASON)
        page.keyboard.press("End")
        word = rng.choice(WORDS)
        if action == "type_reason" or rng.random() < 0.5:
            page.keyboard.type(" " + word if model.of(key).box("reason") else word)
            model.typed(key, "reason", word)
        else:
            word = ""
        if action == "type_reason":
            if rng.random() < 0.5:
                page.keyboard.press("Escape")  # leaves the box; the text stays
            return f"reason +{word} on {key}"
        page.keyboard.press("Enter")
        idle(page)
        if not _says(page, "Not saved"):
            model.decide(key, "reject")
        return f"reject+{word} on {key}"
    if action == "grade":
        n = rng.choice("1234")
        blur(page)
        page.keyboard.press(n)
        if model.grade(key) != int(n):
            model.mark(key, "grade", int(n))
        idle(page)
        return f"grade {n} on {key}"
    if action == "flag":
        f = rng.choice("RCS")
        blur(page)
        page.keyboard.press(f"Shift+{f}")
        have = set(model.flags(key))
        have ^= {f}
        model.mark(key, "issues", "".join(x for x in "RCS" if x in have) or None)
        idle(page)
        return f"flag {f} on {key}"
    if action == "blur":
        blur(page)
        return "blur"
    if action == "esc":
        page.keyboard.press("Escape")
        return "Esc"
    if action in ("j", "k"):
        blur(page)
        page.keyboard.press(action)
        if key is not None:
            model.leave(key)
        idle(page)
        return f"{action} from {key} to {head_key(page)}"
    if action in ("accept", "skip"):
        blur(page)
        page.keyboard.press(action[0])
        idle(page)
        if model.blocked(key):
            return f"{action} on {key}: refused (a reason is typed)"
        if _says(page, "Not saved"):
            return f"{action} on {key}: not saved ({page.inner_text('#vet-message')[:80]})"
        model.decide(key, action)
        return f"{action} on {key}"
    if action == "undo":
        blur(page)
        page.keyboard.press("u")
        idle(page)
        undone = model.undo() if not _says(page, "Nothing to undo") else None
        return f"undo: {undone}"
    if action == "reload":
        idle(page)
        page.reload(wait_until="load")
        page.wait_for_function("() => !!window.loupeHeadKey && window.loupeIdle()", timeout=120_000)
        page.wait_for_timeout(300)
        return f"reload: {head_key(page)}"
    raise ValueError(f"unknown action {action!r}")


def compare(page, ctx: Any, model: Model) -> list[str]:
    """Every difference between what the model says and what the store and page hold."""
    from annotate import drafts

    out = []
    for key, c in sorted(model.cands.items()):
        cid_key, task = key.split("|")
        info = ctx.store.find_candidate(cid_key, task)
        revs = [r for r in ctx.store.reviews(candidate_id=info.id)]
        r = next(iter(revs), None)
        got = None if r is None or r.action == "undo" else {k: getattr(r, k) for k in REVIEWED}
        want = None if c.top() is None else {k: c.top()[k] for k in REVIEWED}
        if got != want:
            out.append(f"{key}: review {got} != model {want}")
        d = drafts.get(ctx.store, EXPERT, info.id)
        got_d = {k: d[k] for k in ("grade", "issues", "comment") if k in d}
        want_d = {k: v for k, v in c.draft.items() if v is not None} if not c.stack else {}
        if got_d != want_d:
            out.append(f"{key}: draft {got_d} != model {want_d}")
        kept = page.evaluate("k => window.loupeTexts(k)", key) or {}
        for name, box in (("comment", "comment"), ("reason", "reason")):
            got_t = kept[box] if box in kept else c.saved(name)
            if (got_t or "").strip() != c.box(name).strip():
                out.append(f"{key}: page's {name} {got_t!r} != model {c.box(name)!r}")
    return out


def run_seed(page, url: str, ctx: Any, seed: int, steps: int = 30) -> tuple[list[str], list[str]]:
    """One seed's sequence on a page open at `url` (served on `ctx`'s fresh store):
    (mismatches, the steps done)."""
    rng = random.Random(seed)
    model = Model()
    open_page(page, url)
    names, weights = zip(*ACTIONS.items(), strict=True)
    log: list[str] = []
    for _ in range(steps):
        action = rng.choices(names, weights)[0]
        log.append(step(page, model, rng, action))
        shown = head_key(page)
        if shown is not None:
            model.of(shown)  # every candidate seen is checked: nothing may land on it
    idle(page, 400)
    return compare(page, ctx, model), log


def _fresh(root: Path):
    from app.main import make_context
    from commands.serve import seed_demo

    ctx = make_context(f"sqlite:///{root / 'loupe.db'}", data_roots=[str(root / "data")],
                       export_dir=str(root / "exports"))  # fmt: skip
    seed_demo(ctx, root / "data" / "demo", n_per_class=2)
    return ctx


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
    import shutil

    from playwright.sync_api import sync_playwright

    from app.main import listen_socket, make_context, serve

    total = failed = 0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        template = Path(tmp) / "template"
        _fresh(template).store.close()
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        bctx = b.new_context(viewport={"width": 1366, "height": 768})
        page = bctx.new_page()
        sock = listen_socket("127.0.0.1", 0)
        for seed in range(args.first, args.first + args.seeds):
            root = Path(tmp) / f"seed{seed}"
            root.mkdir()
            shutil.copyfile(template / "loupe.db", root / "loupe.db")
            ctx = make_context(f"sqlite:///{root / 'loupe.db'}",
                               data_roots=[str(template / "data")],
                               export_dir=str(root / "exports"))  # fmt: skip
            srv = serve(ctx, sock=sock.dup())
            try:
                bad, log = run_seed(page, srv.url, ctx, seed, args.steps)
            except Exception as e:  # a step that timed out is a finding too
                bad, log = [f"error: {type(e).__name__}: {str(e)[:300]}"], []
            finally:
                page.goto("about:blank")
                srv.close()
                ctx.store.close()
            total += len(bad)
            failed += bool(bad)
            print(f"seed {seed}: {len(bad)} mismatch(es)" if bad else f"seed {seed}: ok")
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
