#!/usr/bin/env python3
"""The first admission of a fresh Ray job, against one process.

Each pair runs, in fresh processes: `gyre.load` + `admit` of RECORDING alone, then a driver that
starts its own Ray instance (`ray.init(num_cpus=CPUS)`, which starts Ray's idle workers, one
per CPU), lets the job's set-up time pass (`--setup`, as a trainer loads its model), and times
`gyre.ray.admit([RECORDING], shards=SHARDS)` twice: the first call, whose shard actors take
Ray's idle workers, and the next one, with the actors kept. Prints each pair and the medians.
`benches/ray_admit.py` measures the colder case, where other work took those workers first.

    target/py-test/bin/python benches/ray_first_call.py RECORDING --pairs 3
"""

import argparse
import json
import statistics
import subprocess
import sys
import time


def child(args) -> None:
    if args.what == "one":
        import gyre

        t = time.perf_counter()
        rows = gyre.load([args.recording]).admit().to_arrow().num_rows
        print(json.dumps({"one": time.perf_counter() - t, "rows": rows}))
        return
    import ray

    import gyre.ray

    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    time.sleep(args.setup)
    t = time.perf_counter()
    rows = gyre.ray.admit([args.recording], shards=args.shards).num_rows
    first = time.perf_counter() - t
    t = time.perf_counter()
    gyre.ray.admit([args.recording], shards=args.shards)
    kept = time.perf_counter() - t
    ray.shutdown()
    print(json.dumps({"first": first, "kept": kept, "rows": rows}))


def run(args, what: str) -> dict:
    cmd = [sys.executable, __file__, args.recording, "--child", what, "--shards", str(args.shards),
           "--cpus", str(args.cpus), "--setup", str(args.setup)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recording", help="a gyre/1 recording (e.g. one written by benches/ray_admit.py)")
    ap.add_argument("--child", dest="what", help=argparse.SUPPRESS)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--cpus", type=int, default=2, help="CPUs the Ray instance gets")
    ap.add_argument("--setup", type=float, default=10.0, help="seconds between ray.init and the first call")
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    if args.what:
        child(args)
        return
    with open(args.recording, "rb") as f:  # into the page cache, for both sides alike
        while f.read(1 << 24):
            pass
    one, first, kept = [], [], []
    for _ in range(args.pairs):
        a, b = run(args, "one"), run(args, "ray")
        assert a["rows"] == b["rows"], (a, b)
        one.append(a["one"])
        first.append(b["first"])
        kept.append(b["kept"])
        print(f"one process {a['one']:.2f} s · first call {b['first']:.2f} s ({b['first'] / a['one']:.2f}×) · "
              f"kept {b['kept']:.2f} s ({b['kept'] / a['one']:.2f}×)", flush=True)
    m = statistics.median(one)
    print(f"medians: one process {m:.2f} s · first call {statistics.median(first):.2f} s "
          f"({statistics.median(first) / m:.2f}×) · kept {statistics.median(kept):.2f} s ({statistics.median(kept) / m:.2f}×)")


if __name__ == "__main__":
    main()
