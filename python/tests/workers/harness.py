"""harness.py -- runs a worker's check_* functions on one rank and writes rank<N>.json.

A check that raises fails (its traceback is kept); Skip marks it skipped. Checks run in the order
they are defined, every rank runs all of them, so collectives stay matched across ranks as long
as every rank's check gets as far as the others'.
"""
import json
import os
import sys
import time
import traceback


class Skip(Exception):
    pass


def run(module_globals, ctx):
    rank = int(os.environ["RANK"])
    results = {}
    checks = [(n, f) for n, f in module_globals.items() if n.startswith("check_") and callable(f)]
    for name, fn in checks:
        t0 = time.monotonic()
        try:
            fn(ctx)
            results[name] = {"ok": True}
        except Skip as e:
            results[name] = {"ok": True, "skip": str(e) or "skipped"}
        except BaseException:
            results[name] = {"ok": False, "error": traceback.format_exc()}
            print(f"rank {rank}: {name} failed:\n{results[name]['error']}", file=sys.stderr)
        results[name]["seconds"] = round(time.monotonic() - t0, 3)
        sys.stdout.flush()
    out = os.environ["WEFT_TEST_OUT"]
    with open(os.path.join(out, f"rank{rank}.json.tmp"), "w") as f:
        json.dump(results, f, indent=1)
    os.replace(os.path.join(out, f"rank{rank}.json.tmp"), os.path.join(out, f"rank{rank}.json"))
    return results


def extra_ports():
    return [int(p) for p in os.environ["WEFT_TEST_PORTS"].split(",")]
