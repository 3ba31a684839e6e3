"""Alembic environment. The store runs `upgrade head` itself on open, passing its own
connection in `config.attributes["connection"]`. From the command line, use a config whose
`script_location` is this folder and name the database with `-x url=sqlite:///loupe.db`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from db.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite alters tables by copying them; batch mode does that for later migrations.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


connection = config.attributes.get("connection")
if connection is not None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()
else:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    engine = create_engine(url or "sqlite:///loupe.db")
    with engine.begin() as conn:
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()
