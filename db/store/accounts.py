"""Expert accounts: creating and updating them, passwords and login sessions (the hashing
itself is in `db.store.auth`)."""

from __future__ import annotations

import datetime as dt
import secrets

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from db import models as m
from db.models import utcnow
from db.settings import DEFAULTS
from db.store.auth import hash_password, token_hash, verify_password_hash
from db.store.errors import NotFound, StoreError

UNLOCKS = "login_unlocks"  # setting: lower-cased expert name -> times unlocked


class AccountsMixin:
    """Experts, their passwords and login sessions."""

    def _expert(self, s: Session, who: str | int) -> m.Expert:
        q = select(m.Expert).where(
            m.Expert.id == who if isinstance(who, int) else m.Expert.name == who
        )
        e = s.scalars(q).first()
        if e is None:
            raise NotFound(f"no expert {who!r}")
        return e

    def create_expert(
        self,
        name: str,
        role: str = "expert",
        password_hash: str | None = None,
        actor: str = "admin",
    ) -> m.Expert:
        name = (name or "").strip()
        if not name:
            raise StoreError("expert name is empty")
        if role not in m.ROLES:
            raise StoreError(f"role must be one of {m.ROLES} (got {role!r})")
        with self._tx() as s:
            if s.scalar(select(m.Expert.id).where(m.Expert.name == name)) is not None:
                raise StoreError(f"expert {name!r} already exists")
            e = m.Expert(name=name, role=role, password_hash=password_hash)
            s.add(e)
            s.flush()
            self._audit(s, actor, "create_expert", "expert", e.id, {"name": name, "role": role})
            return e

    def update_expert(
        self,
        name: str,
        *,
        role: str | None = None,
        password_hash: str | None = None,
        active: bool | None = None,
        actor: str = "admin",
    ) -> m.Expert:
        if role is not None and role not in m.ROLES:
            raise StoreError(f"role must be one of {m.ROLES} (got {role!r})")
        with self._tx() as s:
            e = self._expert(s, name)
            stays_admin = (role or e.role) == "admin" and (e.active if active is None else active)
            if e.role == "admin" and e.active and not stays_admin:
                self._keep_an_admin(s, e)
            changed = {}
            if role is not None:
                e.role = changed["role"] = role
            if password_hash is not None:
                e.password_hash = password_hash
                changed["password"] = "changed"
            if active is not None:
                e.active = changed["active"] = bool(active)
            if password_hash is not None or active is False:
                # A new password or a deactivation ends every session for good: a cookie
                # that merely stopped working while inactive would work again on reactivation.
                s.execute(delete(m.ExpertSession).where(m.ExpertSession.expert_id == e.id))
            self._audit(s, actor, "update_expert", "expert", e.id, changed)
            return e

    @staticmethod
    def _keep_an_admin(s: Session, e: m.Expert) -> None:
        """Refuse to demote or deactivate `e` if no other active admin would be left: nobody
        could manage the accounts or export then. Every active admin's row is locked first
        (PostgreSQL; SQLite has one writer), so two admins demoting each other at once
        cannot both succeed."""
        admins = s.scalars(
            select(m.Expert.id)
            .where(m.Expert.role == "admin", m.Expert.active.is_(True))
            .with_for_update()
        ).all()
        if not [i for i in admins if i != e.id]:
            raise StoreError(
                f"{e.name!r} is the last active admin: make another expert an admin first "
                "(add-expert NAME --role admin), then change this account"
            )

    def expert(self, who: str | int) -> m.Expert | None:
        with self._ro() as s:
            try:
                return self._expert(s, who)
            except NotFound:
                return None

    def experts(self) -> list[m.Expert]:
        with self._ro() as s:
            return list(s.scalars(select(m.Expert).order_by(m.Expert.name)))

    def ensure_expert(self, name: str, role: str = "expert") -> m.Expert:
        """The expert called `name`, created (without a password) if absent."""
        e = self.expert(name)
        if e is not None:
            return e
        try:
            return self.create_expert(name, role)
        except StoreError:  # created meanwhile by another process
            e = self.expert(name)
            if e is None:
                raise
            return e

    def set_password(self, name: str, password: str, actor: str = "admin") -> m.Expert:
        return self.update_expert(name, password_hash=hash_password(password), actor=actor)

    def verify_password(self, name: str, password: str) -> m.Expert | None:
        """The active expert if `password` is theirs, else None (same cost either way)."""
        e = self.expert(name) if name else None
        ok = verify_password_hash(e.password_hash if e is not None else None, password or "")
        return e if ok and e is not None and e.active else None

    def login(
        self, name: str, password: str, ttl_seconds: float = DEFAULTS.session_seconds
    ) -> str | None:
        """A new session token for a correct name and password, else None."""
        e = self.verify_password(name, password)
        if e is None:
            with self._tx() as s:
                self._audit(s, name or "", "login_failed", "expert", None)
            return None
        token = secrets.token_urlsafe(32)
        expires = utcnow() + dt.timedelta(seconds=ttl_seconds)
        with self._tx() as s:
            s.execute(delete(m.ExpertSession).where(m.ExpertSession.expires < utcnow()))
            s.add(m.ExpertSession(token_hash=token_hash(token), expert_id=e.id, expires=expires))
            self._audit(s, e.name, "login", "expert", e.id)
        return token

    def session_expert(self, token: str | None) -> str | None:
        """The name of the active expert owning this unexpired session token, else None."""
        if not token:
            return None
        with self._ro() as s:
            row = s.get(m.ExpertSession, token_hash(token))
            if row is None or row.expires <= utcnow():
                return None
            e = s.get(m.Expert, row.expert_id)
            return e.name if e is not None and e.active else None

    def unlock_login(self, name: str, actor: str = "admin") -> m.Expert:
        """Lift the running apps' login throttle for `name` (after failed guesses by someone
        else): bumps a per-name marker the login route compares with the one it last saw."""
        with self._tx() as s:
            e = self._expert(s, name)
            row = s.get(m.Setting, UNLOCKS)
            marks = dict(row.value.get("value", {})) if row is not None else {}
            key = e.name.strip().lower()
            marks[key] = int(marks.get(key, 0)) + 1
            if row is None:
                s.add(m.Setting(key=UNLOCKS, value={"value": marks}))
            else:
                row.value = {"value": marks}
                row.updated = utcnow()
            self._audit(s, actor, "unlock_login", "expert", e.id)
            return e

    def login_unlock_marker(self, name: str) -> int | None:
        """How many times `name`'s logins were unlocked (None: never)."""
        marks = self.setting(UNLOCKS, {}) or {}
        return marks.get((name or "").strip().lower())

    def logout(self, token: str) -> None:
        with self._tx() as s:
            row = s.get(m.ExpertSession, token_hash(token))
            if row is not None:
                s.delete(row)
                self._audit(s, str(row.expert_id), "logout", "expert", row.expert_id)

    get_expert = expert
    list_experts = experts
