"""What the Kubernetes CEL oracle (tests/test_k8scel_*.py) found, kept without it (no Go needed here)."""

from __future__ import annotations

import pytest

from webhook.cel.environment import CelError, Expression, new_context


def test_sign_is_a_global_function_as_in_kubernetes():
    # Kubernetes has only sign(q) (its oracle rejects q.sign(): "found no matching overload for 'sign'"); so has aiadmit.
    assert Expression('sign(quantity("-2"))').run(new_context()) == -1
    with pytest.raises(CelError, match=r"sign\(\) is a global function") as caught:
        Expression('quantity("3").sign()')
    assert caught.value.offset == len("quantity(\"3\").")  # at the method, in the source as written


@pytest.mark.parametrize("text", ["1e400", "-1e400"])
def test_double_of_an_out_of_range_string_is_an_error_as_in_kubernetes(text):
    with pytest.raises(Exception, match="out of range"):
        Expression(f'double("{text}")').run(new_context())
    assert Expression('double("-inf")').run(new_context()) == float("-inf")
    assert Expression('double("1e-400")').run(new_context()) == 0.0
