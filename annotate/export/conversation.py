"""A trajectory as chat messages with image placeholders, and the images, rendered once each.

Runs in the export's worker processes. Images are drawn with the export's renderer, not
the one a step recorded: they must be what the model that trains on them sees at inference.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.spectrum import Spectrum
from agent.trajectory import Step, Trajectory
from annotate.authoring import assistant_text


@dataclass
class Conversation:
    """A trajectory as chat messages with image placeholders, plus the PNGs in order."""

    messages: list[dict[str, Any]]  # content: [{"type": "text", "text"} | {"type": "image"}]
    images: list[bytes]


def png_bytes(img: Any) -> bytes:
    if isinstance(img, bytes | bytearray):
        return bytes(img)
    from agent.render import to_png

    return to_png(img)


def load_spectrum(ref: dict[str, Any]) -> Spectrum:
    from agent.formats import load_one

    path = ref.get("path")
    if not path:
        raise ValueError("no spectrum file recorded")
    hdu = ref.get("hdu")
    if isinstance(hdu, str) and hdu.isdigit():
        hdu = int(hdu)
    return load_one(Path(path), hdu=hdu, row=ref.get("row"))


class Images:
    """Renders the global view and zooms of one spectrum, each window once."""

    def __init__(self, spectrum: Spectrum, renderer: str):
        self.spectrum = spectrum
        self.renderer = renderer
        self._cache: dict[Any, bytes] = {}

    def global_view(self) -> bytes:
        if "global" not in self._cache:
            from agent.tool import global_view

            view = global_view(self.spectrum, renderer=self.renderer)
            if getattr(view, "error", None):
                raise ValueError(f"global view failed: {view.error}")
            self._cache["global"] = png_bytes(view.image)
        return self._cache["global"]

    def step(self, step: Step) -> bytes:
        if step.window is None:
            raise ValueError("a zoom step has no window to render")
        key = (float(step.window[0]), float(step.window[1]))
        if key not in self._cache:
            from agent.tool import render_window

            # The export's renderer, not the one recorded in the step: the images must be
            # what the model that trains on them will see at inference.
            self._cache[key] = png_bytes(render_window(self.spectrum, key, renderer=self.renderer))
        return self._cache[key]


def conversation(traj: Trajectory, images: Images) -> Conversation:
    """`traj.to_messages()` with every image reference replaced by a placeholder and the
    image rendered (global view first, then each tool response's zoom, in order)."""
    for s in traj.steps:
        if not s.raw:
            s.raw = assistant_text(s)
    msgs = traj.to_messages()
    image_steps = [
        s
        for s in traj.steps
        if s.tool_call is not None and s.answer is None and s.observation_image
    ]
    pngs: list[bytes] = []
    out: list[dict[str, Any]] = []
    n_img = 0
    for m in msgs:
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        items = []
        for it in content:
            if it.get("type") == "image" or "image" in it:
                if n_img == 0:
                    pngs.append(images.global_view())
                else:
                    if n_img - 1 >= len(image_steps):
                        raise ValueError("more images in the conversation than zoom steps")
                    pngs.append(images.step(image_steps[n_img - 1]))
                n_img += 1
                items.append({"type": "image", "text": None})
            else:
                items.append({"type": "text", "text": str(it.get("text", ""))})
        out.append({"role": m["role"], "content": items})
    if n_img != 1 + len(image_steps):
        raise ValueError(f"{n_img} images in the conversation for {len(image_steps)} zooms")
    return Conversation(out, pngs)
