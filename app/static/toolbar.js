// The vet toolbar (app/ui/vet.py): its button, or `o`, opens and closes the panel of the
// queue's filters and the display options; Esc closes it. Opening it is the page's own
// business (no server call): the panel's choices are kept per expert when changed.
(() => {
  if (window.__loupeToolbar) return;
  window.__loupeToolbar = true;
  const panel = () => document.getElementById("vet-options-panel");
  const button = () => document.getElementById("btn-options");
  const isOpen = () => !!panel() && panel().classList.contains("loupe-open");
  const setOpen = (on) => {
    const el = panel();
    if (!el) return;
    el.classList.toggle("loupe-open", on);
    const btn = button();
    if (btn) {
      btn.setAttribute("aria-expanded", on ? "true" : "false");
      btn.textContent = btn.textContent.replace(on ? "▾" : "▴", on ? "▴" : "▾");
    }
  };
  window.loupeOptions = (on) => setOpen(on === undefined ? !isOpen() : on);
  document.addEventListener(
    "click",
    (ev) => {
      const t = ev.target;
      if (t && t.closest && t.closest("#btn-options")) window.loupeOptions();
    },
    true
  );
  const typing = (t) => {
    if (!t) return false;
    if (t.isContentEditable) return true;
    const tag = (t.tagName || "").toLowerCase();
    if (tag === "textarea" || tag === "select") return true;
    if (tag !== "input") return false;
    const type = (t.getAttribute("type") || "text").toLowerCase();
    return !["checkbox", "radio", "button", "range", "submit"].includes(type);
  };
  document.addEventListener(
    "keydown",
    (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.key === "Escape" && isOpen()) {
        const t = ev.target;
        // a dropdown open in the panel closes first; the next Esc closes the panel
        if (t && t.closest && t.closest("#vet-options-panel") && typing(t)) return;
        setOpen(false);
        return;
      }
      if (ev.key !== "o" || typing(ev.target)) return;
      const btn = button();
      if (!btn || btn.offsetParent === null) return; // only on the Vet tab
      ev.preventDefault();
      window.loupeOptions();
    },
    true
  );
})();
