"""`launch.py serve`: serve the vetting web app (vet, author, dashboard, export, experts).

    python launch.py                              # demo database, http://127.0.0.1:7860
    python launch.py serve --db postgresql+psycopg://... --host 0.0.0.0 --login

On its default database (created if absent), or with `--seed-demo`, an empty store is
first seeded: the demo set is generated, ingested and vetted by the `--policy` agent, so the
first page already shows real trajectories. Any other `--db` must already exist (`ingest`
or `demo` create one): a mistyped path is refused, not made into a new, empty store. The
app itself is `app.main`'s.
"""

from __future__ import annotations

import argparse
import ipaddress
import time
from pathlib import Path
from typing import Any

from app.main import listen_socket, make_context, serve
from commands import flags
from db.settings import DEFAULTS, ServeSettings
from db.store import DEFAULT_DB


def trusted_proxy(value: str) -> str:
    """`--trusted-proxy`'s type: an IP address or network, refused when the arguments are
    read (not later, as a traceback, when the app is built)."""
    try:
        return str(ipaddress.ip_network(value.strip(), strict=False))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an IP address or network (e.g. 127.0.0.1, 10.0.0.0/8, ::1)"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=DEFAULT_DB, help="SQLAlchemy database URL.")
    parser.add_argument("--port", type=int, default=7860, help="Port to listen on.")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="Address to listen on; 0.0.0.0 exposes the app to the network (use --login).",
    )
    parser.add_argument(
        "--login",
        action="store_true",
        help="Require experts to log in (accounts from `launch.py add-expert`).",
    )
    parser.add_argument(
        "--data-root",
        action="append",
        default=None,
        help="Folder uploads are stored in and server paths may be read from (repeatable); "
        "default: data/.",
    )
    parser.add_argument(
        "--policy",
        default="rules",
        help="Agent policy that vets the demo set when the database is empty, and new uploads.",
    )
    parser.add_argument(
        "--export-dir", default="exports", help="Folder exports are written to (download links)."
    )
    parser.add_argument(
        "--max-upload-mb",
        type=flags.positive,
        default=DEFAULTS.max_upload_mb,
        help="Largest spectrum file accepted.",
    )
    parser.add_argument(
        "--templates",
        default=None,
        metavar="DIR",
        help="Folder of template spectra (any format Loupe reads, rest frame) offered beside "
        "the built-in ones for the overlay on the vet page.",
    )
    parser.add_argument(
        "--no-seed", action="store_true", help="Do not seed an empty database with the demo set."
    )
    parser.add_argument(
        "--seed-demo",
        action="store_true",
        help="Create --db if absent and seed it with the demo set when empty (done anyway on "
        "the default database).",
    )
    parser.add_argument(
        "--session-hours",
        type=flags.positive,
        default=DEFAULTS.session_hours,
        help="With --login: a session expires this long after logging in.",
    )
    parser.add_argument(
        "--secure-cookie",
        action="store_true",
        help="With --login: send the session cookie over HTTPS only (behind a TLS proxy).",
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        type=trusted_proxy,
        default=[],
        metavar="IP",
        help="Address or network of the reverse proxy in front of the app (repeatable): only "
        "its X-Forwarded-For/-Proto/-Host are believed (login throttle, cookie, origin check).",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="Host name the app is reached by (repeatable; e.g. the proxy's public name): "
        "requests naming any other Host are refused. Always allowed: --host, localhost, "
        "127.0.0.1, ::1, and, when --host is 0.0.0.0 or ::, this machine's names and any "
        "IP address.",
    )


def seed_demo(ctx, out_dir: Path, policy: str = "rules", n_per_class: int | None = None) -> int:
    """Generate, ingest and vet the demo set; returns the number of candidates vetted.

    Its true labels are written beside the spectra as `labels.csv` (a catalogue CSV): the
    README's examples after `make run` read the demo set through it."""
    from app.pages.upload import ingest_and_vet
    from training.sim.demo import generate_demo

    kwargs: dict[str, Any] = {}
    if n_per_class is not None:
        kwargs["n_per_class"] = n_per_class
    rows = generate_demo(out_dir, labels=Path(out_dir) / "labels.csv", **kwargs)
    return ingest_and_vet(ctx, rows, policy=policy, actor="demo")


def main(args: argparse.Namespace) -> int:
    sock = listen_socket(args.host, args.port)  # a bad port or address stops here, on one line
    ctx = prepare(args)
    srv = serve(
        ctx,
        args.host,
        args.port,
        secure_cookie=args.secure_cookie,
        trusted_proxies=args.trusted_proxy,
        extra_hosts=args.allowed_host,
        sock=sock,
    )
    print(f"Loupe is running on {srv.url}  (Ctrl+C to stop)")
    try:
        while srv.thread.is_alive():
            srv.thread.join(0.5)
    except KeyboardInterrupt:
        srv.close()
    return 0


def prepare(args: argparse.Namespace):
    """The app's context on the store `serve` serves: opened (created on the default
    database or with --seed-demo) and, when empty there, seeded with the demo set. `make run`
    is this, then the server."""
    settings = ServeSettings(
        max_upload_bytes=int(args.max_upload_mb * 1024 * 1024),
        session_seconds=args.session_hours * 3600,
    )
    seeding = args.seed_demo or args.db == DEFAULT_DB
    ctx = make_context(
        args.db,
        create=seeding,
        login=args.login,
        data_roots=args.data_root,
        policy=args.policy,
        export_dir=args.export_dir,
        settings=settings,
        templates=args.templates,
    )
    if seeding and not args.no_seed and ctx.read.count_candidates() == 0:
        print("empty database: generating, ingesting and vetting the demo set ...")
        t0 = time.time()
        n = seed_demo(ctx, ctx.data_roots[0] / "demo", policy=args.policy)
        print(f"seeded {n} candidates in {time.time() - t0:.1f} s")
    if args.login and not ctx.read.experts():
        print("login is on but there are no experts: `launch.py add-expert NAME --role admin`")
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.login:
        print("warning: serving beyond localhost without --login; anyone who can reach it writes")
    return ctx
