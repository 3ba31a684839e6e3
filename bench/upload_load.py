"""An expert's next item while other uploads are vetted, against the same with none.

    nice -n 10 python bench/upload_load.py [--files 2] [--pixels 9900000] [--think 0.5]

A demo store is seeded; an expert's desk opens its items one after the other (`--think`
seconds between two), each drawn from cold (the spectrum cache and the panel cache emptied first, so each is read in a read
worker and drawn again): first on an idle server (the baseline), then while `--files`
gzipped 1-D FITS of `--pixels` pixels (about 230 KB each) are uploaded one after the other
and vetted in the vet pool with its production limits (low priority, one worker). Prints the
median and 90th percentile of each, the server's resident memory before and after, and
last the ratio of the medians (loaded / idle), which docs/deploy.md asks to stay under 2.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(x.split()[1]) for x in fh if x.startswith("VmRSS:")) / 1024


def next_items(
    ctx, keys: list[str], n: int, stop: threading.Event | None = None, think: float = 0.0
) -> list[float]:
    """Seconds to open each of `n` items from cold (cycling through `keys`)."""
    from app import context as app_context
    from app import views
    from app.pages import vet as vet_page
    from db.store.spectra import SPECTRA

    ex = app_context.expert_for(ctx, None)
    out: list[float] = []
    i = 0
    while len(out) < n or (stop is not None and not stop.is_set()):
        SPECTRA.clear()
        vet_page._panel_caches.clear()
        t0 = time.perf_counter()
        _, view = vet_page.vet_jump(ctx, ex, views.new_state(), keys[i % len(keys)],
                                    views.Display())  # fmt: skip
        out.append(time.perf_counter() - t0)
        assert view.global_fig is not None, view.message
        i += 1
        time.sleep(think)
        if stop is None and len(out) >= n:
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=2, help="uploads vetted meanwhile")
    ap.add_argument("--pixels", type=int, default=9_900_000, help="pixels of each upload")
    ap.add_argument("--items", type=int, default=12, help="items opened for the baseline")
    ap.add_argument("--think", type=float, default=0.5, help="seconds between two items")
    args = ap.parse_args()

    from app import context as app_context
    from app.main import make_context
    from app.pages import upload as upload_page
    from commands.serve import seed_demo
    from tests.test_upload_memory import big_fits_gz

    root = Path(tempfile.mkdtemp(prefix="loupe-upload-load-"))
    ctx = make_context(f"sqlite:///{root / 'loupe.db'}", data_roots=[str(root / "data")],
                       export_dir=str(root / "exports"))  # fmt: skip
    seed_demo(ctx, root / "data" / "demo", n_per_class=2)
    keys = [c.key for c in ctx.store.list_candidates(limit=12, order="id")]
    files = [big_fits_gz(root, i, args.pixels) for i in range(args.files)]
    next_items(ctx, keys, 3)  # warm: the read workers started, the code loaded
    idle = next_items(ctx, keys, args.items, think=args.think)
    before = rss_mb()
    stop = threading.Event()
    loaded: list[float] = []

    def desk() -> None:
        loaded.extend(next_items(ctx, keys, 1, stop, think=args.think))

    t = threading.Thread(target=desk)
    t.start()
    ex = app_context.expert_for(ctx, None)
    t0 = time.perf_counter()
    try:
        for f in files:
            upload_page.ingest_upload(ctx, ex, [str(f)], "cv")
    finally:
        stop.set()
        t.join()
    took = time.perf_counter() - t0
    after = rss_mb()

    def q(xs: list[float], p: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1000

    print(f"idle:    {len(idle)} items, median {q(idle, 0.5):.0f} ms, p90 {q(idle, 0.9):.0f} ms")
    print(f"loaded:  {len(loaded)} items while {args.files} uploads of {args.pixels} pixels "
          f"were vetted ({took:.0f} s), median {q(loaded, 0.5):.0f} ms, "
          f"p90 {q(loaded, 0.9):.0f} ms")  # fmt: skip
    print(f"server resident memory: {before:.0f} MB before the uploads, {after:.0f} MB after")
    ctx.store.close()
    print(f"upload_load_ratio: {statistics.median(loaded) / statistics.median(idle):.2f}")


if __name__ == "__main__":
    main()
