"""What the page carries besides its components: the stylesheet, the keyboard script
(keys.js) and its cheat sheet, and the script tag of the Plotly bundle the vet tab draws with."""

from __future__ import annotations

import functools
import gzip
from pathlib import Path

# keys.js, then the vet toolbar's options panel (its button and `o`)
KEYS_JS = (Path(__file__).parent.parent / "keys.js").read_text() + (
    Path(__file__).parent.parent / "static" / "toolbar.js"
).read_text()

CSS = """
#loupe-cheatsheet {display:none; position:fixed; top:12%; left:50%; transform:translateX(-50%);
  z-index:1000; background:#fff; border:1px solid #999; border-radius:8px; padding:16px 24px;
  box-shadow:0 8px 30px rgba(0,0,0,.25); font-size:15px; min-width:320px;
  max-height:86vh; overflow-y:auto; overscroll-behavior:contain}
#loupe-cheatsheet kbd {display:inline-block; min-width:1.6em; text-align:center; padding:1px 5px;
  border:1px solid #aaa; border-radius:4px; background:#f6f6f6; font-family:monospace}
.loupe-head {display:flex; flex-wrap:wrap; gap:18px; align-items:center; font-size:14px}
.loupe-head .id {font-size:18px; font-weight:700}
.loupe-conf {display:inline-block; width:220px; height:16px; border-radius:8px; position:relative;
  background:linear-gradient(90deg,#c1121f 0%,#f4a261 50%,#2a9d8f 100%)}
.loupe-conf .tick {position:absolute; top:-4px; width:4px; height:24px; background:#111;
  border-radius:2px}
.loupe-verdict {font-weight:700; padding:2px 8px; border-radius:4px; color:#fff}
.loupe-verdict.YES {background:#2a9d8f} .loupe-verdict.NO {background:#c1121f}
.loupe-verdict.none {background:#777}
.loupe-thought {font-size:14px; line-height:1.45; max-height:260px; overflow:auto}
.loupe-note {font-size:14px; line-height:1.45; overflow:auto; box-sizing:border-box;
  padding:4px 10px 0 4px; border-top:1px solid #e4e7ee}
.loupe-note:first-child {border-top:none}
.loupe-note p {margin:4px 0}
.loupe-note details {color:#555; font-size:13px}
.loupe-note summary {cursor:pointer}
.loupe-model-image {display:block; max-width:100%; max-height:300px; margin-top:6px;
  border:1px solid #ddd}
.loupe-answer {border-left:4px solid #1f3b73; padding:6px 12px; background:#f5f7fb}
#vet-actions button {min-width:90px}
#loupe-pending {position:fixed; left:12px; bottom:8px; font-size:13px; color:#555; z-index:50}
#loupe-pending:empty {display:none}
/* -- the vet page's layout (app/ui/vet.py): the candidate's spectrum first. The page's top
   is kept short, the filters and display options fold into a one-row toolbar (its panel
   opens with `o`), and the dock at the window's foot is three thin rows, so a laptop's
   768 px show the header and the whole spectrum above the dock without scrolling
   (tests/test_browser_layout.py reads the boxes) -- */
.gradio-container .main {padding-top:6px !important}
.contain > .column > .block:has(> .html-container > .prose > #loupe-cheatsheet) {position:absolute !important; height:0;
  overflow:visible !important; padding:0 !important; border:none !important}
#whoami {font-size:13px}
#whoami p {margin:0}
#vet-toolbar {align-items:center; gap:8px !important; flex-wrap:nowrap}
#vet-toolbar > .form, #vet-toolbar .form {border:none !important; background:none !important;
  box-shadow:none !important; gap:0 !important}
#vet-toolbar .block {padding:2px 6px !important; border:none !important;
  box-shadow:none !important; background:none !important}
#vet-toolbar #btn-options {white-space:nowrap}
#vet-options-summary {flex:1 1 0 !important; min-width:0 !important; font-size:13px;
  color:#444; overflow:hidden}
.loupe-options-summary {white-space:nowrap; overflow:hidden; text-overflow:ellipsis}
#vet-options {flex:0 0 auto !important; width:auto !important; gap:0 !important;
  flex-wrap:nowrap}
#vet-options .form {flex:0 0 auto !important; min-width:0 !important; flex-wrap:nowrap !important}
#vet-options .block {flex:0 0 auto !important; min-width:0 !important; width:auto !important}
#vet-options label {font-size:13px; white-space:nowrap; gap:4px}
#vet-toolbar #jump-id input {padding:3px 8px; font-size:13px}
/* a narrow window wraps the toolbar and the desk's row rather than cutting them off */
@media (max-width: 1250px) {#vet-toolbar, #desk, #vet-options {flex-wrap:wrap !important}}
#vet-options-panel {display:none !important}
#vet-options-panel.loupe-open {display:flex !important; border:1px solid #d0d4dc;
  border-radius:8px; padding:6px 8px; background:#fafbfd}
#vet-header .loupe-head {padding:2px 0}
#desk {align-items:center; gap:6px !important; flex-wrap:nowrap}
#desk .block {padding:2px 6px !important}
#desk .form {gap:0 !important}
#desk button {white-space:nowrap}
#desk-z-info-box {flex:0 1 auto !important; min-width:170px !important; max-width:300px;
  font-size:13px}
#desk-z-info-box .z-note {color:#666}
#desk-z input[type=number] {width:6.5em}
#desk-z span[data-testid="block-info"], #desk-template span[data-testid="block-info"]
  {font-size:12px !important; margin-bottom:0 !important}
/* the vet dock: status line, decision buttons, then grade, flags and spectral type in one
   row with their labels beside them; a reject's reason below them while it is typed */
#vet-dock {position:fixed; left:0; right:0; bottom:0; z-index:40; gap:2px !important;
  background:var(--background-fill-primary, #fff); border-top:1px solid #d0d4dc;
  box-shadow:0 -4px 14px rgba(0,0,0,.08); padding:3px 16px 4px !important;
  max-height:50vh; overflow-y:auto}
#vet-dock > * {margin:0 !important}
#vet-dock .block {padding:0 6px !important}
#vet-dock .form {gap:0 !important; border:none !important; box-shadow:none !important}
#vet-dock button {padding:3px 8px !important; min-height:0 !important}
#vet-dock #vet-actions {gap:6px !important}
#vet-dock label, #vet-dock span[data-testid="block-info"] {font-size:13px !important}
#vet-dock #vet-marks {align-items:center; flex-wrap:nowrap}
#vet-dock #vet-marks > .form {flex-wrap:nowrap !important; align-items:center}
#vet-dock #vet-grade, #vet-dock #vet-issues {display:flex; align-items:center; gap:6px;
  flex-wrap:nowrap; flex:0 0 auto !important; width:auto !important;
  min-width:max-content !important}
#vet-dock #vet-grade > span[data-testid="block-info"],
#vet-dock #vet-issues > span[data-testid="block-info"] {margin:0 !important;
  white-space:nowrap}
#vet-dock #vet-grade .wrap, #vet-dock #vet-issues .wrap {flex-wrap:nowrap; gap:4px !important}
#vet-dock fieldset label {padding:1px 7px !important; white-space:nowrap}
#vet-dock #vet-spectype label.container {display:flex; align-items:center; gap:6px}
#vet-dock #vet-spectype span[data-testid="block-info"] {margin:0 !important;
  white-space:nowrap}
#vet-dock #vet-spectype input {padding:2px 6px}
#vet-dock #reject-reason input {padding:3px 8px}
#vet-dock #vet-message {min-height:1.3em; font-size:14px}
#vet-dock #vet-message p {margin:0}
#loupe-blocked {color:#9a3412; font-weight:600; font-size:14px}
#vet-dock > #loupe-on {position:absolute !important; right:20px !important; left:auto !important;
  top:4px !important; width:auto !important; font-size:13px; color:#1f3b73; font-weight:600}
#loupe-on:empty {display:none}
#loupe-blocked:empty {display:none}
#vet-dock #loupe-pending {position:static}
/* room below the page's end for the dock */
#vet-steps ~ * :last-child {scroll-margin-bottom:220px}
.gradio-container {padding-bottom:230px !important}
/* -- author: the audit view (app.pages.author.audit_view) -- */
.loupe-audit-step {display:grid; grid-template-columns:minmax(0,2fr) minmax(0,3fr); gap:14px;
  align-items:start; padding:8px 0; border-top:1px solid #e4e7ee; font-size:14px}
.loupe-audit-image {display:block; max-width:100%; border:1px solid #ddd}
/* -- end author: audit view -- */
/* -- vet page: desk (grade, undo, reason, correct panel, stale panels) -- */
#correct-panel, #reject-reason-row {display:none}
#correct-warning {color:#9a3412}
#correct-warning:empty {display:none}
.loupe-stale {opacity:.25; transition:opacity 60ms}
.loupe-grade b {padding:1px 6px; border-radius:4px; background:#1f3b73; color:#fff}
/* the vet plots' boxes (keys.js loupeFigure): shown once a figure is drawn in them */
#vet-global:not(.loupe-drawn), #vet-zooms:not(.loupe-drawn) {display:none}
"""

CHEATSHEET = """
<div id="loupe-cheatsheet" role="dialog" aria-label="Keyboard shortcuts">
<h3 style="margin-top:0">Keyboard</h3>
<table>
<tr><td><kbd>a</kbd></td><td>accept the agent's verdict</td></tr>
<tr><td><kbd>r</kbd></td><td>reject it (the label flips): type what the model should have
concluded, <kbd>Enter</kbd> saves (the reason may be empty), <kbd>Esc</kbd> leaves the box
(the reason stays on the candidate)</td></tr>
<tr><td><kbd>c</kbd></td><td>correct: choose the label, write the reasoning, mark the wrong step;
<kbd>Ctrl</kbd>+<kbd>Enter</kbd> saves, <kbd>Esc</kbd> leaves the panel (the text stays)</td></tr>
<tr><td><kbd>1</kbd>-<kbd>4</kbd></td><td>grade: 4 certain, 3 probable, 2 possible, 1 a guess</td></tr>
<tr><td><kbd>Shift</kbd>+<kbd>R</kbd> / <kbd>C</kbd> / <kbd>S</kbd></td><td>Prospect's issue
flags: bad redshift fit / bad spectral type / bad spectrum (toggle; kept with the decision)</td></tr>
<tr><td><kbd>u</kbd></td><td>undo this tab's last decision (kept in its history) and show it again, its values back in the form</td></tr>
<tr><td><kbd>s</kbd></td><td>skip (recorded)</td></tr>
<tr><td><kbd>f</kbd></td><td>flag for discussion</td></tr>
<tr><td><kbd>j</kbd> / <kbd>k</kbd></td><td>next / previous candidate (records nothing)</td></tr>
<tr><td><kbd>z</kbd></td><td>type a redshift (<kbd>Enter</kbd> draws it; -0.01 to 7)</td></tr>
<tr><td><kbd>[</kbd> <kbd>]</kbd> / <kbd>{</kbd> <kbd>}</kbd></td><td>nudge the redshift by
0.001 / 0.05</td></tr>
<tr><td><kbd>=</kbd></td><td>adopt the agent's redshift</td></tr>
<tr><td><kbd>t</kbd></td><td>next template (the task's own classes first); it is your
spectral type for the candidate (or type one in the box)</td></tr>
<tr><td><kbd>n</kbd></td><td>continuum-normalised view</td></tr>
<tr><td><kbd>m</kbd></td><td>all line markers, not only the task's</td></tr>
<tr><td><kbd>b</kbd></td><td>the file's arms before merging (DESI B/R/Z, in Prospect's colours)</td></tr>
<tr><td><kbd>y</kbd></td><td>the file's sky spectrum, as a faint line (SDSS, DESI)</td></tr>
<tr><td><kbd>0</kbd></td><td>reset the zoom of every plot</td></tr>
<tr><td><kbd>o</kbd></td><td>open or close the queue's filters and the display options
(kept for you: the page opens with them)</td></tr>
<tr><td><kbd>?</kbd></td><td>show or hide this sheet</td></tr>
<tr><td><kbd>Esc</kbd></td><td>close it, leave a text box</td></tr>
</table>
<p style="color:#555;margin-bottom:0">Every decision is saved at once. Keys are off while you
type, and while a correction or a reason holds unsaved text no key decides (moving on asks
first). Seconds on an item count active time only: the clock pauses while the tab is hidden or
after 60 s without a key, click or mouse move.</p>
</div>
"""


STATIC = Path(__file__).parent.parent / "static"
# plotly.js's basic bundle, vendored (app/static/README.md); served at /loupe-static
PLOTLY_BASIC = "plotly-basic-3.7.0.min.js"


def plotly_head() -> str:
    """-- vet speed: the vet tab's two plots are drawn by keys.js with plotly.js's basic
    bundle, fetched from the page's head while Gradio builds the page. Gradio's `gr.Plot`
    would load the full bundle (4.6 MB, over a second of the browser's main thread on a
    first visit) only once the first plot had a value. The bundle sets `window.Plotly`, as
    Gradio's does when another tab's plot loads it: the vet tab keeps its own reference."""
    return (
        f'<script async src="loupe-static/{PLOTLY_BASIC}" '
        'onload="window.loupePlotly = window.Plotly; '
        '(window.loupePlotlyWaiting || []).forEach((f) => f(window.loupePlotly));"></script>'
    )


@functools.cache
def _script(name: str) -> tuple[bytes, bytes]:
    raw = (STATIC / name).read_bytes()
    return raw, gzip.compress(raw, compresslevel=9, mtime=0)


def script_response(name: str, accept_encoding: str):
    """The vendored script `name` (only PLOTLY_BASIC is served), gzipped once and kept
    (1.1 MB -> about 0.35 MB on the wire) where the browser accepts it. Its name carries its
    version, so browsers keep it for good and a returning expert does not ask again."""
    from fastapi import Response

    if name != PLOTLY_BASIC:
        return Response(status_code=404)
    raw, packed = _script(name)
    headers = {"Cache-Control": "public, max-age=31536000, immutable", "Vary": "Accept-Encoding"}
    if "gzip" in accept_encoding.lower():
        headers["Content-Encoding"] = "gzip"
        raw = packed
    return Response(raw, media_type="text/javascript; charset=utf-8", headers=headers)
