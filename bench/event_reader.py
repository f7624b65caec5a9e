"""Would a reader built on libyaml's events beat today's composed nodes? The least such a reader would do, timed.

    python3 bench/event_reader.py DIR [--rounds 5]

Issue 25 named the C parser's events as a candidate for reading YAML with positions. This times, on the manifests
under DIR (best CPU of N rounds, one process, collector off), three things over the same texts:

- the C parser's events alone (`yaml._yaml.CParser.get_event` until the stream ends): the floor of any reader on
  events, since each event is a Python object with two marks;
- a minimal builder over those events: maps, lists and string scalars (tags resolved by the loader's memoised
  resolver, values left as text), no positions kept, no anchors, no duplicate-key or identity checks: strictly
  less than a reader aiadmit could ship;
- `webhook.inputs.sources.load_text`, what audits run: libyaml composes nodes (kept for positions), the node walk
  builds the objects, and every document is checked as a Kubernetes object.

If the minimal builder is not at least 5 % under load_text, no complete reader on events can be.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import yaml  # noqa: E402
from yaml import (MappingEndEvent, MappingStartEvent, ScalarEvent, ScalarNode, SequenceEndEvent,  # noqa: E402
                  SequenceStartEvent, StreamEndEvent)

from webhook.inputs.sources import _Loader, iter_manifest_files, load_text, read_text  # noqa: E402


def events_only(text: str) -> None:
    parser = yaml._yaml.CParser(text)
    try:
        while parser.get_event() is not None:
            pass
    except yaml.YAMLError:
        pass
    finally:
        parser.dispose()


def minimal_build(text: str) -> list:
    """Documents as maps, lists and strings from the event stream (see the module's docstring for what is left out)."""
    resolve = _Loader.resolve
    parser = yaml._yaml.CParser(text)
    documents: list = []
    open_: list = []  # the containers being filled, innermost last
    keys: list = []  # for each open container: the key waiting for its value (maps), else None
    try:
        while True:
            event = parser.get_event()
            kind = type(event)
            if kind is ScalarEvent:
                if not event.tag:
                    resolve(ScalarNode, event.value, event.implicit)
                value = event.value
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                open_.append({} if kind is MappingStartEvent else [])
                keys.append(None)
                continue
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                value = open_.pop()
                keys.pop()
            elif kind is StreamEndEvent:
                break
            else:
                continue
            if not open_:
                documents.append(value)
            elif type(open_[-1]) is dict:
                if keys[-1] is None:
                    keys[-1] = value
                else:
                    open_[-1][keys[-1]] = value
                    keys[-1] = None
            else:
                open_[-1].append(value)
    except (yaml.YAMLError, TypeError):  # TypeError: a map or list as a key, which this builder does not take
        pass
    finally:
        parser.dispose()
    return documents


def best(rounds: int, work, texts: list[str]) -> float:
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for text in texts:
            work(text)
        times.append(time.process_time() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    texts = [text for text, _ in (read_text(path) for path in iter_manifest_files([args.directory]))
             if text is not None]
    gc.disable()
    print(f"{len(texts)} files, {sum(map(len, texts)):,} characters; best CPU s of {args.rounds} rounds")
    floor = best(args.rounds, events_only, texts)
    minimal = best(args.rounds, minimal_build, texts)
    today = best(args.rounds, lambda text: load_text(text, "f"), texts)
    print(f"events alone                          {floor:.3f}")
    print(f"minimal builder on events             {minimal:.3f}")
    print(f"load_text (nodes, positions, checks)  {today:.3f}")
    print(f"minimal builder / load_text           {minimal / today:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
