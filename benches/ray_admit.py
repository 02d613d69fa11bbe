"""gyre.ray against one process, on one machine, in one run.

For one `gyre synth` recording (and the same executions as 16 per-worker recordings, cut from it
by execution with `gyre.split`), times

- `gyre.load(files).admit().to_arrow()` in one process, and
- `gyre.ray.admit(files, shards=k)` (the rows gathered on the driver as one `pyarrow.Table`) for
  k = 1, 2 and 4, three ways: the first call of a driver, which starts the shard actors'
  processes ("cold"); the first call after `gyre.ray.start(shards=k, wait=True)` (the actors
  started at job start, "started"); and a second call, on the actors the first one kept
  ("kept", a trainer's every later step),

each in a fresh driver process on one local Ray instance started beforehand (its start is not
timed). Ray starts as many idle Python workers as CPUs with the instance, which the first actors
take; the benchmark uses them up first, so every cold call starts its actors' processes, as a
trainer's first admission does once its own actors hold those workers. Each figure is the
median of `--repeat` drivers. Reports wall time, peak RSS of the driver and of every shard
actor, bytes the driver and the shards exchanged (`reports`' `driver_bytes`: the only data that
crosses the object store or the driver; here, the rows gathered on the driver), bytes of
recordings the driver read (none: `gyre.files_read` there) and the shards read, and the load
average.

    PYTHONPATH=... python benches/ray_admit.py --gyre target/release/gyre --dir /tmp/bench \\
        --executions 640 --turns 40 --context 16000      # about 1.06 GB

Measured figures and the machine they came from belong in the commit message and the issue's
closing note, not here.
"""

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = "--child"


def child(args) -> None:
    """One measured admission in this (fresh) process; prints one JSON line."""
    import gyre

    files = json.loads(args.files)
    out = {"what": args.what, "files": len(files), "shards": args.shard_count}
    if args.what == "one process":
        t = time.perf_counter()
        table = gyre.load(files).admit().to_arrow()
        out["wall_s"] = time.perf_counter() - t
    else:
        import ray

        import gyre.ray

        ray.init(address=args.address, log_to_driver=False)
        if args.what == "started":
            gyre.ray.start(shards=args.shard_count, wait=True)
        reports = []
        t = time.perf_counter()
        table = gyre.ray.admit(files, shards=args.shard_count, reports=reports)
        out["wall_s"] = time.perf_counter() - t
        if args.what == "cold":
            # Again, with the actors kept from the first call (a trainer's every later step).
            del table
            reports = []
            t = time.perf_counter()
            table = gyre.ray.admit(files, shards=args.shard_count, reports=reports)
            out["kept_s"] = time.perf_counter() - t
        out["put_bytes"] = sum(r["driver_bytes"] for r in reports)
        out["shards_rss"] = [r["peak_rss"] for r in reports]
        out["shards_read"] = sum(sum(r["files_read"].values()) for r in reports)
    out["rows"] = table.num_rows
    out["driver_read"] = sum(gyre.files_read().values())
    from gyre.ray import _peak_rss

    out["driver_rss"] = _peak_rss()
    print(json.dumps(out))


def run(args, what, files, shards=0, address=""):
    """The median (by wall time) of `args.repeat` drivers, each its own process."""
    cmd = [sys.executable, __file__, CHILD, "--what", what, "--files", json.dumps(files),
           "--shard-count", str(shards), "--address", address]
    runs = []
    for _ in range(args.repeat):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"{what} failed:\n{p.stderr}")
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    runs.sort(key=lambda r: r["wall_s"])
    median = runs[len(runs) // 2]
    if "kept_s" in median:
        median["kept_s"] = sorted(r["kept_s"] for r in runs)[len(runs) // 2]
    return median


def use_up_idle_workers(ray) -> None:
    """Ends the idle Python workers Ray started with the instance (one per CPU): zero-CPU actors
    take them, and ending an actor ends its process."""

    class Idle:
        def pid(self) -> int:
            return os.getpid()

    cpus = int(ray.cluster_resources().get("CPU", 1))
    actors = [ray.remote(Idle).options(num_cpus=0).remote() for _ in range(2 * cpus)]
    ray.get([a.pid.remote() for a in actors])
    for a in actors:
        ray.kill(a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(CHILD, action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--what", help=argparse.SUPPRESS)
    ap.add_argument("--files", help=argparse.SUPPRESS)
    ap.add_argument("--address", help=argparse.SUPPRESS)
    ap.add_argument("--shard-count", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--gyre", default="target/release/gyre", help="the gyre binary (for synth)")
    ap.add_argument("--dir", help="where the recordings are written (required)")
    ap.add_argument("--executions", type=int, default=640)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--context", type=int, default=16000)
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--cpus", type=int, default=None, help="CPUs Ray gets (default: all)")
    ap.add_argument("--repeat", type=int, default=3, help="drivers per figure (the median is reported)")
    args = ap.parse_args()
    if args.child:
        return child(args)
    if not args.dir:
        ap.error("--dir is required")

    import gyre
    import ray

    os.makedirs(args.dir, exist_ok=True)
    one = os.path.join(args.dir, f"synth-{args.executions}-{args.turns}-{args.context}.jsonl")
    if not os.path.exists(one):
        subprocess.run([args.gyre, "synth", "--out", one, "--executions", str(args.executions),
                        "--turns", str(args.turns), "--context", str(args.context)], check=True)
    workers = [os.path.join(args.dir, f"worker-{k:02d}.jsonl") for k in range(16)]
    if not all(os.path.exists(w) for w in workers):
        # Each worker's recording: its executions' lines, whole, in order (blank lines dropped).
        for w, part in zip(workers, gyre.split(one, 16)):
            with open(w, "wb") as f:
                f.write(b"\n".join(line for line in part.split(b"\n") if line) + b"\n")
    size = os.path.getsize(one)
    # Into the page cache (this process is not a measured driver), so that the first driver
    # finds them there as the later ones do.
    for path in [one] + workers:
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
    print(f"recording: {size / 1e9:.2f} GB, {args.executions} executions; load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)

    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    use_up_idle_workers(ray)
    address = ray.get_runtime_context().gcs_address
    rows = []
    for files in ([one], workers):
        base = run(args, "one process", files)
        rows.append((base, None))
        for k in args.shards:
            cold = run(args, "cold", files, k, address)
            started = run(args, "started", files, k, address)
            assert cold["rows"] == started["rows"] == base["rows"], (cold, started, base)
            rows.append((cold, started))
        for cold, started in rows[-len(args.shards):]:
            for r in (cold, started):
                r["x"] = r["wall_s"] / base["wall_s"]
            cold["kept_x"] = cold["kept_s"] / base["wall_s"]
    ray.shutdown()

    mb = lambda b: f"{b / 2**20:,.0f}"  # noqa: E731
    print("\n| files | path | shards | wall s (cold: actors start) | × | wall s (after `start()`) | × "
          "| wall s (actors kept) | × | driver peak RSS MiB | shard peak RSS MiB | driver⇄shards MiB "
          "| driver read MiB | shards read MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r, started in rows:
        if started is None:
            print(f"| {r['files']} | one process | – | {r['wall_s']:.2f} | 1.00 | – | – | – | – "
                  f"| {mb(r['driver_rss'])} | – | 0 | {mb(r['driver_read'])} | – |")
            continue
        shard_rss = ", ".join(mb(x) for x in r["shards_rss"])
        print(f"| {r['files']} | gyre.ray | {r['shards']} | {r['wall_s']:.2f} | {r['x']:.2f} "
              f"| {started['wall_s']:.2f} | {started['x']:.2f} | {r['kept_s']:.2f} | {r['kept_x']:.2f} "
              f"| {mb(r['driver_rss'])} | {shard_rss} | {mb(r['put_bytes'])} | {mb(r['driver_read'])} "
              f"| {mb(r['shards_read'])} |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} CPUs; median of {args.repeat} drivers per figure")


if __name__ == "__main__":
    main()
