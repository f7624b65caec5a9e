"""CEL library choice, measured: cel-python (pure Python) vs common-expression-language (Rust).

    python3 -m venv /tmp/celpy && /tmp/celpy/bin/pip install cel-python common-expression-language
    /tmp/celpy/bin/python bench/cel_compare.py

Evaluates the same expressions, over the same container and pod, with a program
compiled once and the variables bound once, as the engine does. cel-python is
not a dependency of aiadmit; this script is how the choice was made.
"""

from __future__ import annotations

import time

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
    out["bind container"] = timed(lambda: context.add_variable("container", CONTAINER))
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
    out["bind container"] = timed(lambda: celpy.json_to_cel(CONTAINER))
    return out


if __name__ == "__main__":
    fast, slow = rust(), pure_python()
    print(f"{'µs per call':<16} {'common-expression-language':>28} {'cel-python':>12} {'ratio':>7}")
    for name in fast:
        print(f"{name:<16} {fast[name]:>28.2f} {slow[name]:>12.1f} {slow[name] / fast[name]:>6.0f}x")
