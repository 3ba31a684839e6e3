"""Files the server itself reads or writes: `serve --templates` files are read in a limited
worker and a template too large to keep for the server's life is refused; an upload's copy
never writes through a link planted at its name."""

from __future__ import annotations

import numpy as np
import pytest

from agent.templates import TemplateError


def test_a_huge_template_file_is_refused_naming_it(tmp_path):
    from agent.formats.template_files import MAX_TEMPLATE_PIXELS, read_templates

    folder = tmp_path / "templates"
    folder.mkdir()
    n = MAX_TEMPLATE_PIXELS + 1
    wave = np.linspace(3500.0, 9500.0, n)
    np.savetxt(folder / "huge.txt", np.column_stack([wave, np.ones(n)]), fmt="%.5f")
    with pytest.raises(TemplateError, match=f"huge.txt: a template of {n} pixels"):
        read_templates(folder)
    (folder / "huge.txt").unlink()
    np.savetxt(folder / "ok.txt", np.column_stack([wave[:4000], np.ones(4000)]), fmt="%.5f")
    (t,) = read_templates(folder)
    assert t.name == "ok" and len(t.wavelength) == 4000


def test_an_upload_replaces_a_link_planted_at_its_name(tmp_path_factory, tmp_path):
    import hashlib

    from app import context as app_context
    from app.pages import upload as upload_page
    from tests.app_support import context
    from tests.store_factory import write_text_spectrum

    ctx = context(tmp_path_factory, tmp_path)
    try:
        (tmp_path / "in").mkdir()
        src = write_text_spectrum(tmp_path / "in" / "star.csv", seed=4)
        digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
        uploads = ctx.data_roots[0] / "uploads"
        uploads.mkdir(parents=True, exist_ok=True)
        victim = tmp_path / "outside.txt"
        victim.write_text("keep me")
        (uploads / f"{digest}-star.csv").symlink_to(victim)
        out = upload_page.ingest_upload(ctx, app_context.expert_for(ctx, None), [str(src)], "cv")
        assert "1 spectrum(s)" in out, out
        assert victim.read_text() == "keep me"
        dest = uploads / f"{digest}-star.csv"
        assert not dest.is_symlink() and dest.read_bytes() == src.read_bytes()
        assert not list(uploads.glob(".*.part"))
    finally:
        ctx.store.close()
