"""``python -m tlbkit sweep FILE.toml [--results PATH] [--jobs N] [--ray [ADDRESS]]``:
the CLI's sweep, with ``--ray`` to run it as Ray tasks on a cluster (the
``tlbkit`` binary has no Ray client; this is its sweep from Python). Exit codes
as the CLI's: 0, 2 for bad input or failed runs, 3 if a run found violations.

``python -m tlbkit check-ray TOKEN --state-out FILE [--ray ADDRESS] [--search
sharded] [--checkpoint DIR [--checkpoint-every S] [--max-memory BYTES]
[--resume]] [--nodes K]``: the driver of a distributed exhaustive check, its
visited set sharded among the nodes, for ``tlbkit check --ray`` (which makes
the report from what is written to FILE: the nodes' totals, a violation's
token among them); exit 3 when a node found a violation (the binary shrinks
it to its counterexample); exit 2 when the search stopped after a snapshot
(its memory cap) or lost a node, saying how to resume."""

import argparse
import sys

import tlbkit


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tlbkit")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sweep", help="run every point of a grid (TOML) missing from its results file")
    s.add_argument("file", help="the experiment file (TOML), as tlbkit sweep takes it")
    s.add_argument("--results", help="the results file (default: the file's results, else its name with .jsonl)")
    s.add_argument("--jobs", type=int, help="host threads; with --ray, tasks in flight")
    s.add_argument("--ray", metavar="ADDRESS", nargs="?", const="", default=None,
                   help="run the points as Ray tasks on the cluster at ADDRESS (without one: RAY_ADDRESS, "
                        "else a local cluster)")
    c = sub.add_parser("check-ray", help="the driver of a distributed check (tlbkit check --ray runs it)")
    c.add_argument("token", help="the check, as tlbkit check --ray names it")
    c.add_argument("--state-out", required=True, help="where to write the final state")
    c.add_argument("--ray", metavar="ADDRESS", default=None, help="the cluster (default: RAY_ADDRESS, else a local one)")
    c.add_argument("--search", choices=["sharded"], default="sharded",
                   help="the visited set sharded among the nodes (the only search)")
    c.add_argument("--checkpoint", metavar="DIR", help="take snapshots of the search in DIR")
    c.add_argument("--checkpoint-every", type=float, default=60.0, metavar="SECONDS",
                   help="seconds between snapshots (default 60)")
    c.add_argument("--max-memory", type=int, metavar="BYTES",
                   help="a node's part of the visited set past BYTES saves the search and stops it")
    c.add_argument("--resume", action="store_true", help="go on from the snapshot in --checkpoint's DIR")
    c.add_argument("--nodes", type=int, help="use the first NODES nodes of the cluster (default: all)")
    a = p.parse_args(argv)
    if a.cmd == "check-ray":
        from tlbkit import _ray

        saving = {}
        if a.checkpoint is not None:
            saving = dict(checkpoint=a.checkpoint, every_s=a.checkpoint_every, max_memory=a.max_memory,
                          resume=a.resume)
        if a.nodes is not None:
            saving["nodes"] = a.nodes
        try:
            r = _ray.check(a.token, address=a.ray or None, state_out=a.state_out, search=a.search, **saving)
        except _ray.Stopped as e:
            print(f"tlbkit: {e}", file=sys.stderr)
            return 2
        except (ValueError, RuntimeError) as e:
            # Bad input, or a search that lost a node.
            print(f"tlbkit: error: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
        import json

        return 3 if json.loads(r).get("counterexample") else 0
    try:
        df = tlbkit.sweep(a.file, jobs=a.jobs, results=a.results,
                          executor=None if a.ray is None else "ray", address=a.ray or None)
    except ValueError as e:
        print(f"tlbkit: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 3 if len(df) and (df["violations"] > 0).any() else 0


if __name__ == "__main__":
    sys.exit(main())
