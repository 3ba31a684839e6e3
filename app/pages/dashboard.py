"""The dashboard: progress, decision rates, agent-vs-expert quality, calibration, speed and
agreement, aggregated in the database and drawn as Plotly figures; beside them the random
audit's weighted estimates (`audit_estimates`), which the figures over reviewed items are
not (those items were served because the agent was unsure), the inspector's learning curve
and what a fitted version would flip."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotate import review
from annotate.audit import agreement as ag
from annotate.audit import sample as audit_sample
from annotate.learning import versions as iv
from app import dashboard_figures, plots
from app.context import AccessError, Context, Viewer, refusal, require
from app.render_md import escape
from app.views import DashboardView


def _bar_layout(title: str, **extra: Any) -> dict[str, Any]:
    lay = {"title": {"text": title, "font": {"size": 13}}, "height": 300,
           "margin": {"l": 50, "r": 10, "t": 40, "b": 40}, "plot_bgcolor": "white",
           "barmode": "stack", "legend": {"orientation": "h", "y": -0.2}}  # fmt: skip
    lay.update(extra)
    return lay


# Agreement cells green, errors red, each as deep as its share of its row: a colour scale
# read as "more is better" would paint a large error as a success.
AGREE_ERR_SCALE = [[0.0, "#c1121f"], [0.5, "#ffffff"], [1.0, "#2a9d8f"]]
HEADERS = {
    "per_task": ["task", "n", "TP", "FP", "FN", "TN", "no verdict", "precision", "recall", "F1"],
    "kappa": ["task", "items (2+ raters)", "ratings", "Fleiss κ", "mean Cohen κ"],
}


def confusion_figure(tot: Any, title: str) -> dict[str, Any]:
    """The agent-vs-experts matrix: counts in the cells, the diagonal (agreement) green and
    the off-diagonal (the agent's errors) red, with room for the axis labels."""
    counts = [[tot.tp, tot.fn], [tot.fp, tot.tn]]
    signed = []
    for i, row in enumerate(counts):
        n = max(1, sum(row))
        signed.append([(c / n) * (1 if i == j else -1) for j, c in enumerate(row)])
    return {
        "data": [{"type": "heatmap", "z": signed, "text": counts, "texttemplate": "%{text}",
                  "x": ["agent YES", "agent NO"], "y": ["expert YES", "expert NO"],
                  "colorscale": AGREE_ERR_SCALE, "zmin": -1, "zmax": 1, "showscale": False,
                  "hovertemplate": "%{y}, %{x}: %{text}<extra></extra>",
                  "textfont": {"size": 16}}],
        "layout": _bar_layout(title, margin={"l": 95, "r": 10, "t": 40, "b": 50},
                              xaxis={"automargin": True, "side": "bottom"},
                              yaxis={"autorange": "reversed", "automargin": True}),
    }  # fmt: skip


FIELDS = ("tp", "fp", "fn", "tn", "unanswered")


def _confusion_by_task(counts: list[tuple[str, str | None, str, int]]) -> dict[str, Any]:
    """`ag.confusion_by_task` of (task, verdict, label) repeated `n` times, from the counts:
    each pair is scored once by `ag.confusion` and counted n times (no list of every item)."""
    out: dict[str, Any] = {}
    for t, v, lab, n in sorted(counts, key=str):
        one = ag.confusion([(v, lab)])
        c = out.setdefault(t, ag.Confusion())
        for f in FIELDS:
            setattr(c, f, getattr(c, f) + n * getattr(one, f))
    return dict(sorted(out.items()))


def _sum_confusions(cs: Any) -> Any:
    tot = ag.Confusion()
    for c in cs:
        for f in FIELDS:
            setattr(tot, f, getattr(tot, f) + getattr(c, f))
    return tot


def _r(v: float) -> float | None:
    return None if v != v else round(float(v), 3)


def _kappa(v: float) -> str:
    """A kappa for the table; "n/a" where it is undefined (one item, or one label only)."""
    return "n/a" if v != v else f"{v:.3f}"


# Figures built from gold items are shown to admins only: their counts move when a gold item
# is decided, so an expert who decides, reads and takes back could tell which items are gold
# and their gold labels (as the audit's figures could tell the audited items).
GOLD_HIDDEN = ("Gold-standard accuracy is shown to admins: which items are gold stays "
               "unknown to the experts who review them.")  # fmt: skip


def gold_figure(gold: list[tuple]) -> dict[str, Any]:
    """Each expert's accuracy on the gold items they decided, correct/n (admins only)."""
    gs = ag.gold_accuracy([ag.Rating(c, t, e, lab) for c, t, e, lab, _ in gold],
                          {c: g for c, _, _, _, g in gold})  # fmt: skip
    if not gs:
        return plots.empty_figure("No gold-standard items reviewed yet.")
    return {
        "data": [{"type": "bar", "x": list(gs), "y": [g.accuracy for g in gs.values()],
                  "text": [f"{g.correct}/{g.n}" for g in gs.values()], "marker": {"color": "#1f3b73"}}],
        "layout": _bar_layout("Gold-standard accuracy per expert", yaxis={"range": [0, 1],
                              "tickformat": ".0%"}),
    }  # fmt: skip


def dashboard(ctx: Context, ex: Viewer | None, task: str = "all", precision: float = 0.95):
    """Progress, decision rates, agent-vs-expert quality, calibration, speed, agreement."""
    if ex is None:
        empty = plots.empty_figure("Log in first.")
        return DashboardView("Log in first.", empty, empty, empty, empty, empty, empty,
                             {"headers": HEADERS["per_task"], "data": []},
                             {"headers": HEADERS["kappa"], "data": []})  # fmt: skip
    only = None if task in (None, "", "all") else task
    # Aggregated in the database: nothing here grows with the number of candidates.
    st = ctx.read.dashboard_stats(only)
    tasks = st.tasks
    # progress per task
    done, auto, total = st.reviewed, st.auto, st.total
    progress = {
        "data": [
            {"type": "bar", "name": "reviewed", "x": tasks, "y": [done[t] for t in tasks],
             "marker": {"color": "#2a9d8f"}},
            {"type": "bar", "name": "auto-accepted", "x": tasks, "y": [auto[t] for t in tasks],
             "marker": {"color": "#8ab17d"}},
            {"type": "bar", "name": "open", "x": tasks,
             "y": [total[t] - done[t] - auto[t] for t in tasks], "marker": {"color": "#ccc"}},
        ],
        "layout": _bar_layout("Progress per task"),
    }  # fmt: skip
    # action rates per task
    acts = list(review.DECISIONS)
    colours = ["#2a9d8f", "#c1121f", "#f4a261", "#999", "#6d597a"]
    counts = {t: {a: st.actions.get(t, {}).get(a, 0) for a in acts} for t in tasks}
    rates = {
        "data": [
            {"type": "bar", "name": a, "x": tasks, "marker": {"color": col},
             "y": [counts[t][a] / max(1, sum(counts[t].values())) for t in tasks]}
            for a, col in zip(acts, colours)
        ],
        "layout": _bar_layout("Decisions per task (share)", yaxis={"tickformat": ".0%"}),
    }  # fmt: skip
    # agent vs experts
    cm = _confusion_by_task(st.confusion)
    per_task = []
    for t, conf in cm.items():
        p = ag.prf(conf)
        per_task.append([t, conf.n, conf.tp, conf.fp, conf.fn, conf.tn, conf.unanswered,
                         _r(p.precision), _r(p.recall), _r(p.f1)])  # fmt: skip
    tot = _sum_confusions(cm.values()) if cm else None
    confusion_fig = (
        confusion_figure(
            tot,
            f"Agent vs experts on reviewed items ({'all tasks' if not only else only}; "
            f"F1 {_r(ag.prf(tot).f1)})",
        )  # fmt: skip
        if tot is not None
        else plots.empty_figure("No expert labels yet.")
    )
    # reliability + hand-off threshold
    # each histogram cell stands for its items at the cell's mean P(YES) (cells 0.001 wide)
    scored = [(sm / n, lab) for _, lab, n, sm in st.confidence_hist for _ in range(n)]
    if scored:
        rel = ag.reliability_diagram([s[0] for s in scored], [s[1] for s in scored])
        plan = ag.handoff_plan([s[0] for s in scored], [s[1] for s in scored],
                               target_precision=float(precision))  # fmt: skip
        xs = [b.mean_confidence for b in rel.bins if b.count]
        ys = [b.yes_rate for b in rel.bins if b.count]
        shapes = []
        for thr in (plan.yes_threshold, plan.no_threshold):
            if thr is not None:
                shapes.append({"type": "line", "x0": thr, "x1": thr, "y0": 0, "y1": 1,
                               "line": {"dash": "dash", "color": "#c1121f"}})  # fmt: skip
        reliability = {
            "data": [
                {"type": "scatter", "x": [0, 1], "y": [0, 1], "mode": "lines",
                 "line": {"dash": "dot", "color": "#999"}, "name": "perfect"},
                {"type": "scatter", "x": xs, "y": ys, "mode": "lines+markers", "name": "agent",
                 "text": [f"n={b.count}" for b in rel.bins if b.count]},
            ],
            # Biased, and said so in its title: experts were served the items the agent was
            # unsure of. The title sits above the plot area (it ran into it on one line).
            "layout": dashboard_figures.title_layout(
                [f"Reliability on reviewed items (ECE {_r(rel.ece)}, n={rel.n}): BIASED,",
                 "experts were served the items the agent was unsure of",
                 f"hand-off for precision {precision:.2f}: YES ≥ "
                 f"{_r(plan.yes_threshold) if plan.yes_threshold is not None else '–'}, NO ≤ "
                 f"{_r(plan.no_threshold) if plan.no_threshold is not None else '–'}, "
                 f"{plan.human_fraction:.0%} to humans"],
                xaxis={"title": {"text": "agent P(YES)"}, "range": [0, 1]},
                yaxis={"title": {"text": "expert YES rate"}, "range": [0, 1]}, shapes=shapes,
            ),
        }  # fmt: skip
    else:
        reliability = plots.empty_figure("No labelled candidates with a confidence yet.")
    # seconds per spectrum per expert
    secs = st.seconds  # expert -> n, min, q1, median, q3, max
    speed = {
        "data": [{"type": "box", "name": n, "x": [n], "q1": [q["q1"]], "median": [q["median"]],
                  "q3": [q["q3"]], "lowerfence": [q["min"]], "upperfence": [q["max"]],
                  "hovertext": f"{q['n']} timed reviews"} for n, q in secs.items()],
        "layout": _bar_layout("Seconds per spectrum per expert", showlegend=False),
    } if secs else plots.empty_figure("No timed reviews yet.")  # fmt: skip
    # agreement and gold accuracy
    ratings = [ag.Rating(c, t, e, lab) for c, t, e, lab in st.ratings]  # items with 2+ reviews
    kappa = [[t, a.n_items, a.n_ratings, _kappa(a.fleiss), _kappa(a.cohen_mean)]
             for t, a in ag.kappa_by_task(ratings).items()]  # fmt: skip
    gold_fig = gold_figure(st.gold) if ex.admin else plots.empty_figure(GOLD_HIDDEN)
    n_rev = sum(done.values())
    med = st.seconds_median
    unexplained = ctx.read.rejects_without_reason(only)
    n_unexplained = sum(unexplained.values())
    summary = (
        f"**{sum(total.values())}** candidates · **{n_rev}** reviewed · **{st.n_reviews}** "
        f"decisions by **{st.n_reviewers}** expert(s)"
        + (f" · median **{med:.1f} s** per spectrum" if med is not None else "")
        + (
            f" · **{n_unexplained}** reject(s) without a reason "
            f"({', '.join(f'{t} {n}' for t, n in sorted(unexplained.items()))}): "
            "their training rows get a neutral explanation, not the expert's reasoning"
            if n_unexplained
            else ""
        )
    )
    return DashboardView(summary, progress, rates, confusion_fig, reliability, speed, gold_fig,
                         {"headers": HEADERS["per_task"], "data": per_task},
                         {"headers": HEADERS["kappa"], "data": kappa})  # fmt: skip


# -- honest figures: the audit's weighted estimates, beside the biased figures above --------

AUDIT_HEADERS = audit_sample.TABLE_HEADERS
BAND_HEADERS = audit_sample.BAND_HEADERS


@dataclass
class AuditView:
    """The random audit's estimates: a note, the per-task and per-band tables and figures."""

    note: str
    estimates: dict[str, Any]  # {"headers", "data"}
    bands: dict[str, Any]
    precision: dict[str, Any]
    reliability: dict[str, Any]


def audit_estimates(ctx: Context, ex: Viewer | None, task: str = "all", **_: Any) -> AuditView:
    """Per task, what the random audit estimates (each candidate in the stratum it had at
    the draw, 95% intervals with the estimator each comes from, the audited items counted),
    precision and completeness plotted side by side, and the reliability diagram of the
    audited items; says so plainly where nothing is audited yet.

    Admins only: the counts of audited items move when an item of the sample is decided,
    so an expert who decides and takes back could find out which items are audited, and
    review those differently. Read from per-stratum counts the database aggregates."""
    empty_tables = ({"headers": AUDIT_HEADERS, "data": []}, {"headers": BAND_HEADERS, "data": []})
    if ex is None or not ex.admin:
        note = "Log in first." if ex is None else (
            "The random audit's figures are shown to admins: which items are audited stays "
            "unknown to the experts who review them.")  # fmt: skip
        empty = plots.empty_figure(note)
        return AuditView(note, *empty_tables, empty, empty)
    only = None if task in (None, "", "all") else task
    items = ctx.read.audited_items(only)  # read once: the residuals and the diagram
    counts = audit_sample.store_counts(ctx.read, only, items)
    est = audit_sample.from_counts(counts)
    drawn = sum(e.drawn for e in est.values())
    audited = sum(e.audited for e in est.values())
    if not est:
        note = "No candidates yet."
    elif not drawn:
        note = ("**Nothing audited yet**: no audit sample has been drawn (`launch.py audit "
                "--draw`), so nothing estimates how pure the YES list is. The figures over "
                "reviewed items are biased.")  # fmt: skip
    elif not audited:
        note = (f"**Nothing audited yet**: {drawn} item(s) drawn into the random audit, none "
                "reviewed so far; the estimates appear as experts review them.")  # fmt: skip
    else:
        note = (f"From **{audited}** audited item(s) of **{drawn}** drawn at random among the "
                "agent's confident verdicts, each candidate counted in the stratum it had at "
                "the draw, and every item an expert decided counted as known; [a, b] is the "
                "95% interval, n the audited items behind a figure, and last the estimator it "
                "comes from: *exact* (per stratum, from the audited labels alone) or "
                "*model-assisted* (the agent's P(YES) corrected by the audited labels; "
                "docs/audit.md says where each is used and its measured coverage).")  # fmt: skip
    bins = ag.weighted_reliability(audit_sample.store_audited_points(ctx.read, only, counts, items))
    return AuditView(
        note,
        {"headers": AUDIT_HEADERS, "data": audit_sample.table_rows(est)},
        {"headers": BAND_HEADERS, "data": audit_sample.band_rows(est)},
        dashboard_figures.precision_figure(est) if est else plots.empty_figure(note),
        dashboard_figures.audit_reliability_figure(bins),
    )


def learning_curve(ctx: Context, ex: Viewer | None, task: str = "all") -> dict[str, Any]:
    """Each inspector version's F1 change against the plain rules on held-out objects (with
    its interval) and its weight, against the labels it rests on, one line per task (the
    versions saved in the store's audit log)."""
    if ex is None:
        return plots.empty_figure("Log in first.")
    rows = iv.learning_curve(iv.versions(ctx.read))
    if task not in (None, "", "all"):
        rows = [r for r in rows if r[1] == task]
    return dashboard_figures.learning_curve_figure(rows)


def proposal_note(ctx: Context, ex: Viewer | None, model: Any = None) -> str:
    """What the latest fitted inspector version (or `model`) would do to the pending
    verdicts, re-scored from their stored values, and its largest changes in words."""
    if ex is None:
        return ""
    if model is None:
        found = iv.versions(ctx.read)
        if not found:
            return ""
        model = found[-1]
    try:
        p = iv.proposal(ctx.read, model)
    except Exception as exc:
        return refusal(f"Could not re-score the pending verdicts with {model.tag}", exc)
    by_task = ", ".join(f"{t} {n}" for t, n in sorted(p["flips_by_task"].items()))
    msg = (f"**{p['version']}** would flip **{p['flips']}** of the **{p['rescored']}** "
           "pending verdicts it re-scores" + (f" ({by_task})" if by_task else "")
           + " (re-scored from the values stored with each verdict, without rerunning the "
           "agent)")  # fmt: skip
    if p["kept"]:
        msg += f"; {p['kept']} pending verdict(s) lack those values and stay as they are"
    words = p["in_words"]
    msg += (". What it changes: " + "; ".join(escape(w) for w in words) + "."
            if words else ". It keeps the plain rules on every task.")  # fmt: skip
    return msg


# -- the inspector: calibrate it from the experts' labels, its agreement on gold by version --

VERSION_HEADERS = ["inspector version", "gold items", "agreement"]


def can_calibrate(ex: Viewer | None) -> bool:
    """Whether the page shows the Calibrate button (the handler checks again)."""
    return ex is not None and ex.admin


def inspector_versions(ctx: Context, ex: Viewer | None, task: str = "all") -> dict[str, Any]:
    """Gold items: how often each inspector version (plain rules, inspector-vN) agrees with
    the gold label, so a calibration is judged on items it was not told about. Admins
    only, as every figure built from gold items is (`GOLD_HIDDEN`)."""
    if ex is None or not ex.admin:
        return {"headers": VERSION_HEADERS, "data": []}
    only = None if task in (None, "", "all") else task
    rows = ctx.read.gold_agreement_by_inspector(only)
    return {"headers": VERSION_HEADERS,
            "data": [[v, n, _r(agree / n) if n else None] for v, n, agree in rows]}  # fmt: skip


def calibrate_now(
    ctx: Context, ex: Viewer | None, out: str | Path | None = None
) -> tuple[str, dict[str, Any]]:
    """Admins only: fit the next inspector version from the store's labels in the
    background (`annotate.learning.schedule`: adopted only where it beats the current version);
    the message says where the outcome appears (`last_fit`)."""
    from annotate.learning import schedule
    from annotate.learning.fit import inspector_dir

    empty = {"headers": FIT_HEADERS, "data": []}
    try:
        require(ex, admin=True)
    except AccessError as e:
        return f"Refused: {escape(e)}", empty
    try:
        started = schedule.attach(ctx.store, out or inspector_dir(ctx.export_dir)).start(ex.name)
    except Exception as exc:
        return refusal("Calibration failed", exc), empty
    if not started:
        return "A fit is already running; its outcome appears here (Refresh) when it ends.", empty
    return (
        "Fitting the next inspector version in the background; adopted or not adopted "
        "(with the cross-validated before/after per task) appears here when you press "
        "Refresh, and in the audit log. The app keeps serving meanwhile.",
        empty,
    )


# -- the learning schedule's last fit (annotate.learning.schedule) --

FIT_HEADERS = ["task", "labels", "YES (objects)", "NO (objects)", "before", "now",
               "F1 held out: rules -> now", "F1 change [95%]", "verdicts flipped", "changed",
               "what and why"]  # fmt: skip


def _change(g: Any) -> str:
    """An F1 change and its interval, as the table shows it."""
    if not isinstance(g, dict) or g.get("mean") is None:
        return ""
    lo, hi = g.get("low"), g.get("high")
    if lo is None or hi is None or not all(map(_finite, (lo, hi))):
        return f"{g['mean']:+.3f} (interval not estimated)"
    return f"{g['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and v == v and abs(v) != float("inf")


def last_fit(ctx: Context, ex: Viewer | None) -> tuple[str, dict[str, Any]]:
    """Your campaign as the last fit saw it, the way the benchmark's learning curve shows
    one: per task the labels, YES and NO labels with their distinct objects, what served
    before and serves now (the learned kind and its weight), the F1 of the rules and of
    what serves now on objects held out of the fit with the change's 95% interval, the
    pending verdicts the version flipped, and what was blended, kept or waited and why."""
    from annotate.learning import schedule

    empty = {"headers": FIT_HEADERS, "data": []}
    if ex is None:
        return "", empty
    got = schedule.status(ctx.store)
    running = (lr := schedule.learner(ctx.store)) is not None and lr.running
    if not got:
        return ("A fit is running." if running else ""), empty
    msg = f"Last fit ({escape(got.get('at', ''))}): {escape(got.get('said', ''))}."
    if running:
        msg += " Another fit is running now."
    rows = []
    for t, r in (got.get("cv") or {}).items():
        n_pos, n_neg = r.get("positives"), r.get("negatives")
        rows.append([t, r["n"], f"{n_pos} ({r.get('positive_objects')})",
                     f"{n_neg} ({r.get('negative_objects')})", r["before"]["kind"], r["model"],
                     f"{_r((r.get('rules') or r['before'])['f1'])} -> {_r(r['after']['f1'])}",
                     _change(r.get("gain")),
                     r.get("flips", 0), "yes" if r["changed"] else "no",
                     escape(f"{r.get('status', '')}: {r.get('why', '')}".strip(": "))])  # fmt: skip
    return msg, {"headers": FIT_HEADERS, "data": rows}
