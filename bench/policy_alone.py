"""One built-in policy at a time: microseconds per `Engine.evaluate` of bench/engine.py's objects.

    python3 bench/policy_alone.py [--root DIR] [--policies DIR] [--rounds 7] [POLICY ...]

`--root` is the aiadmit checkout whose engine runs (default: this one), `--policies` the directory the policy files
come from (default: ROOT/policies). The whole-bundle figure of bench/engine.py hides a change of a microsecond in
one policy under the machine's noise (+-4 % between runs here); an engine holding one policy, timed as the best of
`--rounds` x 1,000 evaluations in CPU time, shows it. Compare two revisions by running this once per root (or per
policy directory), interleaved, several times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", nargs="*", default=["priority-class", "image-digest", "gang-admission",
                                                      "startup-budget", "spot-checkpointing"])
    parser.add_argument("--root", default=os.path.dirname(HERE))
    parser.add_argument("--policies")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, args.root)
    sys.path.insert(0, HERE)
    import engine as bench  # noqa: E402 - bench/engine.py's objects
    from webhook.engine.core import Engine  # noqa: E402 - the engine of --root
    from webhook.model.resource import Resource  # noqa: E402

    directory = args.policies or os.path.join(args.root, "policies")
    out = {}
    for policy in args.policy:
        engine = Engine.load([os.path.join(directory, f"{policy}.yaml")])
        for name, obj in (("gpu-pod", bench.GPU_POD), ("pytorchjob", bench.PYTORCH_JOB)):
            resource = Resource(obj)
            for _ in range(300):
                engine.evaluate(resource)
            best = float("inf")
            for _ in range(args.rounds):
                started = time.process_time()
                for _ in range(1000):
                    engine.evaluate(resource)
                best = min(best, (time.process_time() - started) / 1000 * 1e6)
            out[f"{policy}/{name}"] = round(best, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
