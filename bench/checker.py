"""The load-time CEL check of every built-in expression, without the bundle's record: parse, check, cost.

    python3 bench/checker.py [--repeat 7]

Why: `Engine.load()` takes most checks from policies/checked.json, so a slower checker shows only when a policy
changes or a user's bundle loads; this times the checker itself (best of N over every variable, `when`,
`expression`, messageExpression and mutation guard of the built-in policies, each checked as at the object level
with aiadmit's variables and `params` declared dyn). Run it from two trees in the same session to compare.
"""

from __future__ import annotations

import argparse
import time

from webhook.cel.environment import CelError, MessageExpression, checked
from webhook.engine.core import Engine
from webhook.language.declarations import CONTAINER


def sources(engine) -> list[str]:
    found = []
    for policy in engine.policies:
        found += [e.source for e in policy.named.values()]
        for rule in policy.rules:
            found += [getattr(rule, part).source for part in ("when", "expression") if getattr(rule, part)]
            if isinstance(rule.message, MessageExpression):
                found.append(rule.message.expression.source)
        found += [m.when.source for m in policy.mutations if m.when is not None]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    found = sources(Engine.load())
    declarations = dict.fromkeys(list(CONTAINER) + ["params", "variables"], "dyn")
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        for source in found:
            try:
                checked(source, None, declarations)
            except CelError:
                pass
        best = min(best, time.perf_counter() - start)
    print(f"{len(found)} expressions checked in {1e3 * best:.2f} ms (best of {args.repeat}), "
          f"{1e6 * best / len(found):.1f} µs each")


if __name__ == "__main__":
    main()
