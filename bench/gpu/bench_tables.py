"""The tables of a GPU bench run (bench/gpu/check.sh run bench) that summarize.py prints:
kernel times against PyTorch, the shared-memory staging experiment, the device hot-row
cache, reload under load and the server sweep, each from the JSON lines of its step."""


def print_kernel_tables(ours, torch):
    copy = next((r["gbps"] for r in ours if r.get("bench") == "copy"), None)
    if copy:
        print(f"device-to-device copy: {copy:.0f} GB/s")
    lookups = [r for r in ours if r.get("bench") == "lookup"]
    if lookups:
        print("fused lookup (L2 flushed)   target: >= 80% of copy at >= 64k lookups")
        print(f"{'rows':>8} {'lookups':>9} {'bag':>3} {'ids':>7} {'reorder':>7} {'pf':>2} {'us':>9}"
              f" {'GB/s':>7} {'%copy':>6} {'host us':>9} {'dev+host':>9}")
        for r in lookups:
            rows = f"{r.get('dtype', 'fp32')} {r.get('dim', 32):.0f}"
            print(f"{rows:>8} {r['lookups']:9.0f} {r['bag']:3.0f} {r['ids']:>7} {r['reorder']:7.0f} "
                  f"{r.get('prefetch', 0):2.0f} "
                  f"{r['us']:9.1f} {r['gbps']:7.0f} {r['pct_of_copy']:6.0f}"
                  f" {r.get('host_pack_us', 0):9.1f} {r.get('us_with_host_pack', 0):9.1f}")
    # l2_flushed: 1 where the L2 was flushed before each run (cold); 0, or absent (the runs up
    # to 2026-12-04, which cycled a pool that fits in the L2), warm.
    batches = {(r.get("l2_flushed", 0), r["candidates"], r["graphs"], r["reorder"],
                r.get("stage_events", 1), r.get("autotune", 1)): r
               for r in ours if r.get("bench") == "batch"}
    peers = {(r.get("l2_flushed", 0), r["candidates"], r["mode"]): r
             for r in torch if r.get("bench") == "torch"}
    for l2 in sorted({k[0] for k in batches} | {k[0] for k in peers}, reverse=True):
        print_batch_table(l2, {k[1:]: r for k, r in batches.items() if k[0] == l2},
                          {k[1:]: r for k, r in peers.items() if k[0] == l2})
    algos = [r for r in ours if r.get("bench") == "mlp_algo"]
    if algos:
        print("MLP algorithms (autotune: the heuristic's first that ran -> the one kept, us per matmul)")
        for r in algos:
            print(f"  {r['plan']:>6} layer {r['layer']:.0f} ({r['in']:.0f} -> {r['out']:.0f}) "
                  f"{r['rows']:5.0f} rows: kept proposal {r['index']:.0f} (0: the heuristic's "
                  f"first), {r['ran']:.0f} ran, "
                  + (f"{r['first_us']:.1f} -> {r['chosen_us']:.1f}" if r['first_us'] > 0
                     else "not timed"))
    hosts = [r for r in ours if r.get("bench") == "host_tables"]
    if hosts:
        print("cache.placement: host (tables in mapped host memory), device us per batch, graphs on")
        print(f"{'zipf':>5} {'cand':>5} {'hot':>5} {'host':>9} {'device':>9} {'x':>6} {'hit rate':>8}")
        for r in hosts:
            print(f"{r['zipf']:5.2f} {r['candidates']:5.0f} {r['hot_rows']:5.0f} {r['device_us']:9.1f} "
                  f"{r['device_tables_us']:9.1f} {r['device_us'] / r['device_tables_us']:6.2f} "
                  f"{r['hit_rate']:8.3f}")


def print_batch_table(l2, batches, peers):
    """Per-batch device time against PyTorch, for one L2 state: batches keyed (candidates,
    graphs, reorder, stage_events, autotune), peers (candidates, mode)."""
    state = ("L2 flushed before each run (cold)" if l2 else
             "L2 warm (the pool's rows fit in it: not cold)")
    print(f"device us per batch, 1 request, a pool of 64 distinct batches cycled, {state}   "
          "targets: torch eager / ours >= 5, torch graph / ours >= 1.5")
    print(f"{'cand':>5} {'graphs':>8} {'no graph':>9} {'launch':>6} {'torch eg':>9} {'torch gr':>9} "
          f"{'eager/us':>9} {'graph/us':>9} {'no events':>9} {'heur algo':>9}")

    def us(row):
        return f"{row['device_us']:9.1f}" if "device_us" in row else f"{'-':>9}"

    for n in (16, 256, 1024):
        g, ng = batches.get((n, 1, 0, 1, 1), {}), batches.get((n, 0, 0, 1, 1), {})
        # The same graphs without their stage event nodes: what the nodes cost; and with the
        # MLPs on the cuBLASLt heuristic's first algorithms: what the autotune gains.
        quiet = batches.get((n, 1, 0, 0, 1), {})
        heuristic = batches.get((n, 1, 0, 1, 0), {})
        te, tg = peers.get((n, "eager"), {}), peers.get((n, "graph"), {})
        ours_us = g.get("device_us")

        def ratio(peer):
            return f"{peer['device_us'] / ours_us:9.1f}" if ours_us and "device_us" in peer else f"{'-':>9}"

        print(f"{n:5d} {us(g)[1:]:>8} {us(ng)} {g.get('launches', 0):6.0f} {us(te)} {us(tg)} "
              f"{ratio(te)} {ratio(tg)} {us(quiet)} {us(heuristic)}")


def print_smem_staging(ours):
    """The shared-memory staging experiment's table; its failures (a variant whose pooled
    values differ from the plain lookup's: its time means nothing)."""
    rows = [r for r in ours if r.get("bench") == "smem_staging"]
    checks = [r for r in ours if r.get("bench") == "smem_staging_check"]
    failures = []
    if checks:
        differ = [r for r in checks if r.get("same_bits") != 1]
        print(f"hot rows staged in shared memory, bit check on weighted multi-id bags: "
              f"{len(checks) - len(differ)} of {len(checks)} variants same bits")
        for r in differ:
            failures.append(f"smem_staging_check: {r['variant']} (staged {r['staged']:.0f}) pools "
                            f"other values than the plain lookup")
    if not rows:
        return failures
    print("hot rows staged in shared memory vs the plain lookup (L2 warm, 8 batches cycled), us")
    print(f"{'zipf':>5} {'cand':>5} {'variant':>24} {'staged':>6} {'hit rate':>8} {'us':>8} "
          f"{'plain':>8} {'x':>6} {'bits':>5}")
    for r in rows:
        same = r.get("same_bits") == 1
        print(f"{r['zipf']:5.2f} {r['candidates']:5.0f} {r['variant']:>24} {r['staged']:6.0f} "
              f"{r['hit_rate']:8.3f} {r['us']:8.1f} {r['plain_us']:8.1f} "
              f"{r['us'] / r['plain_us']:6.2f} {'same' if same else 'DIFF':>5}")
        if not same:
            failures.append(f"smem_staging: {r['variant']} (staged {r['staged']:.0f}, "
                            f"{r['candidates']:.0f} candidates) pools other values than the plain lookup")
    return failures


def print_hot_cache(rows):
    """The placement: host server's device-cache line; its failures (no hit)."""
    failures = []
    for r in rows:
        if r.get("bench") == "hot_cache":
            print(f"cache.placement: host, device hot-row cache: {r.get('hits', 0):.0f} hits, "
                  f"{r.get('misses', 0):.0f} misses (hit rate {r.get('hit_rate', 0):.2f})")
            if not r.get("ok"):
                failures.append("hot_cache: " + "; ".join(r.get("problems", [])))
    return failures


def print_reload(rows):
    """The server_reload.sh table; returns the failures it shows."""
    windows = [r for r in rows if r.get("bench") == "reload"]
    summary = next((r for r in rows if r.get("bench") == "reload_summary"), None)
    if not windows and summary is None:
        return []
    print("server on cuda, reload under load   target: no failed request, p99 swapping <= 2x steady")
    for r in windows:
        if "problem" in r:
            print(f"  {r['window']:>6} not measured: {r['problem'][:150]}")
            continue
        print(f"  {r['window']:>6} {r['qps']:8.0f} qps  p50 {r['p50_ms']:7.3f} ms  p99 {r['p99_ms']:7.3f} ms"
              f"  errors {r['errors']}  reloads {r['reloads']}")
    if summary is None:
        return ["reload: no summary"]
    if "problem" in summary:
        return [f"reload: {summary['problem'][:150]}"]
    print(f"  p99 swapping / steady: {summary['p99_ratio']:.2f}; {summary['reloads']} reloads;"
          f" {summary['errors']} failed requests")
    failures = []
    if summary["errors"] > 0:
        failures.append(f"reload: {summary['errors']} failed requests")
    if any(r.get("reloads", 0) == 0 for r in windows if r["window"] == "swap"):
        failures.append("reload: a swap window saw no reload")
    return failures


def print_sweep(rows):
    """The server_sweep.sh table: settings x concurrency, with the server's stage means."""
    rows = [r for r in rows if r.get("bench") == "sweep"]
    if not rows:
        return
    print("server on cuda, 256 candidates, engine settings   target: >= 10000 qps at p99 <= 1 ms")
    print(f"  {'setting':>24} {'conc':>4} {'qps':>7} {'p50 ms':>7} {'p99 ms':>7} {'cores':>5}"
          f" {'call':>6} {'decode':>6} {'queue':>6} {'device':>6} {'encode':>6} {'batch':>5}")
    for r in rows:
        if "problem" in r:
            print(f"  {r.get('setting', '?'):>24} not run: {r['problem'][:150]}")
            continue
        device = sum(r.get(k, 0) for k in ("lookup_us", "cross_us", "dnn_us", "topk_us"))
        print(f"  {r['setting']:>24} {r['concurrency']:4} {r['qps']:7.0f} {r['p50_ms']:7.3f}"
              f" {r['p99_ms']:7.3f} {r.get('cpu_busy_cores', 0):5.1f} {r.get('request_us', 0):6.0f}"
              f" {r.get('decode_us', 0):6.0f} {r.get('queue_us', 0):6.0f} {device:6.0f}"
              f" {r.get('encode_us', 0):6.0f} {r.get('batch_requests', 0):5.2f}")
    print("  (call, decode, queue, device = lookup+cross+dnn+top-K stage events, encode: server means"
          " in us; batch: requests per batch; cores: busy cores of the machine, client included)")
