"""Every engine the app may be given (`app.load_engine`: an `Engine`, a `BackgroundLoad` of one, a `RemoteEngine`)
offers all of `ui.backend.Backend`: a member one of them lacks fails only on the path that uses it (as
`continues_answers` did, after a false interruption in the voice tab of an app loading in the background)."""

import pytest

from fastvlm.remote import RemoteEngine
from fastvlm.weights.loading import BackgroundLoad
from tests.unit.weights.test_loading import fake_engine
from ui.backend import Backend

MEMBERS = sorted(name for name in {*Backend.__dict__, *Backend.__annotations__} if not name.startswith("_"))


@pytest.mark.parametrize("make", [fake_engine, lambda: BackgroundLoad(fake_engine, {}).start(),
                                  lambda: RemoteEngine("http://127.0.0.1:9")], ids=["engine", "loading", "remote"])
def test_each_engine_the_app_may_use_has_every_member_of_backend(make):
    assert "continues_answers" in MEMBERS and "stream" in MEMBERS
    engine = make()
    try:
        assert [name for name in MEMBERS if not hasattr(engine, name)] == []
    finally:
        engine.close()
