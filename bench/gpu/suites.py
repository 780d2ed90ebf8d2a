#!/usr/bin/env python3
"""The GPU test suites of a GPU check run: one gpu_tests process per suite.

Each suite is a gtest filter over gpu_tests; every test of gpu_tests belongs to exactly one
suite, except the tests in EXEMPT, which check the behaviour *without* a GPU and so skip
on one. `check` proves the partition on the binary's own test list (a CPU test runs it, so
a new GPU test cannot silently fall outside every suite).

usage: suites.py names                 the suite names, in run order (run_tests.sh runs
                                       fault after memcheck and racecheck)
       suites.py filter NAME           the --gtest_filter of one suite
       suites.py memcheck              the --gtest_filter of the memcheck subset
       suites.py racecheck             the --gtest_filter of the racecheck subset
       suites.py check LIST_FILE       LIST_FILE: `gpu_tests --gtest_list_tests` output
"""

import fnmatch
import sys

# (name, [gtest patterns]) in run order; "smoke" runs first and alone gates the others.
SUITES = [
    ("smoke", ["GpuSmokeTest.*"]),
    ("lookup", ["Tables/LookupKernelTest.*", "LookupLaunchTest.*"]),
    ("interaction", ["Widths/DotKernelTest.*", "ConcatUserKernelTest.*", "InteractionLaunchTest.*"]),
    ("topk", ["Sizes/TopKKernelTest.*", "TopKLaunchTest.*"]),
    ("pipeline", ["Models/CudaPipelineTest.*", "CudaGraphReplayTest.*", "PrefetchIdsTest.*"]),
    # A graph re-pointed in place after a staging grow (cudaGraphExecUpdate). A refusal costs
    # an instantiation, not a score (pipeline checks the scores of the same batches), so it
    # fails here, under its own name, apart from any wrong score.
    ("graph_update", ["CudaGraphUpdateTest.*"]),
    ("host_tables", ["Cases/CudaHostTablesTest.*", "CudaHostTablesRefusalTest.*",
                     "CudaHostTablesLaunchTest.*"]),
    ("module", ["CudaModuleTest.*"]),
    ("backend", ["CudaBackendTest.*", "CudaStatusTest.*"]),
    # A real device fault, in a child process of its own (a death test).
    ("fault", ["CudaDeviceFaultDeathTest.*"]),
]
EXEMPT = ["CudaBackendTest.WithoutAGpuCreationSaysWhy"]

# A few small cases under compute-sanitizer memcheck (it slows kernels down ~100x).
MEMCHECK = [
    "Tables/LookupKernelTest.*/fp16_dim12_reorder",
    "Tables/LookupKernelTest.*/fp32_dim8_misaligned",
    "Tables/LookupKernelTest.*/int8_dim12_reorder",
    "Widths/DotKernelTest.*/dim12_noz",
    "Sizes/TopKKernelTest.*/127_128_129_ties",
    "Sizes/TopKKernelTest.*/1_2_100_129_ties_nans",
    "Models/CudaPipelineTest.*/dot_fp32_dim32_graphs",
    "Models/CudaPipelineTest.*/dcn_fp32_dim12_graphs",
    "Models/CudaPipelineTest.*/concat_fp32_dim12_graphs",
    "Models/CudaPipelineTest.*/dot_int8_dim32_graphs",
    "CudaGraphReplayTest.ReplaysOnOtherBatchesOfTheSameBucket",
    "Cases/CudaHostTablesTest.*/fp32_dim16_graphs",
    "CudaHostTablesLaunchTest.HotIdsPoolTheCachedRowsAndColdIdsTheTableRows",
]

# Small cases of the kernels that share data through shared memory, under compute-sanitizer
# racecheck (any hazard fails the check): the dot kernel's per-warp staging and the top-K's
# block radix sort (CUB) with its warp-transposed load.
RACECHECK = [
    "Widths/DotKernelTest.*/dim12_noz",
    "Sizes/TopKKernelTest.*/127_128_129_ties",
]


def gtest_filter(patterns, negative=()):
    text = ":".join(patterns)
    return text + (":-" + ":".join(negative) if negative else "")


def suite_filter(name):
    for suite, patterns in SUITES:
        if suite == name:
            exempt = [t for t in EXEMPT if any(fnmatch.fnmatchcase(t, p) for p in patterns)]
            return gtest_filter(patterns, exempt)
    raise KeyError(name)


def parse_test_list(text):
    """Full test names from `--gtest_list_tests` output."""
    tests, suite = [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        name = line.split("#")[0].rstrip()
        if not line.startswith(" "):
            suite = name.strip()
        elif suite is not None:
            tests.append(suite + name.strip())
    return tests


def check(tests):
    """Problems with the partition of `tests` into suites (empty: none)."""
    problems = []
    for test in tests:
        if test in EXEMPT:
            continue
        owners = [s for s, pats in SUITES if any(fnmatch.fnmatchcase(test, p) for p in pats)]
        if len(owners) != 1:
            problems.append(f"{test}: in {len(owners)} suites ({', '.join(owners) or 'none'})")
    for tool, patterns in (("memcheck", MEMCHECK), ("racecheck", RACECHECK)):
        for pattern in patterns:
            if not any(fnmatch.fnmatchcase(t, pattern) for t in tests):
                problems.append(f"{tool} pattern {pattern} matches no test")
    for test in EXEMPT:
        if test not in tests:
            problems.append(f"exempt test {test} does not exist")
    return problems


def main(argv):
    if len(argv) >= 2 and argv[1] == "names":
        print(" ".join(name for name, _ in SUITES))
    elif len(argv) == 3 and argv[1] == "filter":
        print(suite_filter(argv[2]))
    elif len(argv) == 2 and argv[1] == "memcheck":
        print(gtest_filter(MEMCHECK))
    elif len(argv) == 2 and argv[1] == "racecheck":
        print(gtest_filter(RACECHECK))
    elif len(argv) == 3 and argv[1] == "check":
        with open(argv[2]) as f:
            tests = parse_test_list(f.read())
        problems = check(tests)
        for p in problems:
            print(f"suites: {p}", file=sys.stderr)
        if not tests:
            print("suites: the test list is empty", file=sys.stderr)
            return 1
        print(f"suites: {len(tests)} tests in {len(SUITES)} suites, {len(EXEMPT)} exempt")
        return 1 if problems else 0
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
