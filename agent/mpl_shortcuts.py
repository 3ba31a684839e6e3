"""matplotlib shortcuts for figures that are drawn again and again, none of which changes a
pixel: an axis's ticks recomputed only when their inputs change, and text layouts measured
once per string and font. `agent.render`'s `speco3` figures use them; tests hold their
images against figures drawn by matplotlib's own code throughout.

matplotlib is imported only when a shortcut is installed.
"""

from __future__ import annotations


def memoize_ticks(axis) -> None:
    """Make `axis._update_ticks` recompute only when what it reads has changed.

    One plot asks an axis for its ticks some 15 times (the layout, the title position, each
    spine's extent, the tight box, the draw), and each time matplotlib locates, formats and
    places every tick again: a third of the plot's time. The ticks are a function of the
    locators and formatters, the view interval and the axes' place in pixels (the automatic
    y locator picks its step by the axis length); when none of these changed since the last
    call, the ticks it placed then are still placed and are returned as they are.
    """
    compute = axis._update_ticks
    last: dict = {}

    def update_ticks():
        # the objects themselves are kept in the key, so a new locator never shares an id
        # with a freed one
        key = (
            axis.major.locator,
            axis.minor.locator,
            axis.major.formatter,
            axis.minor.formatter,
            tuple(axis.get_view_interval()),
            tuple(axis.axes.bbox.bounds),
            axis.get_figure(root=True).dpi,
        )
        old = last.get("key")
        if old is not None and all(
            a is b or (isinstance(a, (tuple, float)) and a == b) for a, b in zip(key, old)
        ):
            return list(last["ticks"])
        ticks = compute()
        last["key"], last["ticks"] = key, ticks
        return list(ticks)

    axis._update_ticks = update_ticks


def _text_layout_key(text, dpi: float) -> tuple:
    """Everything `Text._get_layout` reads, for an unwrapped plain-text label."""
    return (
        text.get_text(),
        hash(text.get_fontproperties()),
        text.get_rotation(),
        text.get_rotation_mode(),
        text.get_horizontalalignment(),
        text.get_verticalalignment(),
        text._get_multialignment(),
        text._linespacing,
        text.get_usetex(),
        dpi,
    )


def install_text_layout_cache() -> None:
    """Let the speco3 figures reuse the measured layout of a text they measured before.

    A plot measures each tick label about a dozen times (layout, title position, tight box,
    draw), and matplotlib reads the font's tables each time. The layout of a text (its box
    and line offsets relative to its anchor) depends only on the string, the font and the
    alignment, so figures carrying a `_loupe_text_layouts` dict keep it there by those;
    every other figure goes through matplotlib's own code unchanged.
    """
    from matplotlib.text import Text

    if getattr(Text._get_layout, "_loupe_cached", False):
        return
    compute = Text._get_layout

    def _get_layout(self, renderer):
        fig = self.get_figure(root=True)
        cache = getattr(fig, "_loupe_text_layouts", None)
        if cache is None or self.get_wrap():
            return compute(self, renderer)
        key = _text_layout_key(self, fig.dpi)
        hit = cache.get(key)
        if hit is None:
            if len(cache) > 4096:  # tick labels of many different ranges: start again
                cache.clear()
            hit = cache[key] = compute(self, renderer)
        bbox, info, descent = hit
        return bbox.frozen(), list(info), descent

    _get_layout._loupe_cached = True
    Text._get_layout = _get_layout
