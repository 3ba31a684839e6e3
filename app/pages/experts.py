"""The experts page: the team's accounts; admins see them, add experts and change roles and
passwords (through `annotate.team.experts`, which enforces the minimum password length)."""

from __future__ import annotations

from typing import Any

from annotate.team import experts
from annotate.team import settings as team_settings
from app.context import USER_ERRORS, Context, Viewer, require
from app.render_md import escape

HEADERS = ["name", "role", "active", "reviews"]
SETTING_NAMES = list(team_settings.SETTINGS)  # the team settings an admin may change


def expert_table(ctx: Context, ex: Viewer | None) -> dict[str, Any]:
    """The accounts, for admins only: who may log in is not every expert's business."""
    if ex is None or not ex.admin:
        return {"headers": HEADERS, "data": []}
    rows = [[e.name, e.role, "yes" if e.active else "no", e.review_count]
            for e in ctx.read.experts()]  # fmt: skip
    return {"headers": HEADERS, "data": rows}


def experts_note(ex: Viewer | None) -> str:
    if ex is None:
        return "Log in first."
    if not ex.admin:
        return "Only admins see and manage the team's accounts."
    return (f"Passwords need at least {experts.MIN_PASSWORD_LENGTH} characters; "
            "changing one ends that expert's open sessions.")  # fmt: skip


def add_expert(ctx: Context, ex: Viewer | None, name: str, role: str, password: str) -> str:
    try:
        require(ex, admin=True)
        name = (name or "").strip()
        if not name:
            return "Give a name."
        if ctx.read.expert(name) is None:
            experts.create_expert(ctx.store, name, role, password or None, actor=ex.name)
        else:
            experts.update_expert(ctx.store, name, role=role, password=password or None,
                                  actor=ex.name)  # fmt: skip
    except (*USER_ERRORS, ValueError, LookupError) as e:  # a bad role or name says so
        return f"Refused: {escape(e)}"
    return f"Expert **{escape(name)}** saved ({escape(role)})."


def settings_table(ctx: Context, ex: Viewer | None) -> dict[str, Any]:
    """The team's campaign settings (overlap, gold and audit shares, learning, lease), for
    admins: they are the ones who change them."""
    if ex is None or not ex.admin:
        return {"headers": team_settings.HEADERS, "data": []}
    return {"headers": team_settings.HEADERS, "data": team_settings.rows(ctx.store)}


def change_setting(
    ctx: Context, ex: Viewer | None, name: str, value: str
) -> tuple[str, dict[str, Any]]:
    """Admins only: set one team setting (`annotate.team.settings` checks it); a message
    and the table as it is now."""
    try:
        require(ex, admin=True)
        got = team_settings.change(ctx.store, name, value, ex.name)
    except (*USER_ERRORS, ValueError) as e:
        return f"Refused: {escape(e)}", settings_table(ctx, ex)
    return f"**{escape(name)}** is now {escape(got)}.", settings_table(ctx, ex)
