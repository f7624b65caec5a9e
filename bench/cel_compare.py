"""CEL engine choice, measured: aiadmit's compiler (webhook/cel/compiler.py) vs common-expression-language (Rust)
vs cel-python (pure Python).

    python3 -m venv /tmp/celpy && /tmp/celpy/bin/pip install cel-python common-expression-language pyyaml
    /tmp/celpy/bin/python bench/cel_compare.py

Evaluates the same expressions over the same container and pod, each program
compiled once. "run" rows bind the variables once; the "bind + run" row binds
a new container and then runs the /dev/shm join, which is what an evaluation
does for every container. cel-python is not a dependency of aiadmit; this
script is how the choice was made.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

CONTAINER = {
    "name": "vllm", "image": "vllm/vllm-openai:v0.6.3",
    "resources": {"requests": {"cpu": "8", "memory": "48Gi"}, "limits": {"nvidia.com/gpu": "1", "memory": "48Gi"}},
    "volumeMounts": [{"name": "models", "mountPath": "/models"}, {"name": "dshm", "mountPath": "/dev/shm"}],
    "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
}
POD = {"volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": "m"}},
                   {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "12Gi"}}]}

EXPRESSIONS = {
    "has() chain": 'has(container.resources) && has(container.resources.requests) && '
                   '"cpu" in container.resources.requests',
    "/dev/shm join": 'container.volumeMounts.exists(m, m.mountPath == "/dev/shm" && pod.volumes.exists(v, '
                     'v.name == m.name && has(v.emptyDir) && v.emptyDir.medium == "Memory"))',
    "probe type": 'has(container.readinessProbe) && (has(container.readinessProbe.httpGet) || '
                  'has(container.readinessProbe.grpc))',
}


def timed(function, seconds: float = 1.0) -> float:
    function()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            function()
        count += 20
    return (time.perf_counter() - start) / count * 1e6


def rust() -> dict[str, float]:
    import cel

    context = cel.Context()
    context.add_variable("container", CONTAINER)
    context.add_variable("pod", POD)
    out = {}
    for name, source in EXPRESSIONS.items():
        program = cel.compile(source)
        assert program.execute(context) is True
        out[name] = timed(lambda: program.execute(context))
    join = cel.compile(EXPRESSIONS["/dev/shm join"])

    def bind_and_run():
        context.add_variable("container", CONTAINER)
        return join.execute(context)
    out["bind + run"] = timed(bind_and_run)
    return out


def native() -> dict[str, float]:
    from webhook.cel.environment import FUNCTIONS
    from webhook.cel.compiler import compile_native

    activation = {"container": CONTAINER, "pod": POD}
    out = {}
    for name, source in EXPRESSIONS.items():
        program = compile_native(source, FUNCTIONS)
        assert program.execute(activation) is True
        out[name] = timed(lambda: program.execute(activation))
    join = compile_native(EXPRESSIONS["/dev/shm join"], FUNCTIONS)

    def bind_and_run():
        activation["container"] = CONTAINER
        return join.execute(activation)
    out["bind + run"] = timed(bind_and_run)
    return out


def pure_python() -> dict[str, float]:
    import celpy

    environment = celpy.Environment()
    activation = {"container": celpy.json_to_cel(CONTAINER), "pod": celpy.json_to_cel(POD)}
    out = {}
    for name, source in EXPRESSIONS.items():
        program = environment.program(environment.compile(source))
        assert bool(program.evaluate(activation)) is True
        out[name] = timed(lambda: program.evaluate(activation))
    join = environment.program(environment.compile(EXPRESSIONS["/dev/shm join"]))

    def bind_and_run():
        activation["container"] = celpy.json_to_cel(CONTAINER)
        return join.evaluate(activation)
    out["bind + run"] = timed(bind_and_run)
    return out


if __name__ == "__main__":
    ours, fast, slow = native(), rust(), pure_python()
    print(f"{'µs per call':<16} {'aiadmit celnative':>18} {'common-expression-language':>28} {'cel-python':>12}")
    for name in ours:
        print(f"{name:<16} {ours[name]:>18.2f} {fast[name]:>28.2f} {slow[name]:>12.1f}")
