"""The export tab: training-data batches (sft, rl, pairs), the VI CSV download and the
catalogue (each task's YES list with its estimated precision)."""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from app import context
from app.pages import export as export_page


def tab(ctx: context.Context) -> Callable[[gr.Blocks], None]:
    """The tab's components; returns the function that wires their events, which
    `app.ui.build` calls once every tab is laid out (so the events keep their order)."""
    with gr.Tab("Export", id="export") as e_tab:
        e_note = gr.Markdown("Exports include only what is new since the last batch of that "
                             "kind.", elem_id="export-note")  # fmt: skip
        with gr.Row(elem_id="export-controls", visible=False) as e_controls:
            e_kind = gr.Radio(["sft", "rl", "pairs"], value="sft", label="export")
            e_go = gr.Button("Run export", variant="primary", elem_id="btn-export")
        e_counts = gr.Markdown(visible=False)
        e_manifest = gr.JSON(label="manifest", visible=False)
        # Downloads are links to /download/TOKEN (app.downloads): no export file is handed
        # to a Gradio component, whose file route would serve it by its path.
        e_files = gr.HTML(label="download", visible=False, elem_id="export-files")
        # -- VI CSV download (annotate.export.vi)
        with gr.Row(elem_id="export-vi-controls"):
            e_vi_layout = gr.Radio(["loupe", "prospect", "marz"], value="loupe",
                                   label="VI CSV columns")  # fmt: skip
            e_vi_go = gr.Button("Download decisions as VI CSV", elem_id="btn-export-vi")
        e_vi_msg = gr.Markdown(elem_id="export-vi-message")
        e_vi_files = gr.HTML(label="VI CSV", elem_id="export-vi-files")
        # -- end VI CSV
        # -- catalogue (annotate.export.catalogue)
        with gr.Row():
            e_close_go = gr.Button("Close the campaign: auto-accept sure verdicts",
                                   elem_id="btn-close-campaign")  # fmt: skip
            e_cat_go = gr.Button("Write the catalogue (CSV + FITS)",
                                 elem_id="btn-export-catalogue")  # fmt: skip
        e_cat_msg = gr.Markdown(elem_id="export-catalogue-message")
        e_cat_files = gr.HTML(label="catalogue", elem_id="export-catalogue-files")
        e_hist = gr.Dataframe(
            value={"headers": export_page.HISTORY_HEADERS, "data": []},
            label="earlier batches",
            interactive=False,
            elem_id="export-history",
        )

    def wire(demo: gr.Blocks) -> None:
        # -- export
        def on_export(kind, request: gr.Request):
            ex = context.expert_for(ctx, request)
            r = export_page.run_export(ctx, ex, kind)
            return r.message, r.manifest, export_page.download_links(ctx, ex, r.files), r.history

        e_go.click(on_export, e_kind, [e_counts, e_manifest, e_files, e_hist], api_name="export")

        def on_vi(layout, request: gr.Request):
            ex = context.expert_for(ctx, request)
            msg, files = export_page.vi_download(ctx, ex, layout)
            return msg, export_page.download_links(ctx, ex, files)

        e_vi_go.click(on_vi, e_vi_layout, [e_vi_msg, e_vi_files], api_name="export_vi")

        def on_catalogue(request: gr.Request):
            ex = context.expert_for(ctx, request)
            msg, files = export_page.catalogue_download(ctx, ex)
            return msg, export_page.download_links(ctx, ex, files)

        e_cat_go.click(on_catalogue, None, [e_cat_msg, e_cat_files], api_name="export_catalogue")

        def on_close(request: gr.Request):
            return export_page.close_campaign(ctx, context.expert_for(ctx, request))

        e_close_go.click(on_close, None, e_cat_msg, api_name="close_campaign")

        def on_export_tab(request: gr.Request):
            # Exports are for admins: others see a note, not controls that refuse them.
            ex = context.expert_for(ctx, request)
            admin = ex is not None and ex.admin
            hist = (export_page.export_history(ctx, ex) if admin
                    else {"headers": export_page.HISTORY_HEADERS, "data": []})  # fmt: skip
            note = (
                "Exports include only what is new since the last batch of that kind."
                if admin
                else "Training-data exports are run by the team's admins; your own "
                "decisions download below as a VI CSV."
            )
            shown = gr.update(visible=admin)
            return [note, hist, shown, shown, shown, shown]

        # Opened, not at page load (the vet page's first panel would wait behind it); the
        # admin's controls start hidden and show once the viewer is known.
        e_tab.select(on_export_tab, None, [e_note, e_hist, e_controls, e_counts, e_manifest,
                                           e_files], api_name=False, show_progress="hidden")  # fmt: skip

    return wire
