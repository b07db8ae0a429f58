"""``Out`` (one notification a mapper hands out) is a plain slotted class now, not an
``attrs.frozen`` one (issue 30, item 3: ~20 are built per turn, each through
``object.__setattr__`` per field before). What callers and tests rely on is kept:
equality by method, params and broadcast but not by ``params_text`` (a cache of the
params' text), no hash (its params is a dict), keyword construction, a readable repr,
and no attribute beyond its four.

Checked against the ``attrs`` class too: these pass with it (the same behaviour).
"""

from __future__ import annotations

import pytest

from trio_agent._serve._outs import Out


def test_equality_is_by_method_params_and_broadcast() -> None:
    params = {"threadId": "t", "delta": "x"}
    assert Out("item/agentMessage/delta", dict(params)) == Out("item/agentMessage/delta", dict(params))
    assert Out("m", params, params_text='{"a":1}') == Out("m", params)  # the cached text is not compared
    assert Out("m", params) != Out("m", params, broadcast=True)
    assert Out("m", params) != Out("n", params)
    assert Out("m", params) != Out("m", {"other": 1})
    assert Out("m", params) != ("m", params, False, None)
    assert [Out("m", params)] == [Out("m", dict(params))]


def test_fields_keywords_repr_and_no_hash() -> None:
    out = Out(method="thread/status/changed", params={"status": "idle"}, broadcast=True, params_text=None)
    assert (out.method, out.params, out.broadcast, out.params_text) == (
        "thread/status/changed", {"status": "idle"}, True, None)
    assert Out("m", {}).broadcast is False and Out("m", {}).params_text is None
    assert repr(Out("m", {"a": 1}, params_text="x")) == "Out(method='m', params={'a': 1}, broadcast=False)"
    with pytest.raises(TypeError):
        hash(out)
    with pytest.raises(AttributeError):
        out.extra = 1  # type: ignore[attr-defined]
