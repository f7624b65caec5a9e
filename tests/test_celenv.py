"""The CEL environment: params folded at compile time, native programs by default, the reference library as fallback."""

import pytest

from webhook.cel.environment import CelError, Expression, new_context, inline_params


def test_params_are_folded_outside_strings():
    assert inline_params('params.n > 1 && x == "params.n"', {"n": 2}) == '(2) > 1 && x == "params.n"'


def test_a_source_naming_no_params_is_returned_as_it_is():
    # The policy compiler folds params into every expression at load; most name none (checked by the substring).
    source = 'container.image.endsWith(":latest") && x == "parameters"'
    assert inline_params(source, {"n": 2}) is source
    assert inline_params('x == "params.n"', {}) == 'x == "params.n"'  # only inside a string: nothing replaced
    with pytest.raises(CelError, match="unknown parameter 'm'"):
        inline_params("1 < params . m", {"n": 2})


def test_unknown_param_fails_at_compile_time():
    with pytest.raises(CelError, match="unknown parameter 'm'"):
        Expression("params.m > 1", {"n": 2})


def test_an_expression_the_native_compiler_supports_runs_natively_on_the_objects_themselves():
    expression = Expression('container.resources.limits.exists(k, k.startsWith("nvidia.com/"))')
    assert expression.native
    context = new_context()
    context["container"] = {"resources": {"limits": {"nvidia.com/gpu": 1}}}
    assert expression.run(context) is True
    context["container"] = {"resources": {"limits": {"cpu": "1"}}}
    assert expression.run(context) is False


def test_timestamps_run_natively():
    expression = Expression('timestamp(object.metadata.creationTimestamp) < timestamp("2030-01-01T00:00:00Z")')
    assert expression.native
    context = new_context()
    context["object"] = {"metadata": {"creationTimestamp": "2026-11-29T18:00:00Z"}}
    assert expression.run(context) is True
    context["object"] = {"metadata": {"creationTimestamp": "2031-01-01T00:00:00Z"}}
    assert expression.run(context) is False


def test_syntax_errors_are_reported_with_their_column():
    with pytest.raises(CelError, match="column 21") as raised:
        Expression("has(container.x) && && true")
    assert raised.value.offset == 20


def test_a_missing_key_is_an_error_that_names_the_key_and_an_unbound_variable_says_so():
    context = new_context()
    context["container"] = {"name": "c"}
    with pytest.raises(Exception, match="no such key: image"):
        Expression("container.image == 'x'").run(context)
    with pytest.raises(Exception, match="undeclared reference to 'pod'"):
        Expression("pod.volumes.size() > 0").run(context)


def test_prepare_compiles_every_program_of_the_bundle_before_any_review():
    from webhook.engine.core import Engine

    engine = Engine.load()
    expressions = [e for p in engine.policies for r in p.rules for e in (r.when, r.expression) if e is not None]
    assert expressions and all(e._program is None for e in expressions)  # loading only checks them
    engine.prepare()
    everything = expressions + [part for p in engine.policies for r in p.rules for part in r.message.parts
                                if not isinstance(part, str)]
    everything += [e for p in engine.policies for m in p.mutations for e in (m.when, m.value) if e is not None]
    assert all(e._program is not None and e.native for e in everything)
    messages = [r.message for p in engine.policies for r in p.rules]
    assert messages and all(m._render is not None for m in messages)  # each message's one render function too


def test_expressions_too_deep_for_python_fall_back_to_the_reference_library():
    # 30 nested comprehensions exceed the blocks Python allows in one function: the reference library runs it
    source = "".join(f"[1].exists(v{i}, " for i in range(30)) + "true" + ")" * 30
    expression = Expression(source)
    assert not expression.native
    assert expression.run(new_context()) is True


def test_nothing_deeper_than_the_limit_loads_so_no_engine_ever_overflows_its_stack():
    # a 15,000-term `+` chain segfaulted the reference library; now it is refused at load, quickly
    for source in ("!" * 300 + "true", " + ".join(["1"] * 15000), " + ".join(["1"] * 40000)):
        with pytest.raises(CelError, match="nested deeper than|longer than"):
            Expression(source)
    assert Expression(" + ".join(["1"] * 100)).run(new_context()) == 100
