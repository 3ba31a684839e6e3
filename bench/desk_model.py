"""The reference model behind bench/desk_fuzz.py: what the store and each expert's browser
storage must hold after each thing experts do on the desk.

Its rules are the desk's, written down once more without the app's code:

- every write names the candidate the tab shows; it is refused, writing nothing, when
  another tab of the same expert holds that candidate, when another expert has labelled it
  (the team's overlap is one) and this expert has not, or when the candidate's reviews
  changed since the tab last drew it (`rev`, the number of review writes of every expert);
- a decision saves the form as the tab shows it: the texts in its boxes (kept in the
  expert's browser storage, else what is saved), the grade, flags and spectral type, a
  correction's label and step, the redshift set; a decision equal to the one held writes
  nothing; after it no draft is left, and the page drops the texts it saved as sent;
- on a decided candidate a mark (grade, flags, type, redshift, a comment saved with Enter,
  an edited comment left with j or k) amends the decision, elsewhere it is the draft's; a
  correction's label and step and the template wait in the draft either way;
- `u` takes back the tab's own last decision (the expert's last one after a reload), and
  puts its values back into the draft and its texts back into the boxes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DECIDED = ("action", "label", "explanation", "wrong_step", "comment", "note", "grade", "issues",
           "spectype", "redshift", "redshift_source")  # fmt: skip
MARKS = ("grade", "issues", "spectype", "redshift", "redshift_source")
TEXTS = ("comment", "reason", "explanation", "note")
LABEL_ACTIONS = ("accept", "reject", "correct")


def clean(text: str | None) -> str | None:
    return (text or "").strip() or None


@dataclass
class Mine:
    """One expert's side of one candidate."""

    stack: list[dict[str, Any]] = field(default_factory=list)  # decisions, newest last
    written: int = -1  # when this expert's review was last written
    draft: dict[str, Any] = field(default_factory=dict)  # the store's draft
    texts: dict[str, str] = field(default_factory=dict)  # the expert's browser storage

    def top(self) -> dict[str, Any] | None:
        return self.stack[-1] if self.stack else None


@dataclass
class Cand:
    key: str  # "id|task"
    verdict: str | None
    rev: int = 0  # review writes on it, every expert's
    mine: dict[str, Mine] = field(default_factory=dict)

    def of(self, expert: str) -> Mine:
        return self.mine.setdefault(expert, Mine())


@dataclass
class Tab:
    name: str
    expert: str
    seen: dict[str, int] = field(default_factory=dict)  # the revision the page last drew
    decided: list[str] = field(default_factory=list)  # what `u` takes back, newest last
    head: str | None = None


class Model:
    def __init__(self, verdicts: dict[str, str | None]) -> None:
        self.cands = {k: Cand(k, v) for k, v in verdicts.items()}
        self.holder: dict[tuple[str, str], str] = {}  # (expert, key) -> tab name
        # Whether another tab of the expert's holds the candidate, as the store's leases say
        # (set by the fuzz): which items a page keeps leased as it moves (those drawn ahead
        # of it) is the queue's to choose, and its own tests; `holder` is the fallback.
        self.elsewhere: Callable[[Tab, str], bool] | None = None
        self.clock = 0

    # -- what a tab shows -----------------------------------------------------------------

    def c(self, key: str) -> Cand:
        return self.cands[key]

    def saved(self, expert: str, key: str, name: str) -> str:
        """What a box shows when the browser keeps nothing for it."""
        m = self.c(key).of(expert)
        top = m.top()
        if top is None:
            return (m.draft.get("comment") or "") if name == "comment" else ""
        if name == "comment":
            return top["comment"] or ""
        if name == "reason":
            return (top["explanation"] or "") if top["action"] == "reject" else ""
        if name == "explanation":
            return (top["explanation"] or "") if top["action"] == "correct" else ""
        return (top["note"] or "") if top["action"] == "correct" else ""

    def box(self, expert: str, key: str, name: str) -> str:
        m = self.c(key).of(expert)
        return m.texts[name] if name in m.texts else self.saved(expert, key, name)

    def mark(self, expert: str, key: str, name: str) -> Any:
        """A grade, flags, type or redshift as the form shows it."""
        m = self.c(key).of(expert)
        top = m.top()
        return top.get(name) if top is not None else m.draft.get(name)

    def panel(self, expert: str, key: str) -> tuple[str | None, int | None]:
        """The correct panel's label and step (1-based) as the form shows them."""
        c = self.c(key)
        m = c.of(expert)
        top = m.top()
        label = m.draft.get("label")
        if label is None:
            if top is not None and top["action"] == "correct":
                label = top["label"]
            elif c.verdict in ("YES", "NO"):
                label = "NO" if c.verdict == "YES" else "YES"
        step = m.draft.get("wrong_step")
        if step is None and top is not None and top["action"] in ("correct", "reject"):
            step = None if top["wrong_step"] is None else top["wrong_step"] + 1
        return label, step

    def blocked(self, expert: str, key: str) -> bool:
        """a, s, f wait while a reason or a correction is typed on the candidate."""
        t = self.c(key).of(expert).texts
        return any((t.get(k) or "").strip() for k in ("reason", "explanation", "note"))

    # -- whether a write goes through ------------------------------------------------------

    def refusal(self, tab: Tab, key: str) -> str | None:
        """Why a write by `tab` on `key` is refused ("elsewhere", "taken", "changed"), or
        None."""
        c = self.c(key)
        if self.held_by_other(tab, key):
            return "elsewhere"
        mine = c.of(tab.expert).top()
        others = [e for e, m in c.mine.items() if e != tab.expert and m.top() is not None
                  and m.top()["action"] in LABEL_ACTIONS]  # fmt: skip
        if mine is None and others:
            return "taken"
        if tab.seen.get(key) != c.rev:
            return "changed"
        return None

    def held_by_other(self, tab: Tab, key: str) -> bool:
        """Whether another tab of the same expert holds `key`: its writes are refused here."""
        if self.elsewhere is not None:
            return self.elsewhere(tab, key)
        return self.holder.get((tab.expert, key)) not in (None, tab.name)

    def serve(self, tab: Tab, key: str | None) -> None:
        """The tab's page was answered with `key` drawn as it is now: it holds it."""
        tab.head = key
        if key is not None:
            self.holder[(tab.expert, key)] = tab.name
            tab.seen[key] = self.c(key).rev

    def answered(self, tab: Tab, key: str) -> None:
        """A write's answer told the page the candidate's revision now."""
        tab.seen[key] = self.c(key).rev

    # -- writes ----------------------------------------------------------------------------

    def _wrote(self, expert: str, key: str) -> None:
        """A review write: it ends the expert's lease on the candidate (a decision, an
        amendment; an undo's is given back by `serve`)."""
        self.clock += 1
        c = self.c(key)
        c.rev += 1
        c.of(expert).written = self.clock
        self.holder.pop((expert, key), None)

    def _held(self, tab: Tab, key: str) -> None:
        """A write went through the tab's hold on the candidate: the tab holds it now."""
        self.holder[(tab.expert, key)] = tab.name

    def typed(self, expert: str, key: str, name: str, text: str) -> None:
        """The box now holds `text` (kept in the expert's browser storage unless it is what
        is saved)."""
        m = self.c(key).of(expert)
        if text == self.saved(expert, key, name):
            m.texts.pop(name, None)
        else:
            m.texts[name] = text

    def set_mark(self, tab: Tab, key: str, **values: Any) -> None:
        """A grade, flags, type, redshift or a comment saved on its own: it amends the
        decision, or is the draft's."""
        expert = tab.expert
        self._held(tab, key)
        m = self.c(key).of(expert)
        top = m.top()
        if top is not None:
            new = {**top, **values}
            if new != top:
                m.stack[-1] = new
                self._wrote(expert, key)
            return
        for k, v in values.items():
            if v is None:
                m.draft.pop(k, None)
            else:
                m.draft[k] = v

    def set_view(self, tab: Tab, key: str, **values: Any) -> None:
        """A correction's label or step, or the template: the draft's, decided or not."""
        self._held(tab, key)
        m = self.c(key).of(tab.expert)
        for k, v in values.items():
            if v is None:
                m.draft.pop(k, None)
            else:
                m.draft[k] = v

    def decide(self, tab: Tab, key: str, action: str) -> None:
        expert = tab.expert
        m = self.c(key).of(expert)
        box = {n: clean(self.box(expert, key, n)) for n in TEXTS}
        label, step = self.panel(expert, key)
        reasoned = action in ("reject", "correct")
        verdict = self.c(key).verdict
        flipped = {"YES": "NO", "NO": "YES"}.get(verdict or "")
        new = {
            "action": action,
            # the label the decision sets: the agent's verdict kept, flipped, or the panel's
            "label": {"accept": verdict, "reject": flipped, "correct": label}.get(action),
            "explanation": (box["reason"] if action == "reject" else box["explanation"])
            if reasoned else None,
            "wrong_step": (step - 1 if step is not None else None) if reasoned else None,
            "comment": box["comment"],
            "note": box["note"] if action == "correct" else None,
            **{k: self.mark(expert, key, k) for k in MARKS},
        }  # fmt: skip
        if new["redshift"] is None:
            new["redshift_source"] = None
        self._held(tab, key)
        if new != m.top():
            m.stack.append(new)
            self._wrote(expert, key)
        m.draft = {}
        # the page drops the texts the decision saved, as sent (the boxes' trimmed values)
        took = {
            "comment",
            *(("reason",) if action == "reject" else ()),
            *(("explanation", "note") if action == "correct" else ()),
        }
        for n in took:
            if n in m.texts and clean(m.texts[n]) == box[n]:
                del m.texts[n]
        tab.decided = [k for k in tab.decided if k != key] + [key]

    def leave(self, tab: Tab, key: str) -> bool:
        """j or k away from a decided candidate: an edited comment amends the decision.
        Whether it was a write (refused or not)."""
        m = self.c(key).of(tab.expert)
        top = m.top()
        if top is None:
            return False
        text = clean(self.box(tab.expert, key, "comment"))
        if text == top["comment"]:
            return False
        if self.refusal(tab, key) is None:
            self.set_mark(tab, key, comment=text)
            m.texts.pop("comment", None)
        return True

    def undo_target(self, tab: Tab) -> str | None:
        """What `u` takes back: the tab's newest decision still standing, else (none made
        in this session) the expert's most recently written decision."""
        while tab.decided:
            k = tab.decided[-1]
            if self.c(k).of(tab.expert).top() is not None:
                return k
            tab.decided.pop()
        live = [(c.of(tab.expert).written, k) for k, c in self.cands.items()
                if c.of(tab.expert).top() is not None]  # fmt: skip
        return max(live)[1] if live else None

    def undo(self, tab: Tab, key: str) -> None:
        m = self.c(key).of(tab.expert)
        taken = m.stack.pop()
        self._wrote(tab.expert, key)
        if tab.decided and tab.decided[-1] == key:
            tab.decided.pop()
        if not m.stack:
            for k in ("grade", "issues", "spectype", "redshift", "redshift_source", "comment"):
                if taken.get(k) not in (None, ""):
                    m.draft[k] = taken[k]
        if taken["action"] == "correct":
            m.draft["label"] = taken["label"]
            if taken["wrong_step"] is not None:
                m.draft["wrong_step"] = taken["wrong_step"] + 1
        restore = {
            "comment": taken["comment"],
            "reason": taken["explanation"] if taken["action"] == "reject" else None,
            "explanation": taken["explanation"] if taken["action"] == "correct" else None,
            "note": taken["note"] if taken["action"] == "correct" else None,
        }
        for n, v in restore.items():
            if v:
                m.texts[n] = v  # kept by the page as typed, even where it equals what is saved
