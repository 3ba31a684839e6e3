// Keyboard-first vetting. Keys press the page's own buttons (found by elem_id), so a key
// does exactly what a click does. Keys are ignored while the expert types in a text field.
(() => {
  if (window.__loupeKeys) return;
  window.__loupeKeys = true;

  // The vet page's keys and the buttons they press: a click on one of these buttons takes
  // its key's path (below), so a key and a click mean the same.
  const KEYS = {
    a: "btn-accept",
    s: "btn-skip",
    f: "btn-flag",
    j: "btn-next",
    k: "btn-prev",
    u: "btn-undo",
    r: "btn-reject",
    c: "btn-correct",
  };

  const visible = (el) => !!el && el.offsetParent !== null;

  const typing = (ev) => {
    const t = ev.target;
    if (!t) return false;
    if (t.isContentEditable) return true;
    const tag = (t.tagName || "").toLowerCase();
    if (tag === "textarea" || tag === "select") return true;
    if (tag === "input") {
      const type = (t.getAttribute("type") || "text").toLowerCase();
      return !["checkbox", "radio", "button", "range", "submit"].includes(type);
    }
    return false;
  };

  const cheat = () => document.getElementById("loupe-cheatsheet");

  const toggleCheat = (show) => {
    const el = cheat();
    if (!el) return;
    const on = show === undefined ? el.style.display !== "block" : show;
    el.style.display = on ? "block" : "none";
  };

  // ---- vet desk: reason, correct panel, grade, active time, stale panels ----
  const inside = (ev, id) => !!(ev.target && ev.target.closest && ev.target.closest(`#${id}`));
  const press = (id) => {
    const btn = document.getElementById(id);
    if (!visible(btn) || btn.disabled) return false;
    btn.click();
    return true;
  };
  const onVetPage = () => visible(document.getElementById("btn-accept"));

  // r: a one-line reason for the reject; Enter saves it (the box's submit), Esc leaves the box
  // and keeps the text (the candidate's draft).
  // Gradio scopes the page's CSS under its container, so panels are shown inline.
  const show = (id, on) => {
    const el = document.getElementById(id);
    if (el) el.style.display = on ? "flex" : "";
  };
  const openReason = () => {
    show("reject-reason-row", true);
    const box = document.querySelector("#reject-reason input, #reject-reason textarea");
    if (box) {
      box.scrollIntoView({ block: "nearest" });
      box.focus();
    }
  };
  const closeReason = () => show("reject-reason-row", false);

  // c: the correct panel, in view with the cursor in the reasoning box.
  window.loupeOpenCorrect = () => {
    closeReason();
    show("correct-panel", true);
    const panel = document.getElementById("correct-panel");
    if (panel) panel.scrollIntoView({ block: "center" });
    const box = document.querySelector("#correct-explanation textarea");
    if (box) box.focus();
  };
  const closeCorrect = () => show("correct-panel", false);

  const shown = (id) => {
    const el = document.getElementById(id);
    return !!el && el.style.display === "flex" && visible(el);
  };
  // ---- drafts: what the expert types on a candidate (comment, a reject's reason, a
  // correction's reasoning and note) is that candidate's, kept in the browser's storage per
  // expert and candidate (id and task) from the first keystroke: a reload, a move or another
  // tab loses none of it, and no text follows the expert to another candidate. A decision's
  // request carries the texts of the candidate it was pressed on (loupeTextsFor); the
  // server's answer says which texts the store now holds (app/pages/vet_texts.py), and
  // those are dropped here.
  const TEXTS = {
    comment: "#vet-comment textarea, #vet-comment input",
    reason: "#reject-reason input, #reject-reason textarea",
    explanation: "#correct-explanation textarea",
    note: "#correct-note textarea, #correct-note input",
  };
  let expert = "";
  const headTask = () => {
    const el = document.querySelector("#vet-header .loupe-head .task b");
    return el ? el.textContent.trim() : "";
  };
  // the candidate on the screen: its id and task (one id may be a candidate of two tasks)
  const headKey = () => {
    const id = headId();
    return id ? `${id}|${headTask()}` : null;
  };
  const store = (() => {
    try {
      return window.localStorage;
    } catch (e) {
      return null; // storage refused: texts live in the boxes only
    }
  })();
  let storeToken = "";
  const slot = (key) => `loupe-draft|${storeToken}|${expert}|${key}`;
  // ---- every write names its candidate (app/pages/vet_target.py): the candidate, task and
  // revision the page shows, and the page's holder id. The id is this tab's: kept across its
  // reloads (sessionStorage), and new for a duplicated tab (it asks the others first), so
  // that two tabs of one expert are never served the same candidate.
  const newTab = () => `t${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  let tabId = "";
  try {
    tabId = window.sessionStorage.getItem("loupe-tab") || "";
  } catch (e) {
    tabId = "";
  }
  const keepTab = () => {
    try {
      window.sessionStorage.setItem("loupe-tab", tabId);
    } catch (e) {
      // storage refused: the id lives as long as the page
    }
  };
  if (!tabId) {
    tabId = newTab();
    keepTab();
  }
  try {
    const nonce = Math.random().toString(36).slice(2);
    const chan = new BroadcastChannel("loupe-tabs");
    chan.onmessage = (e) => {
      const d = e.data || {};
      if (d.ask === tabId && d.nonce !== nonce) chan.postMessage({ taken: tabId, to: d.nonce });
      if (d.taken === tabId && d.to === nonce) {
        tabId = newTab();
        keepTab();
      }
    };
    chan.postMessage({ ask: tabId, nonce });
  } catch (e) {
    // no BroadcastChannel: a duplicated tab shares its id until reloaded
  }
  window.loupeTab = () => tabId;
  // The revision of each candidate's reviews the page has seen (the header says it, and
  // every write's answer): it only grows, so the newest is kept.
  const revs = {};
  const noteRev = (cid, rev) => {
    if (cid === undefined || cid === null || rev === undefined || rev === null || rev === "")
      return;
    const r = Number(rev);
    if (!(cid in revs) || r > revs[cid]) revs[cid] = r;
  };
  window.loupeRev = (v) => {
    try {
      const d = JSON.parse(v || "{}");
      noteRev(d.cid, d.rev);
    } catch (e) {
      // not ours
    }
  };
  // The candidate the header shows: store id, id, task and this expert's decision on it.
  const headData = () => {
    const el = document.querySelector("#vet-header .loupe-head");
    if (!el || !el.dataset || !el.dataset.cid) return null;
    noteRev(el.dataset.cid, el.dataset.rev);
    return { cid: Number(el.dataset.cid), key: headId(), task: el.dataset.task || headTask(),
             saw: el.dataset.mine || "" };
  };
  // Whose values the form's controls (grade, flags, type, a correction's label and step)
  // hold: they come with the server's answer, after the header a key press may have drawn.
  let formKey = null;
  const checkedLabels = (sel) =>
    [...document.querySelectorAll(`${sel} label`)]
      .filter((l) => { const i = l.querySelector("input"); return i && i.checked; })
      .map((l) => l.textContent.trim());
  const formNow = () => {
    const val = (sel) => { const el = document.querySelector(sel); return el ? el.value : ""; };
    const grade = document.querySelector("#vet-grade input:checked");
    const label = document.querySelector("#correct-label input:checked");
    return {
      grade: grade ? grade.value : "",
      issues: checkedLabels("#vet-issues").map((s) => s.charAt(0)).join(""),
      spectype: val("#vet-spectype input, #vet-spectype textarea"),
      label: label ? label.value : "",
      wrong_step: val("#correct-step input") || "none",
    };
  };
  // What a write names, read off the page now; a decision's also carries its texts as the
  // boxes show them (they follow the header at once: `fillTexts`), so it saves what the
  // expert sees, never a text another tab kept for the candidate meanwhile, and the form's
  // controls once they are that candidate's.
  const boxTexts = () => {
    const out = {};
    Object.entries(TEXTS).forEach(([k, sel]) => {
      const box = document.querySelector(sel);
      if (box) out[k] = box.value;
    });
    return out;
  };
  const snap = (decision) => {
    const h = headData();
    if (!h) return null;
    if (!decision) return h;
    const key = `${h.key}|${h.task}`;
    const s = { ...h, ...(savedTexts[key] || {}), ...textsOf(key), ...boxTexts() };
    if (formKey === key) s.form = formNow();
    return s;
  };
  // A decision's target, taken at its key press and sent with its request (which may leave
  // after the next candidate is drawn); marks read the header when they are sent.
  let pendingTarget = null;
  // a write that is not a decision leaves (set where the keys' waits are kept, below)
  let markSent = () => {};
  const targetJson = (s) =>
    JSON.stringify(s ? { ...s, rev: s.cid in revs ? revs[s.cid] : null, tab: tabId } : { tab: tabId });
  window.loupeTarget = (decision, tabOnly) => {
    if (tabOnly) return JSON.stringify({ tab: tabId });
    if (!decision) markSent();
    let s = decision ? pendingTarget : null;
    if (decision) pendingTarget = null;
    if (!s) s = snap(decision);
    return targetJson(s);
  };
  const textsOf = (key) => {
    if (!key || !store) return {};
    try {
      return JSON.parse(store.getItem(slot(key)) || "{}") || {};
    } catch (e) {
      return {};
    }
  };
  const putTexts = (key, texts) => {
    if (!key || !store) return;
    const kept = {};
    Object.keys(texts).forEach((k) => {
      if (typeof texts[k] === "string") kept[k] = texts[k];
    });
    if (Object.keys(kept).length) store.setItem(slot(key), JSON.stringify(kept));
    else store.removeItem(slot(key));
  };
  window.loupeTexts = (key) => textsOf(key || headKey());
  // The saved values of each candidate's boxes, as the server last sent them (vet-form).
  const savedTexts = {};
  let filling = false;
  const fillBox = (sel, value) => {
    const box = document.querySelector(sel);
    if (!box || box.value === value) return;
    filling = true;
    try {
      const proto = Object.getPrototypeOf(box);
      Object.getOwnPropertyDescriptor(proto, "value").set.call(box, value);
      box.dispatchEvent(new Event("input", { bubbles: true }));
    } finally {
      filling = false;
    }
  };
  // The boxes show the candidate's own texts: its draft, else what is saved, else nothing.
  const fillTexts = (key) => {
    const mine = textsOf(key);
    const saved = savedTexts[key] || {};
    Object.entries(TEXTS).forEach(([k, sel]) => {
      fillBox(sel, k in mine ? mine[k] : saved[k] || "");
    });
    // a reason or a correction being written shows its panel again
    const open = (k) => (mine[k] || "").trim() !== "";
    if (open("reason")) show("reject-reason-row", true);
    if (open("explanation") || open("note")) show("correct-panel", true);
  };
  document.addEventListener(
    "input",
    (ev) => {
      if (filling) return;
      const key = headKey();
      const field = Object.keys(TEXTS).find((k) =>
        ev.target && ev.target.matches && ev.target.matches(TEXTS[k])
      );
      if (!field || !key) return;
      const texts = textsOf(key);
      texts[field] = ev.target.value;
      const saved = (savedTexts[key] || {})[field] || "";
      if (texts[field] === saved) delete texts[field]; // back to what is saved
      putTexts(key, texts);
    },
    true
  );
  // j, k: the candidate left, with its texts (an edited comment on a decided one is saved)
  let leftSnap = null;
  window.loupeLeft = () => {
    const s = leftSnap || snap(true);
    leftSnap = null;
    return targetJson(s);
  };
  // The server's answer: the saved values of the shown candidate's boxes, the texts the
  // store now holds (dropped here), an undo's texts (put back in the form).
  window.loupeForm = (v) => {
    let f;
    try {
      f = JSON.parse(v || "{}");
    } catch (e) {
      return;
    }
    if (!f || !f.key) return;
    if (f.expert) expert = f.expert;
    if (f.store) storeToken = f.store;
    noteRev(f.cid, f.rev);
    const key = `${f.key}|${f.task || ""}`;
    formKey = key;
    savedTexts[key] = {
      comment: f.comment || "",
      reason: f.reason || "",
      explanation: f.explanation || "",
      note: f.note || "",
    };
    if (f.saved && f.saved.key) {
      // the texts the decision saved are dropped; one typed since (here or in another tab
      // of the expert's) differs from what was saved and stays
      const done = `${f.saved.key}|${f.saved.task || ""}`;
      const texts = textsOf(done);
      const was = f.saved.texts || {};
      Object.keys(was).forEach((k) => {
        if (k in texts && (texts[k] || "").trim() === (was[k] || "").trim()) delete texts[k];
      });
      putTexts(done, texts);
    }
    if (f.restore) {
      const texts = textsOf(key);
      Object.entries(f.restore).forEach(([k, t]) => {
        if (t) texts[k] = t;
      });
      putTexts(key, texts);
    }
    if (key === headKey()) fillTexts(key);
  };
  // Texts typed on the shown candidate and not saved: a reject's reason, or a correction.
  // While there are some, no key decides the candidate otherwise (an accept would not carry
  // a reject's reason): the status line beside the buttons says why, and the focus stays
  // where it is. They are kept: leaving the candidate, reloading or Esc loses nothing.
  const pending = () => {
    const t = textsOf(headKey());
    const has = (k) => (t[k] || "").trim() !== "";
    if (has("explanation") || has("note")) return "correction";
    if (has("reason")) return "reason";
    return "";
  };
  window.loupeUnsaved = () => !!pending();
  const say = (text) => {
    let el = document.getElementById("loupe-blocked");
    const actions = document.getElementById("vet-actions");
    if (!el && actions) {
      el = document.createElement("div");
      el.id = "loupe-blocked";
      el.setAttribute("role", "status");
      actions.before(el);
    }
    if (el) el.textContent = text;
  };
  window.loupeSay = say;
  const holdText = (key) => {
    const what = pending();
    const where = what === "correction" ? "correct-panel" : "reject-reason-row";
    show(where, true);
    say(
      what === "correction"
        ? `"${key}" not done: a correction is typed on this candidate. Ctrl+Enter in it ` +
            "saves it; empty its boxes to decide otherwise (it stays kept meanwhile)."
        : `"${key}" not done: a reject reason is typed on this candidate. Enter in it ` +
            "saves the reject; empty the box to decide otherwise (it stays kept meanwhile)."
    );
  };

  // Reasoning the model learns is about the spectrum; say so when it reads like a note
  // about the agent (the server says it again when the correction is saved).
  const ABOUT_AGENT = /\b(the agent|the model|mislabel\w*|the ai)\b/i;
  const warnReasoning = () => {
    const box = document.querySelector("#correct-explanation textarea");
    if (!box) return;
    let warn = document.getElementById("correct-warning");
    if (!warn) {
      warn = document.createElement("div");
      warn.id = "correct-warning";
      warn.setAttribute("role", "status");
      box.closest("#correct-explanation").after(warn);
    }
    warn.textContent = ABOUT_AGENT.test(box.value)
      ? "This reads like a note about the agent. The model learns this text as its own " +
        "reasoning: write what you see in the spectrum, in the first person; put notes " +
        "for other experts in the note box."
      : "";
  };
  document.addEventListener("input", (ev) => {
    if (inside(ev, "correct-explanation")) warnReasoning();
  });

  // Shift+R, Shift+C, Shift+S: Prospect's issue flags (bad redshift fit, bad spectral type,
  // bad spectrum) toggled on the shown candidate. Upper case, as in Prospect: the plain
  // letters reject, correct and skip.
  const ISSUES = { R: "R", C: "C", S: "S" };
  const toggleIssue = (flag) => {
    // Gradio's checkboxes carry no value: each is found by its label ("R bad redshift fit")
    const input = [...document.querySelectorAll("#vet-issues label")]
      .filter((l) => l.textContent.trim().startsWith(`${flag} `))
      .map((l) => l.querySelector("input"))[0];
    if (!input) return false;
    input.click();
    return true;
  };

  // True when the click sends the grade to the server (a grade already chosen sends nothing).
  const grade = (n) => {
    const input = document.querySelector(`#vet-grade input[value="${n}"]`);
    if (!input || input.checked) return false;
    input.click();
    return true;
  };

  // Seconds on item: active time only, per candidate (id and task: one id may be a
  // candidate of two tasks, one after the other). The clock runs while the Vet tab is the
  // one shown, the browser tab is visible and the window has the focus, and for IDLE_MS
  // after the last key, click or mouse move; it restarts when the candidate changes.
  const IDLE_MS = 60000;
  let activeMs = 0;
  let lastTick = performance.now();
  let lastInput = lastTick;
  const counting = () =>
    document.visibilityState === "visible" && document.hasFocus() && onVetPage();
  let wasCounting = counting();
  // Each tick adds the time since the last one if the desk was in use then; every change
  // of tab, visibility or focus ticks first, so no interval is counted in the wrong state.
  const tick = () => {
    const now = performance.now();
    const end = Math.min(now, lastInput + IDLE_MS);
    if (wasCounting && end > lastTick) activeMs += end - lastTick;
    lastTick = now;
    wasCounting = counting();
  };
  window.addEventListener("focus", tick, true);
  window.addEventListener("blur", tick, true);
  // a click may switch Gradio's tabs: look again once it has
  document.addEventListener("click", () => setTimeout(tick, 0), true);
  setInterval(tick, 1000);
  const touched = () => {
    tick();
    lastInput = performance.now();
  };
  ["keydown", "mousedown", "mousemove", "wheel", "touchstart"].forEach((t) =>
    document.addEventListener(t, touched, { capture: true, passive: true })
  );
  document.addEventListener("visibilitychange", () => {
    tick();
    if (document.visibilityState === "visible") lastInput = performance.now(); // back at the desk
  });
  // A decision draws the next candidate at its key press, which restarts the clock before
  // the decision's request reads it: the key holds the count for that request.
  let heldActive = null;
  const holdActive = () => {
    tick();
    heldActive = Math.round(activeMs) / 1000;
  };
  window.loupeActive = () => {
    if (heldActive !== null) {
      const v = heldActive;
      heldActive = null;
      return v;
    }
    tick();
    return Math.round(activeMs) / 1000;
  };

  const headId = () => {
    const el = document.querySelector("#vet-header .loupe-head .id");
    return el ? el.textContent.trim() : null;
  };
  let shownId = null;
  // Header and panels change in one event, but Plotly draws after the header is painted:
  // until a panel shows the header's candidate it is marked stale.
  const markStale = () => {
    const id = headId();
    const key = headKey();
    headData(); // its revision noted
    if (key !== shownId) {
      // another candidate (or the same id of another task): its own clock and texts
      tick();
      shownId = key;
      activeMs = 0;
      closeReason();
      closeCorrect();
      say("");
      if (key) fillTexts(key);
      // the dock names the candidate its keys act on (the header may be scrolled away)
      const dock = document.getElementById("vet-dock");
      let on = document.getElementById("loupe-on");
      if (!on && dock) {
        on = document.createElement("div");
        on.id = "loupe-on";
        dock.prepend(on);
      }
      if (on) on.textContent = key ? `on ${id} · ${headTask()}` : "";
    }
    ["vet-global", "vet-zooms"].forEach((box) => {
      const el = document.getElementById(box);
      if (!el) return;
      const gd = el.querySelector(".js-plotly-plot");
      const meta = gd && gd.layout && gd.layout.meta && gd.layout.meta.candidate;
      el.classList.toggle("loupe-stale", !!id && !!gd && meta !== id);
    });
    // -- vet speed: the thoughts and the answer belong to the step panels beside them
    const zooms = document.getElementById("vet-zooms");
    const stale = !!zooms && zooms.classList.contains("loupe-stale");
    ["vet-thoughts", "vet-answer"].forEach((box) => {
      const el = document.getElementById(box);
      if (el) el.classList.toggle("loupe-stale", stale);
    });
  };

  // plotly.js's basic bundle, once its script (in the page's head) has run
  const withPlotly = (fn) => {
    if (window.loupePlotly) fn(window.loupePlotly);
    else (window.loupePlotlyWaiting = window.loupePlotlyWaiting || []).push(fn);
  };
  // as Gradio's plot does: the figure fills its box and follows its size
  const drawFigure = (P, gd, fig) => {
    // the basic bundle has no WebGL traces; vet panels are decimated to SVG sizes anyway
    fig.data.forEach((t) => {
      if (t.type === "scattergl") t.type = "scatter";
    });
    fig.layout.autosize = true;
    fig.layout.margin = { ...(fig.layout.margin || {}), autoexpand: true };
    return P.react(gd, fig.data, fig.layout, { ...(fig.config || {}), responsive: true });
  };
  // -- vet speed: j and k draw the candidate they bring at once. After each move the server
  // hands over what j and k would show (app/pages/vet.py `prefetch`): its header and its
  // whole-spectrum figure, drawn here with Plotly.react before the server's answer, which
  // then replaces them (the same candidate, or another if the queue changed meanwhile).
  // A key that moves or decides is answered in two steps (the move, then what comes after
  // it); keys pressed meanwhile wait for both, in order, so that a decision always applies
  // to the candidate on the screen, and none is dropped.
  let ahead = null;
  let busyUntil = 0;
  // How long a key waits at most for an earlier key's answer. Every request ends the wait
  // when it answers, an error included (its .then calls loupeDone/loupeAhead), so this only
  // bounds a request that never answers; it is long because an overloaded server can take
  // seconds, and a key that stops waiting too early applies before the earlier one (a
  // reject saved without the grade pressed just before it).
  const ANSWER_WAIT_MS = 20000;
  const waiting = [];
  // Decisions pressed and not yet answered by the server, on the status line.
  const DECIDES = ["a", "s", "f"];
  let sending = 0;
  const sent = (n) => {
    sending = Math.max(0, sending + n);
    let el = document.getElementById("loupe-pending");
    if (!el) {
      el = document.createElement("div");
      el.id = "loupe-pending";
      el.setAttribute("role", "status");
      // beside the decision buttons, where the eye is
      (document.getElementById("vet-dock") || document.body).appendChild(el);
    }
    el.textContent = sending ? `saving ${sending} decision${sending > 1 ? "s" : ""}…` : "";
  };
  window.loupeSending = () => sending;
  // Keys that moved or decided: drawn at the press, or waiting for an earlier key's answer
  // (bench/app_latency.py reads it).
  const stats = { now: 0, waited: 0 };
  window.loupeKeyStats = stats;
  // Requests drawn at their key press and not yet sent (sent after the frame that paints
  // what they drew): keys wait for them as for an answer, so none overtakes them.
  let unsent = 0;
  // Requests sent and not yet answered, by the call their answer ends with: a grade's or a
  // flag's with loupeDone, a move's or a decision's with loupeAhead. Keys wait until every
  // one has answered: a grade's answer arriving while an accept is on its way (or the page
  // load's own look-ahead arriving late) once let the next grade go before the accept's
  // answer had cleared the grade box, and the reject after it was saved without the grade.
  let outDone = 0;
  let outAhead = 0;
  // Every write that is not a decision (a grade, a flag, a typed spectral type, the desk's
  // controls, a comment), by key or by mouse, counted as it leaves (loupeTarget) until its
  // answer (loupeDone): a key that writes waits for them, so its request names the revision
  // those writes made, never one they have made stale (a typed type's Enter, then `2`,
  // once sent the grade before the type's answer, and the store refused it).
  let marksOut = 0;
  markSent = () => {
    marksOut += 1;
    busyUntil = Math.max(busyUntil, performance.now() + ANSWER_WAIT_MS);
  };
  const busy = () => {
    if (unsent > 0) return true;
    if (performance.now() >= busyUntil) {
      if (outDone + outAhead + marksOut > 0 || answering > 0) {
        // a request that never answered holds no key past the wait, and is said
        outDone = outAhead = marksOut = 0;
        answering = 0;
        flights.length = 0;
        if (sending) {
          sent(-sending);
          say("A request got no answer from the server: look whether the candidate shows " +
              "your decision (reload the page if it does not).");
        }
      }
      return false;
    }
    return outDone + outAhead + marksOut > 0;
  };
  // A request sent: keys wait for its answer, of this kind ("done" or "ahead").
  const expect = (kind) => {
    busyUntil = performance.now() + ANSWER_WAIT_MS;
    if (kind === "done") outDone += 1;
    else outAhead += 1;
  };
  const answered = () => {
    if (outDone + outAhead + marksOut === 0) busyUntil = 0;
    while (waiting.length && !busy()) waiting.shift()();
  };
  // A request that answers with the session's state (a grade) ends here: keys pressed
  // meanwhile waited, so its answer cannot overwrite a later decision's state.
  // Whether every key pressed has been sent and answered, and the screen shows one
  // candidate throughout (tests and bench/desk_fuzz.py wait for it).
  window.loupeIdle = () =>
    !busy() && waiting.length === 0 && unsent === 0 && sending === 0 &&
    !document.querySelector("#vet-global.loupe-stale, #vet-zooms.loupe-stale");
  window.loupeHeadKey = () => headKey();
  window.loupeDone = () => {
    outDone = Math.max(0, outDone - 1);
    marksOut = Math.max(0, marksOut - 1);
    answered();
  };
  // Whether the last candidate drawn at a key press was brought by a decision (a, r, s, f).
  let decidedDraw = false;
  window.loupeAhead = (v) => {
    if (answering > 0) {
      answering -= 1;
      sent(-1);
      flights.shift(); // the oldest decision on its way has its answer
    }
    try {
      ahead = v ? JSON.parse(v) : null;
    } catch (e) {
      ahead = null;
    }
    // A decision pressed before this answer came has drawn its "next" already: what follows
    // that one is what the next key brings.
    // Only after a decision: j and k leave their candidate undecided, so the server's
    // "after" (the one past a decided "next") may be the very candidate j moved away from.
    const head = headId();
    if (decidedDraw && ahead && ahead.for !== head && ahead.next && ahead.next.key === head)
      ahead = ahead.after ? { for: head, next: ahead.after } : null;
    outAhead = Math.max(0, outAhead - 1);
    answered();
  };
  // The token of what was drawn goes with the key's request (app/ui/vet.py reads it through
  // loupeDrawn): the server's answer then leaves the drawn header and figure as they are.
  let drawnToken = "";
  window.loupeDrawn = () => {
    const t = drawnToken;
    drawnToken = "";
    return t;
  };
  // Decision requests sent and not answered (app/ui/vet.py): each answer, then what comes
  // next, ends one.
  let answering = 0;
  window.loupeDeciding = () => {
    answering += 1;
    return window.loupeDrawn();
  };
  // Whether a key press can draw what it brings now (else it waits for the server's answer).
  const canDraw = (which) => !!(ahead && ahead.for === headId() && ahead[which]);
  const drawAhead = (which, decided = true) => {
    const item = ahead && ahead.for === headId() ? ahead[which] : null;
    // once: the rest comes with the server's answer, but after a decision what follows
    // "next" is kept, so a second decision pressed before that answer is drawn at its key
    // press too (after j the candidate left stays in the queue: "after" may be that one)
    decidedDraw = decided;
    ahead = decided && which === "next" && item && ahead.after
      ? { for: item.key, next: ahead.after }
      : null;
    drawnToken = "";
    const head = document.querySelector("#vet-header .loupe-head");
    const gd = document.querySelector("#vet-global .js-plotly-plot");
    if (!item || !head || !gd || !window.loupePlotly) return;
    const fig = JSON.parse(item.global);
    const box = document.createElement("div");
    box.innerHTML = item.header; // our own server's HTML, as Gradio would set it
    const src = box.querySelector(".loupe-head");
    if (!src) return;
    head.innerHTML = src.innerHTML;
    // what a write names comes with it (data-cid, data-task, data-rev, data-mine)
    Object.keys(head.dataset).forEach((k) => delete head.dataset[k]);
    Object.assign(head.dataset, src.dataset);
    drawFigure(window.loupePlotly, gd, fig);
    drawnToken = item.token;
  };
  // What was handed over is drawn with the display it was built for: a change of the
  // display, the filters or the desk (redshift, template) drops it until the next answer.
  ["input", "change", "click"].forEach((t) =>
    document.addEventListener(
      t,
      (ev) => {
        const el = ev.target && ev.target.closest ? ev.target : null;
        if (!el || el.closest("#vet-actions")) return;
        const desk = '#vet-options, #vet-filters, #desk, [id^="btn-z-"], #btn-template-next';
        if (el.closest(desk)) ahead = null;
      },
      true
    )
  );
  // The vet tab's two plots (app/ui/vet.py): the newest figure handed to each box
  // (window.loupeFigures, "" for none) is drawn with plotly.js's basic bundle once it has
  // loaded (app/ui/assets.py `plotly_head`), as Gradio's own plot draws its figures.
  // The step panels are drawn after the frame that paints the whole spectrum: an answer
  // brings both, and the whole spectrum is what the expert looks at first.
  window.loupeFigure = (box) => {
    const later = (fn) => (box === "vet-zooms" ? requestAnimationFrame(() => setTimeout(fn, 0)) : fn());
    withPlotly((P) => later(() => {
      const figs = window.loupeFigures || {};
      if (!(box in figs)) return;
      const json = figs[box];
      delete figs[box];
      const el = document.getElementById(box);
      const gd = el && el.querySelector(".loupe-plot");
      if (!gd) return;
      // hidden until a figure is drawn (app/ui/assets.py CSS), and when there is none
      if (!json) {
        P.purge(gd);
        el.classList.remove("loupe-drawn");
        return;
      }
      el.classList.add("loupe-drawn"); // first, so that Plotly measures a shown box
      drawFigure(P, gd, JSON.parse(json));
    }));
  };
  Object.keys(window.loupeFigures || {}).forEach(window.loupeFigure);
  // -- end vet speed

  // A comment saved (Enter in its box, or its button): keys wait for its answer, so a
  // decision pressed next finds it saved.
  const commentSent = () => expect("done");
  document.addEventListener(
    "click",
    (ev) => {
      if (ev.target && ev.target.closest && ev.target.closest("#btn-comment")) commentSent();
    },
    true
  );
  // Keys that may repeat while held: moving through candidates. Every other key acts once
  // per press: a held `a` decides the candidate it was pressed on, not those drawn after it.
  const REPEATS = new Set(["j", "k", "[", "]", "{", "}"]);
  // Candidates (id|task) whose decision from this page is on its way, oldest first: a
  // second decision pressed on one (its next is not drawn yet) is not sent.
  const flights = [];
  // A decision: accept, skip, flag (their buttons), a reject with its reason (Enter in the
  // box, or its button) and a correction (Ctrl+Enter, or its button). It names the
  // candidate on the screen at the press (`snap`), with the texts and form kept for it, and
  // draws the next candidate at once where the server handed it over; its request leaves
  // after the frame that paints that, in key order, and a refusal brings the candidate back
  // with the reason.
  const decide = (id, what) => {
    if (!onVetPage()) return;
    const h = headData();
    if (!h) return;
    const key0 = `${h.key}|${h.task}`;
    if (flights.includes(key0)) {
      say(`"${what}" not sent: your decision on ${h.key} · ${h.task} is being ` +
          "saved; the next candidate comes with its answer.");
      return;
    }
    if (!document.getElementById(id)) return;
    flights.push(key0);
    sent(1);
    holdActive();
    const d = { target: null, active: heldActive, token: "" };
    heldActive = null;
    const dropped = (why) => {
      const i = flights.indexOf(key0);
      if (i >= 0) flights.splice(i, 1);
      sent(-1);
      say(`"${what}" not sent: ${why}`);
    };
    // what it saves is read off the page (the form as the expert sees it), then the next
    // candidate is drawn
    const take = () => {
      d.target = snap(true);
      drawAhead("next");
      d.token = drawnToken;
      drawnToken = "";
    };
    const fire = () => {
      const btn = document.getElementById(id);
      if (!btn || btn.disabled) {
        dropped("the page changed before it could be.");
        return;
      }
      pendingTarget = d.target;
      heldActive = d.active;
      drawnToken = d.token;
      btn.click();
    };
    const go = () => {
      expect("ahead"); // until the answer and what follows arrive
      unsent += 1;
      requestAnimationFrame(() =>
        setTimeout(() => {
          unsent -= 1;
          busyUntil = performance.now() + ANSWER_WAIT_MS; // an earlier answer may have ended it
          fire();
        }, 0)
      );
    };
    if (!busy() && !waiting.length) {
      stats.now += 1;
      take();
      go();
    } else if (!waiting.length && canDraw("next")) {
      // nothing pressed before it waits: read the page now, draw the next at once, and send
      // when the earlier answers are in. Where the form's controls are not this candidate's
      // yet (it was drawn at a key press), none is sent and the server saves the candidate's
      // draft, which is what its answer would have put in the form: any key that changes
      // the form meanwhile waits for that answer, and so does a decision after it.
      stats.now += 1;
      take();
      waiting.push(go);
    } else {
      // after what was pressed before it (a grade waiting for its candidate's form), on the
      // candidate it was pressed on, which must still be the one shown
      stats.waited += 1;
      waiting.push(() => {
        if (headKey() !== key0) {
          dropped(`it was pressed on ${h.key} · ${h.task}, which is no longer shown.`);
          return;
        }
        take();
        go();
      });
    }
  };
  // j and k: what they bring is drawn at once where it was handed over; the request names
  // the candidate left (its edited comment is saved, app/pages/vet_texts.py `leave`).
  const move = (id, which) => {
    const go = () => {
      const btn = document.getElementById(id);
      if (!visible(btn) || btn.disabled) return;
      leftSnap = snap(true);
      drawAhead(which, false);
      const token = drawnToken;
      drawnToken = "";
      expect("ahead");
      const send = () => {
        drawnToken = token;
        btn.click();
      };
      if (token) {
        unsent += 1;
        requestAnimationFrame(() =>
          setTimeout(() => {
            unsent -= 1;
            busyUntil = performance.now() + ANSWER_WAIT_MS;
            send();
          }, 0)
        );
      } else send();
    };
    if (!busy()) {
      stats.now += 1;
      go();
    } else {
      stats.waited += 1;
      waiting.push(go);
    }
  };
  // A write that is not a decision (a grade, a flag, the desk's controls, undo): it acts on
  // the candidate it was pressed on, in key order; where it has to wait, it acts only if
  // that candidate is still the one on the screen (else it is dropped, and said). `kind`:
  // how its answer ends the wait of the keys after it.
  const later = (what, act, kind = "done") => {
    const on = headKey();
    const run = () => {
      if (headKey() !== on) {
        say(`"${what}" not done: it was pressed on ${on ? on.replace("|", " · ") : "nothing"}, ` +
            "which is no longer shown.");
        return;
      }
      if (act()) expect(kind);
    };
    // At once where the form on the screen is the candidate's (an earlier decision on
    // another candidate may still be on its way: its answer does not touch this form);
    // else after the answer that brings the form, and after what was pressed before.
    // A write of this page not answered yet (on any candidate) comes first: its answer
    // brings the revision this one must name.
    if (!waiting.length && outDone + marksOut === 0 && (formKey === on || !busy())) run();
    else waiting.push(run);
  };
  window.loupeDecide = decide;
  // choosing the task of an id that is a candidate of several brings that candidate
  document.addEventListener(
    "change",
    (ev) => {
      if (ev.isTrusted && ev.target && ev.target.closest && ev.target.closest("#jump-task"))
        expect("ahead");
    },
    true
  );
  // What each key does on the vet page; the buttons' clicks take the same paths.
  const vetKey = (key, shift) => {
    if (shift && ISSUES[key]) {
      // a flag decides nothing: it is kept with the decision (or added to it)
      later(`Shift+${key}`, () => toggleIssue(ISSUES[key]));
      return;
    }
    const k = key.toLowerCase();
    if (pending() && DECIDES.includes(k)) {
      // a reason or a correction typed here is saved (or emptied) first; said by the buttons
      holdText(k);
      return;
    }
    say("");
    if (k === "r") {
      if (headData()) openReason();
      return;
    }
    if (k === "c") {
      // The panel is filled by the answer for the candidate on the screen: wait for it.
      if (busy()) waiting.push(() => window.loupeOpenCorrect());
      else window.loupeOpenCorrect();
      return;
    }
    if (["1", "2", "3", "4"].includes(k)) {
      later(k, () => grade(k));
      return;
    }
    if (DECIDES.includes(k)) decide(KEYS[k], k);
    else if (k === "j" || k === "k") move(KEYS[k], k === "j" ? "next" : "prev");
    else if (k === "u") later("u", () => press(KEYS.u), "ahead");
  };
  const saveReject = () => {
    // the focus leaves the box at once: the next key is a key, not the next reason's text
    const box = document.activeElement;
    if (box && box.closest && box.closest("#reject-reason-row")) box.blur();
    setTimeout(closeReason, 0);
    decide("btn-save-reject", "Enter");
  };
  const saveCorrection = () => {
    // the focus leaves the boxes at once: a key pressed during the round trip is a key
    const box = document.activeElement;
    if (box && box.closest && box.closest("#correct-panel")) box.blur();
    closeCorrect();
    decide("btn-save-correct", "Ctrl+Enter");
  };
  document.addEventListener(
    "keydown",
    (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && inside(ev, "vet-comment")) commentSent();
      // a jump brings another candidate: keys pressed meanwhile wait for it
      if (ev.key === "Enter" && inside(ev, "jump-id")) expect("ahead");
      if (ev.key === "Enter" && !ev.shiftKey && inside(ev, "vet-spectype")) {
        // the type is saved as the box is left: one write, where Enter and then the blur
        // sent it twice (the second then named the revision the first had made stale)
        ev.preventDefault();
        if (typing(ev)) ev.target.blur();
        return;
      }
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && inside(ev, "correct-panel")) {
        ev.preventDefault();
        if (!ev.repeat) saveCorrection();
        return;
      }
      if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.key === "Escape" && (inside(ev, "reject-reason") || shown("reject-reason-row"))) {
        // Esc leaves the box: nothing is decided, and the reason stays the candidate's draft
        // (Enter saves the reject, with or without a reason)
        ev.preventDefault();
        if (typing(ev)) ev.target.blur();
        closeReason();
        return;
      }
      if (ev.key === "Enter" && inside(ev, "reject-reason")) {
        // a decision like a/s/f, named at the press; Gradio's own submit (on keypress, which
        // a prevented keydown never sends) is for API callers
        ev.preventDefault();
        if (!ev.repeat) saveReject();
        return;
      }
      if (ev.key === "Escape" && (inside(ev, "correct-panel") || shown("correct-panel"))) {
        ev.preventDefault();
        if (typing(ev)) ev.target.blur();
        closeCorrect();
        return;
      }
      if (ev.key === "Escape") {
        toggleCheat(false);
        if (typing(ev)) ev.target.blur();
        return;
      }
      if (typing(ev)) return;
      if (ev.key === "?") {
        toggleCheat();
        ev.preventDefault();
        return;
      }
      if (!onVetPage()) return;
      const key = ev.key;
      const mine = (ev.shiftKey && ISSUES[key]) || "rcjkasfu1234".includes(key.toLowerCase());
      if (!mine || key.length !== 1) return;
      ev.preventDefault();
      if (ev.repeat && !REPEATS.has(key.toLowerCase())) return; // held: acts once
      vetKey(key, ev.shiftKey);
    },
    true
  );
  // The buttons take their keys' paths (a click is a key press): Reject opens the reason
  // box, a decision is named at the click and drawn ahead, and a control clicked while an
  // earlier answer is on its way waits for it, then acts on the candidate it was clicked
  // on if that is still shown. Clicks made by this script itself (`press`) pass.
  const BUTTON_KEYS = Object.fromEntries(Object.entries(KEYS).map(([k, id]) => [id, k]));
  const CONTROLS = "#vet-dock, #correct-panel, #desk, #vet-options, #btn-comment, " +
    '[id^="btn-z-"], #btn-template-next, #vet-filters';
  document.addEventListener(
    "click",
    (ev) => {
      if (!ev.isTrusted || !onVetPage()) return;
      const el = ev.target && ev.target.closest ? ev.target : null;
      if (!el) return;
      if (el.closest("#btn-jump")) {
        expect("ahead"); // as Enter in the id box
        return;
      }
      const btn = el.closest("button[id]");
      const stop = () => {
        ev.preventDefault();
        ev.stopImmediatePropagation();
      };
      if (btn && BUTTON_KEYS[btn.id]) {
        stop();
        vetKey(BUTTON_KEYS[btn.id], false);
        return;
      }
      if (btn && btn.id === "btn-save-reject") {
        stop();
        saveReject();
        return;
      }
      if (btn && btn.id === "btn-save-correct") {
        stop();
        saveCorrection();
        return;
      }
      const ctl = el.closest(CONTROLS);
      if (ctl && busy() && !el.closest("textarea, input[type=text], input[type=number]")) {
        stop();
        const target = ev.target;
        later("click", () => {
          target.click();
          return false; // its own event ends its wait (a grade's, a flag's .then)
        });
      }
    },
    true
  );
  // ---- end vet desk ----

  // Author page: dragging a horizontal selection on the global plot fills the range boxes.
  const setBox = (elemId, value) => {
    const input = document.querySelector(`#${elemId} input`);
    if (!input) return;
    const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set;
    setter.call(input, String(Math.round(value * 10) / 10));
    input.dispatchEvent(new Event("input", { bubbles: true }));
    input.dispatchEvent(new Event("change", { bubbles: true }));
  };

  const onSelected = (ev) => {
    if (!ev || !ev.range || !ev.range.x) return;
    const [lo, hi] = ev.range.x;
    setBox("author-lo", Math.min(lo, hi));
    setBox("author-hi", Math.max(lo, hi));
  };

  // A redraw (Plotly.newPlot) drops listeners, so check the emitter, not a flag.
  const hookPlot = (gd) => {
    if (typeof gd.on !== "function") return;
    const ev = gd._ev;
    if (ev && ev.listeners && ev.listeners("plotly_selected").includes(onSelected)) return;
    gd.on("plotly_selected", onSelected);
  };

  const scan = () => {
    document.querySelectorAll("#author-global .js-plotly-plot").forEach(hookPlot);
    markStale();
  };
  new MutationObserver(scan).observe(document.documentElement, {
    childList: true,
    subtree: true,
  });

  // -- desk: redshift, templates, normalised view, all markers, arms, sky (app/pages/desk.py). Keys
  // press the desk's own controls, so a key does what a click does; off while typing.
  const DESK = {
    "[": "btn-z-down",
    "]": "btn-z-up",
    "{": "btn-z-down-large",
    "}": "btn-z-up-large",
    "=": "btn-z-adopt",
    t: "btn-template-next",
  };
  const TOGGLES = { n: "desk-normalise", m: "desk-all-markers", b: "desk-arms", y: "desk-sky" };

  document.addEventListener(
    "keydown",
    (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev)) return;
      const key = ev.key;
      if (key === "0" && window.loupePlotly) {
        // every plot of the page back to its full range
        const plots = document.querySelectorAll("#vet-global .js-plotly-plot, #vet-zooms .js-plotly-plot");
        if (!plots.length || !visible(plots[0])) return;
        ev.preventDefault();
        plots.forEach((gd) => {
          // as Plotly's own "reset axes": the range each axis was drawn with
          const axes = {};
          const full = gd._fullLayout || {};
          Object.keys(full).forEach((k) => {
            if (!/^[xy]axis\d*$/.test(k)) return;
            const ax = full[k];
            if (ax._rangeInitial0 !== undefined)
              axes[`${k}.range`] = [ax._rangeInitial0, ax._rangeInitial1];
            else if (ax._rangeInitial) axes[`${k}.range`] = ax._rangeInitial.slice();
            else if (ax._autorangeInitial !== undefined) axes[`${k}.autorange`] = ax._autorangeInitial;
            else axes[`${k}.autorange`] = true;
          });
          window.loupePlotly.relayout(gd, axes);
        });
        return;
      }
      if (key === "z") {
        // Focus the redshift box and select its value: type "1.27", Enter, and it is drawn.
        const box = document.querySelector("#desk-z input[type=number]");
        if (!visible(box)) return;
        ev.preventDefault();
        box.focus();
        box.select();
        return;
      }
      // each redraws the candidate (a write where it sets its redshift or template): it waits
      // for earlier answers and acts on the candidate it was pressed on, once per press
      const toggle = TOGGLES[key];
      if (toggle) {
        const box = document.querySelector(`#${toggle} input[type=checkbox]`);
        if (!visible(box)) return;
        ev.preventDefault();
        if (!ev.repeat) later(key, () => { box.click(); return true; });
        return;
      }
      const id = DESK[key];
      if (!id) return;
      const btn = document.getElementById(id);
      if (!visible(btn) || btn.disabled) return;
      ev.preventDefault();
      if (ev.repeat && !REPEATS.has(key)) return;
      later(key, () => { btn.click(); return true; });
    },
    true
  );

  // The redshift box talks to the server by the desk's own event only: Gradio's slider sends
  // every keystroke ("1", "1.2", ...) and a release on blur, and those calls raced the typed
  // value. So the box's input/change/blur never reach the slider; Enter (or a change: the
  // spinner, leaving the box) puts the text in window.loupeTypedZ and presses the hidden
  // button, whose call carries it (app/ui/vet.py, `z_typed_go`).
  const zBox = (t) =>
    !!t && !!t.closest && !!t.closest("#desk-z") &&
    (t.getAttribute("type") || "").toLowerCase() === "number";
  let zSent = null;
  const commitZ = (box) => {
    const go = document.getElementById("btn-z-typed");
    if (!go || box.value === zSent) return;
    zSent = box.value;
    const value = box.value;
    later("z", () => {
      window.loupeTypedZ = value;
      go.click();
      return true;
    });
  };
  // After the server's answer to a typed z: the box shows the z in force (the slider's),
  // so a refused value does not stay in it as if it were recorded.
  window.loupeZBack = () => {
    const range = document.querySelector("#desk-z input[type=range]");
    const box = document.querySelector("#desk-z input[type=number]");
    if (range && box && document.activeElement !== box) box.value = range.value;
  };
  document.addEventListener("focusin", (ev) => { if (zBox(ev.target)) zSent = null; }, true);
  for (const type of ["input", "blur", "pointerup", "change"]) {
    document.addEventListener(
      type,
      (ev) => {
        if (!zBox(ev.target)) return;
        ev.stopImmediatePropagation();
        if (type === "change") commitZ(ev.target);
      },
      true
    );
  }
  document.addEventListener(
    "keydown",
    (ev) => {
      if (ev.key !== "Enter" || !zBox(ev.target)) return;
      ev.preventDefault();
      ev.stopImmediatePropagation();
      commitZ(ev.target);
      ev.target.blur();
    },
    true
  );
  // an answer that came before this script ran
  if (window.loupeFormWaiting) window.loupeForm(window.loupeFormWaiting);
})();
