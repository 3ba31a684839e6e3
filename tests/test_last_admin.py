"""The last active admin stays one: no path (the Experts tab, `add-expert --role`,
`add-expert --deactivate`, the store itself) demotes or deactivates them, since nobody could
manage accounts or export afterwards. With another active admin, either may step down."""

from __future__ import annotations

import io

import pytest

from annotate.team.experts import create_expert, update_expert
from db.store import Store, StoreError


@pytest.fixture
def url(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    with Store(url) as store:
        create_expert(store, "ada", "admin", "pw-ada-123456")
        create_expert(store, "bob", "expert", "pw-bob-123456")
        create_expert(store, "cy", "admin", "pw-cy-1234567")
        update_expert(store, "cy", active=False)  # an inactive admin does not count
    return url


def test_the_store_keeps_the_last_active_admin(url):
    with Store(url) as store:
        for change in ({"role": "expert"}, {"active": False}, {"role": "expert", "active": False}):
            with pytest.raises(StoreError, match="'ada' is the last active admin"):
                update_expert(store, "ada", **change)
            assert (store.expert("ada").role, store.expert("ada").active) == ("admin", True)
        update_expert(store, "ada", password="a new passphrase")  # other changes still go
        update_expert(store, "ada", role="admin", active=True)  # a no-op change too
        # a second active admin: either may step down, and then the other is the last
        update_expert(store, "bob", role="admin")
        update_expert(store, "ada", role="expert")
        with pytest.raises(StoreError, match="'bob' is the last active admin"):
            update_expert(store, "bob", active=False)
        update_expert(store, "cy", active=True)  # reactivated: an active admin again
        update_expert(store, "bob", active=False)
        assert [e.name for e in store.experts() if e.role == "admin" and e.active] == ["cy"]


def test_the_experts_tab_refuses_to_demote_the_only_admin(url):
    from app.context import Viewer
    from app.main import make_context
    from app.pages.experts import add_expert

    ctx = make_context(url, login=True, create=False)
    try:
        msg = add_expert(ctx, Viewer("ada", "admin"), "ada", "expert", "")
        assert msg.startswith("Refused") and "last active admin" in msg, msg
        assert ctx.store.expert("ada").role == "admin"
    finally:
        ctx.store.close()


def test_add_expert_refuses_on_one_line(url, monkeypatch, capsys):
    import launch

    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    for argv in (["--deactivate"], ["--role", "expert"]):
        rc = launch.main(["add-expert", "ada", *argv, "--db", url])
        out = capsys.readouterr()
        text = out.out + out.err
        assert rc == 2 and "last active admin" in text and "Traceback" not in text, text
        assert len(text.strip().splitlines()) == 1, text
    with Store(url) as store:
        assert store.expert("ada").role == "admin" and store.expert("ada").active
