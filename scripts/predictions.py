#!/usr/bin/env python3
"""Runs every prediction of docs/predictions.md and prints its tables.

Usage: scripts/predictions.py [--tlbkit PATH] [--out DIR] [--only NAME] [--part second|history]

Each table is a list of `tlbkit compare` commands (one per row and figure);
the script runs them (each once, with --format json), keeps every JSON
document in DIR (default: target/predictions) and prints the tables in
Markdown: each policy's mean over the seeds, and the ratios of the
mechanisms to the kernel they modify. The commands are printed above each
table, so that any figure can be repeated by hand. The simulator is
deterministic: the same build prints the same tables.

Runs take from seconds to minutes each; the whole set about an hour on two
cores (use --only to run one table).
"""

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys

# The tables: name, machine, cpu counts (a count over the preset's sockets is
# given sockets=2), workload, policies (the first is the reference of the
# ratios), runs, extra --set, figures (metrics), and a column per variant of
# settings where a table compares settings instead of policies.
MILAN_CPUS = [4, 8, 16, 32, 64, 128]
TABLES = [
    dict(name="invlpgb-lazytrim-613-tlb_flush2", machine="milan", cpus=MILAN_CPUS,
         workload="will_it_scale_tlb_flush2",
         policies=["x86-linux-613", "x86-linux-lazytrim", "x86-linux-invlpgb"], runs=5,
         metrics=["ops_per_s", "tlb_share"]),
    dict(name="lazytrim-613-hackbench", machine="milan", cpus=[8, 32, 64, 128], workload="hackbench",
         policies=["x86-linux-613", "x86-linux-lazytrim"], runs=5, sets=["migration=on"],
         metrics=["time_s"]),
    dict(name="lazytrim-613-swap-w-seq-mt", machine="milan", cpus=[4, 8, 16, 32, 64, 128], workload="swap_w_seq_mt",
         policies=["x86-linux-613", "x86-linux-lazytrim"], runs=3, metrics=["throughput", "elapsed_s"]),
    dict(name="latr-munmap", machine="haswell2s", cpus=[2, 4, 8, 12, 16], workload="munmap_latency",
         policies=["x86-linux-410", "x86-latr"], runs=5, metrics=["munmap_us"]),
    dict(name="latr-apache", machine="haswell2s", cpus=[2, 4, 8, 12, 16], workload="apache_like",
         policies=["x86-linux-410", "x86-latr"], runs=5, sets=["migration=on"],
         metrics=["requests_per_s", "us_per_request"]),
]
ARM3 = ["arm64-linux", "arm64-linux-activecpu", "arm64-linux-tlbmode"]
CORES_OF = {"graviton4": 96, "ampereone": 192}
for m, c in [("graviton4", 96), ("ampereone", 192)]:
    for label, sets in [("1mb", []), ("8mb", ["size_kb=8192"]), ("4mb-r", ["size_kb=4096", "random=1"])]:
        TABLES.append(dict(name=f"lat_mmap-{m}-{label}", machine=m, cpus=[c], workload="lat_mmap",
                           policies=ARM3, runs=3, sets=sets, metrics=["us_per_mapping"]))
for w in [1, 8, 32, 128]:
    TABLES.append(dict(name=f"stress_ng-ampereone-{w}", machine="ampereone", cpus=[192],
                       workload="stress_ng_tlb_shootdown", policies=ARM3, runs=2,
                       sets=[f"workers={w}", "ops=100"], metrics=["bogo_ops_per_s"]))
for m in ["graviton4", "ampereone"]:
    TABLES.append(dict(name=f"redis-{m}", machine=m, cpus=[16], workload="redis_like", policies=ARM3, runs=3,
                       metrics=["requests_per_s", "fork_us"]))
    TABLES.append(dict(name=f"redis-{m}-del10", machine=m, cpus=[16], workload="redis_like", policies=ARM3,
                       runs=3, sets=["del_pct=10"], metrics=["requests_per_s"]))
    for w, metric in [("mprotect_threaded", "elapsed_s"), ("tcmalloc_frag", "elapsed_s"),
                      ("exit_teardown", "exit_us")]:
        TABLES.append(dict(name=f"origin001-{m}-{w}", machine=m, cpus=[32], workload=w,
                           policies=["arm64-linux", "arm64-linux-skipbcast"] + ARM3[1:], runs=3,
                           metrics=[metric]))
    # The active_cpu series' own measurements: a kernel build's kernel time and fork.
    TABLES.append(dict(name=f"activecpu-buildkernel-{m}", machine=m, cpus=[16, 64], workload="buildkernel",
                       policies=ARM3[:2], runs=2, sets=["jobs={cpus}"], metrics=["sys_s", "elapsed_s"]))
    TABLES.append(dict(name=f"activecpu-lat_proc-{m}", machine=m, cpus=[CORES_OF[m]], workload="lat_proc",
                       policies=ARM3[:2], runs=3, metrics=["us_per_fork"]))
# Range TLBI: settings compared, under the stock policy.
for label, w, sets, metric in [
    ("lat_mmap-1mb", "lat_mmap", [], "us_per_mapping"),
    ("lat_mmap-4mb-r", "lat_mmap", ["size_kb=4096", "random=1"], "us_per_mapping"),
    ("stress_ng-1", "stress_ng_tlb_shootdown", ["workers=1", "ops=200"], "bogo_ops_per_s"),
]:
    TABLES.append(dict(name=f"tlbi_range-{label}", machine="graviton4", cpus=[96], workload=w,
                       policies=["arm64-linux"], runs=3, sets=sets, metrics=[metric],
                       variants=[["tlbi_range=off"], ["tlbi_range=on"]]))
TABLES.append(dict(name="tlbi_range-flush_range", machine="graviton4", cpus=[96], workload="flush_range",
                   policies=["arm64-linux"], runs=2, metrics=["us_per_call"],
                   variants=[[f"pages={p}", f"tlbi_range={r}"] for p in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
                             for r in ["off", "on"]]))
# Batched contpte unmapping, and the contpte series' own measurements.
for m in ["graviton4", "ampereone"]:
    TABLES.append(dict(name=f"pageout-{m}", machine=m, cpus=[8], workload="madvise_bench", policies=ARM3[:2],
                       runs=2, sets=["contpte=on"], metrics=["ms_per_call"],
                       variants=[["batch=0"], ["batch=1"]]))
    TABLES.append(dict(name=f"dontneed-{m}", machine=m, cpus=[8], workload="madvise_bench", policies=ARM3[:2],
                       runs=2, sets=["contpte=on", "advice=1"], metrics=["ms_per_call"],
                       variants=[["teardown=noopt"], ["teardown=clear_ptes"]]))
    TABLES.append(dict(name=f"dontneed-per-page-{m}", machine=m, cpus=[8], workload="madvise_bench",
                       policies=["arm64-linux"], runs=2, sets=["advice=1", "chunk_kb=4"],
                       metrics=["ms_per_call", "us_per_call"],
                       variants=[["contpte=folios"], ["contpte=on", "teardown=noopt"],
                                 ["contpte=on", "teardown=clear_ptes"]]))
    TABLES.append(dict(name=f"munmap-blocks-{m}", machine=m, cpus=[8], workload="madvise_bench",
                       policies=["arm64-linux"], runs=2, sets=["advice=2", "chunk_kb=64"],
                       metrics=["ms_per_call", "us_per_call"],
                       variants=[["contpte=folios"], ["contpte=on", "teardown=noopt"],
                                 ["contpte=on", "teardown=clear_ptes"]]))
TABLES.append(dict(name="pageout-x86-milan", machine="milan", cpus=[8], workload="madvise_bench",
                   policies=["x86-linux-lazytrim", "x86-linux-invlpgb"], runs=2, sets=["contpte=folios"],
                   metrics=["ms_per_call"], variants=[["batch=0"], ["batch=1"]]))

# The third set: the shootdown history before the origins, on the machines its
# authors and the kernel's test robots used (each preset's hardware threads).
HISTORY = []
X86_CF = ["x86-linux-512", "x86-linux-513"]
for m, n in [("skx8170", 104), ("icx8358", 128)]:
    nr_task = [1, n // 4, n // 2, n]
    for w in ["tlb_flush1", "tlb_flush2", "tlb_flush3"]:
        for mode, label in [(0, "threads"), (1, "processes")]:
            HISTORY.append(dict(name=f"cflush-{w}-{label}-{m}", machine=m, cpus=[n],
                                workload=f"will_it_scale_{w}", policies=X86_CF, runs=1,
                                sets=[f"mode={mode}", "smt=2"], metrics=["ops_per_s", "tlb_share"],
                                variants=[[f"tasks={t}"] for t in nr_task]))
    HISTORY.append(dict(name=f"cflush-context_switch1-threads-{m}", machine=m, cpus=[n],
                        workload="will_it_scale_context_switch1", policies=X86_CF, runs=1, sets=["smt=2"],
                        metrics=["ops_per_s"], variants=[[f"tasks={t}"] for t in nr_task]))
for m, n in [("icx8336c", 64), ("skl56", 56)]:
    HISTORY.append(dict(name=f"cflush-tlb_flush2-threads-{m}", machine=m, cpus=[n],
                        workload="will_it_scale_tlb_flush2", policies=X86_CF, runs=1, sets=["mode=0", "smt=2"],
                        metrics=["ops_per_s", "tlb_share"],
                        variants=[[f"tasks={t}"] for t in [1, n // 4, n // 2, n]]))
HISTORY.append(dict(name="cflush-madvise_dontneed_loop-hsw48", machine="hsw48", cpus=[48],
                    workload="madvise_dontneed_loop", policies=X86_CF, runs=1, metrics=["iter_ns", "iter_cycles"],
                    variants=[[f"threads={t}"] for t in [1, 2, 4, 8, 16, 24, 48]]))
# The full-flush ceiling: one flush's cost by the pages it covers.
for m in ["ivb3320m", "hsw48", "skx8170"]:
    HISTORY.append(dict(name=f"ceiling-flush_range-{m}", machine=m, cpus=[1], workload="flush_range",
                        policies=["x86-linux-pcid"], runs=1, metrics=["cycles_per_call"],
                        variants=[[f"pages={p}"] + v for p in [1, 2, 4, 8, 16, 24, 32, 33, 34, 48, 64]
                                  for v in [["flush_ceiling=4096"], ["flush_ceiling=4096", "pti=on"],
                                            ["flush_ceiling=0"]]]))
# Per-VMA locks against mmap_lock on faults.
for m, n, pol in [("skx8170", 104, "x86-linux-613"), ("icx8358", 128, "x86-linux-613"),
                  ("kunpeng920", 128, "arm64-linux")]:
    for label, sets in [("one-vma", ["procs=0"]), ("vma-per-thread", ["vmas=1"]), ("processes", ["procs=1"])]:
        HISTORY.append(dict(name=f"vma_locks-pft-{label}-{m}", machine=m, cpus=[n], workload="pft",
                            policies=[pol], runs=1, sets=sets, metrics=["faults_per_s"],
                            variants=[[f"tasks={t}", f"vma_locks={v}"] for t in [1, n // 4, n // 2, n]
                                      for v in ["off", "on"]]))
# Batched flushing: reclaim (v4.3), migration (v6.3), arm64 (v6.5).
HISTORY.append(dict(name="tlbbatch-lru-file-mmap-read-numa4x48", machine="numa4x48", cpus=[48],
                    workload="lru_file_mmap_read", policies=["x86-linux-410"], runs=1,
                    metrics=["throughput", "reclaim_flushes"],
                    variants=[["tlbbatch=off"], ["tlbbatch=on"]]))
HISTORY.append(dict(name="migrate_batch-pmbench-skx8170", machine="skx8170", cpus=[104],
                    workload="pmbench_migrate", policies=["x86-linux-613"], runs=1,
                    metrics=["access_ns", "migrate_pages_per_s"],
                    variants=[["migrate_batch=off"], ["migrate_batch=on"]]))
HISTORY.append(dict(name="migrate_batch-pmbench-kunpeng920", machine="kunpeng920", cpus=[128],
                    workload="pmbench_migrate", policies=["arm64-linux"], runs=1,
                    metrics=["access_ns", "migrate_pages_per_s"],
                    variants=[["migrate_batch=off"], ["migrate_batch=on"]]))
HISTORY.append(dict(name="tlbbatch-swap_pageout-skl56", machine="skl56", cpus=[56], workload="swap_pageout",
                    policies=["x86-linux-613"], runs=1, metrics=["pageout_us", "flushes_per_call"],
                    variants=[["tlbbatch=off"], ["tlbbatch=on"]]))
for w, metric in [("swap_pageout", "pageout_us"), ("lru_file_mmap_read", "throughput")]:
    HISTORY.append(dict(name=f"tlbbatch-arm64-{w}-kunpeng920", machine="kunpeng920", cpus=[128], workload=w,
                        policies=["arm64-linux"], runs=1, metrics=[metric],
                        variants=[["tlbbatch=off"], ["tlbbatch=on"]]))

CORES = {"milan": 64, "haswell2s": 16, "graviton4": 96, "ampereone": 192, "skx8170": 104, "icx8358": 128,
         "icx8336c": 64, "hsw48": 48, "skl56": 56, "numa4x48": 48, "kunpeng920": 128, "ivb3320m": 4}


def command(tlbkit, t, cpus, metric, variant):
    """Returns the command of one cell: `tlbkit compare` of the table's
    policies, or for a table of one policy `tlbkit run` (seed 1; the script
    runs seeds 1 to `runs`)."""
    one = len(t["policies"]) == 1
    c = [tlbkit, "run" if one else "compare", "--machine", t["machine"], "--cpus", str(cpus)]
    c += ["--workload", t["workload"]]
    for p in t["policies"]:
        c += ["--policy", p]
    if not one:
        c += ["--runs", str(t["runs"])]
    sets = [x.replace("{cpus}", str(cpus)) for x in t.get("sets", [])] + list(variant)
    if cpus > CORES[t["machine"]]:
        sets.append("sockets=2")
    for s in sets:
        c += ["--set", s]
    if metric and not one:
        c += ["--metric", metric]
    return c


def run_json(c, out_dir):
    """Runs the `tlbkit run` command `c` once and returns its JSON, kept in
    DIR/raw/ under a digest of the command, so that a table's figures read
    from one run share it."""
    raw = os.path.join(out_dir, "raw")
    os.makedirs(raw, exist_ok=True)
    path = os.path.join(raw, hashlib.sha256(shlex.join(c[1:]).encode()).hexdigest()[:24] + ".json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    p = subprocess.run(c + ["--format", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {shlex.join(c)}\n{p.stderr}")
    with open(path + ".tmp", "w") as f:
        f.write(p.stdout)
    os.replace(path + ".tmp", path)
    return json.loads(p.stdout)


def run(c, out_dir, key, runs=1, metric=None):
    """Runs `c` (cached in DIR/KEY.json) and returns its JSON; a `tlbkit run`
    is repeated over seeds 1 to `runs` and summarised as compare does."""
    path = os.path.join(out_dir, key + ".json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    if c[1] == "run":
        values, violations = [], 0
        for seed in range(1, runs + 1):
            out = run_json(c + ["--seed", str(seed)], out_dir)
            values.append(out["result"].get(metric, out["metrics"].get(metric)))
            violations += out["violations_total"]
        policy = c[c.index("--policy") + 1]
        doc = {"policies": [{"policy": policy, "avg": sum(values) / len(values), "values": values,
                             "violations": violations}]}
        text = json.dumps(doc, indent=2)
    else:
        p = subprocess.run(c + ["--format", "json"], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"failed: {shlex.join(c)}\n{p.stderr}")
        text = p.stdout
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return json.loads(text)


def fmt(x):
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.2f}"
    if a >= 0.1:
        return f"{x:.4f}"
    return f"{x:.6f}"


def table(tlbkit, t, out_dir):
    variants = t.get("variants", [[]])
    pols = t["policies"]
    print(f"### {t['name']}\n")
    print("```text")
    shown = set()
    # One seed: each policy is a `tlbkit run` (compare needs two seeds).
    each = [dict(t, policies=[p]) for p in pols] if t["runs"] == 1 and len(pols) > 1 else [t]
    for cpus in t["cpus"]:
        for metric in t["metrics"]:
            for u in each:
                c = command("tlbkit", u, cpus, metric, variants[0] if len(variants) == 1 else ["..."])
                s = shlex.join(c).replace("'...'", "<variant>").replace("--set ...", "<variant>")
                if s not in shown:
                    shown.add(s)
                    print(s)
    if len(variants) > 1:
        print("# <variant>: " + " | ".join(" ".join(f"--set {s}" for s in v) for v in variants))
    if len(each) > 1 or len(pols) == 1:
        print("# with --seed 1" if t["runs"] == 1 else f"# each with --seed 1 to {t['runs']}; the table gives the mean")
    print("```\n")
    head = ["CPUs", "variant"] + [f"{p} `{m}`" for m in t["metrics"] for p in pols]
    if len(pols) > 1:
        head += [f"{p} / {pols[0]} (`{t['metrics'][0]}`)" for p in pols[1:]]
    if len(variants) > 1:
        head += [f"{p} / first variant (`{t['metrics'][0]}`)" for p in pols]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for cpus in t["cpus"]:
        first = None
        for v in variants:
            means = {}
            for metric in t["metrics"]:
                key = "-".join([t["name"], str(cpus), metric] + [s.replace("=", "") for s in v])
                docs = [run(command(tlbkit, u, cpus, metric, v), out_dir,
                            key + ("-" + u["policies"][0] if len(each) > 1 else ""), t["runs"], metric)
                        for u in each]
                for p in [p for d in docs for p in d["policies"]]:
                    means[(p["policy"], metric)] = p["avg"]
                    if p["violations"]:
                        sys.exit(f"violations in {key}")
            row = [str(cpus), " ".join(v) or "-"]
            row += [fmt(means[(p, m)]) for m in t["metrics"] for p in pols]
            if len(pols) > 1:
                m0 = t["metrics"][0]
                row += [f"{means[(p, m0)] / means[(pols[0], m0)]:.3f}" for p in pols[1:]]
            if len(variants) > 1:
                m0 = t["metrics"][0]
                first = first or means
                row += [f"{means[(p, m0)] / first[(p, m0)]:.3f}" for p in pols]
            print("| " + " | ".join(row) + " |")
    print()


def main():
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--tlbkit", default="target/release/tlbkit")
    a.add_argument("--out", default="target/predictions")
    a.add_argument("--only")
    a.add_argument("--part", choices=["second", "history"], default="second",
                   help="second: the second set's tables; history: the pre-seed history's")
    args = a.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for t in TABLES if args.part == "second" else HISTORY:
        if args.only and args.only not in t["name"]:
            continue
        table(args.tlbkit, t, args.out)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
