// Keyboard-first vetting. Keys press the page's own buttons (found by elem_id), so a key
// does exactly what a click does. Keys are ignored while the expert types in a text field.
(() => {
  if (window.__loupeKeys) return;
  window.__loupeKeys = true;

  const KEYS = {
    a: "btn-accept",
    r: "btn-reject",
    c: "btn-correct",
    s: "btn-skip",
    f: "btn-flag",
    j: "btn-next",
    k: "btn-prev",
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

  document.addEventListener(
    "keydown",
    (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
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
      const id = KEYS[ev.key.toLowerCase()];
      if (!id) return;
      const btn = document.getElementById(id);
      // Only on the vet page: hidden buttons (another tab is open) are not pressed.
      if (!visible(btn) || btn.disabled) return;
      ev.preventDefault();
      btn.click();
      if (ev.key.toLowerCase() === "c") {
        // Correct opens its panel; put the cursor where the expert will type.
        setTimeout(() => {
          const box = document.querySelector("#correct-explanation textarea");
          if (box) box.focus();
        }, 150);
      }
    },
    true
  );

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
  };
  new MutationObserver(scan).observe(document.documentElement, {
    childList: true,
    subtree: true,
  });
})();

// -- desk: redshift, templates, normalised view, all markers (app/pages/desk.py). Keys press
// the desk's own controls, so a key does what a click does; off while typing, as above.
(() => {
  if (window.__loupeDeskKeys) return;
  window.__loupeDeskKeys = true;

  const DESK = {
    "[": "btn-z-down",
    "]": "btn-z-up",
    "{": "btn-z-down-large",
    "}": "btn-z-up-large",
    "=": "btn-z-adopt",
    t: "btn-template-next",
  };
  const TOGGLES = { n: "desk-normalise", m: "desk-all-markers" };

  const typingIn = (t) => {
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
  const shown = (el) => !!el && el.offsetParent !== null;

  document.addEventListener(
    "keydown",
    (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.altKey || typingIn(ev.target)) return;
      const key = ev.key;
      if (key === "z") {
        // Focus the redshift box and select its value: type "1.27", Enter, and it is drawn.
        const box = document.querySelector("#desk-z input[type=number]");
        if (!shown(box)) return;
        ev.preventDefault();
        box.focus();
        box.select();
        return;
      }
      const toggle = TOGGLES[key];
      if (toggle) {
        const box = document.querySelector(`#${toggle} input[type=checkbox]`);
        if (!shown(box)) return;
        ev.preventDefault();
        box.click();
        return;
      }
      const id = DESK[key];
      if (!id) return;
      const btn = document.getElementById(id);
      if (!shown(btn) || btn.disabled) return;
      ev.preventDefault();
      btn.click();
    },
    true
  );

  // The redshift box talks to the server by the desk's own event only: Gradio's slider sends
  // every keystroke ("1", "1.2", ...) and a release on blur, and those calls raced the typed
  // value. So the box's input/change/blur never reach the slider; Enter (or a change: the
  // spinner, leaving the box) puts the text in window.loupeTypedZ and presses the hidden
  // button, whose call carries it (app/ui.py, `z_typed_go`).
  const zBox = (t) =>
    !!t && !!t.closest && !!t.closest("#desk-z") &&
    (t.getAttribute("type") || "").toLowerCase() === "number";
  let zSent = null;
  const commitZ = (box) => {
    const go = document.getElementById("btn-z-typed");
    if (!go || box.value === zSent) return;
    zSent = box.value;
    window.loupeTypedZ = box.value;
    go.click();
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
})();
