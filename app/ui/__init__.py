"""The Gradio page: vet, author, dashboard, export and experts tabs.

Layout and wiring only; every callback is a one-line call into a page module (`app.pages`),
which does the work on plain values. Each tab's module here (`app.ui.vet`, ...) lays out its
components and wires their events; `build` puts the tabs together.
"""

from __future__ import annotations

import gradio as gr

from app import context, views
from app.ui import author, dashboard, experts, export, vet
from app.ui.assets import CHEATSHEET, CSS, KEYS_JS

__all__ = ["CSS", "KEYS_JS", "build"]


def build(ctx: context.Context) -> gr.Blocks:
    with gr.Blocks(title="Loupe") as demo:
        gr.HTML(CHEATSHEET)
        state = gr.State(views.new_state())
        who = gr.Markdown(elem_id="whoami")
        with gr.Tabs():
            tabs = [
                vet.tab(ctx, state, who),
                author.tab(ctx, state),
                dashboard.tab(ctx),
                export.tab(ctx),
                experts.tab(ctx),
            ]
        # Events are wired once every tab exists, in the order above.
        for wire in tabs:
            wire(demo)
    return demo
