#!/usr/bin/env bash
# The checks that need a CUDA GPU, as one short script (a lent GPU machine is held by the minute).
#
#     OUT=/tmp/gpu-out bash bench/gpu_check.sh        # DEVICE=cpu: a dry run of the same steps
#                                                     # BENCH=0: without the scoring bench
#
# 1. the environment: the GPU, Python, numba (and numba-cuda) versions, numba.cuda.detect();
# 2. the scoring tests, the CUDA kernel's against the reference on the real device included,
#    and the GPU search index's against the CPU index's;
# 3. bench/focus_bench.py (what a crawl's scoring costs on each device), and
#    bench/scoring_bench.py at 20,000 and 100,000 documents (the GPU rows beside the CPU's);
# 4. bench/search_bench.py --gpu at 200,000 pages (where bm25s is installed);
# 5. a crawl of a generated 300-page site with --query and --device $DEVICE (its log must say
#    it scores there), then `crawl rank` of the stored pages on the GPU and on the CPU: the two
#    rankings must agree.
# Each step has its own time limit and logs to $OUT; a failing step does not stop the next.
# Needs the project's packages importable (PYTHONPATH is set to the repository here).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
DEVICE=${DEVICE:-gpu}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
status=0
step() { echo; echo "== $* ($(date +%T))"; }
check() { "$@" || { echo "!! failed ($?): $*"; status=1; }; }

step environment
nvidia-smi -L 2>&1 || true
$PY - <<'EOF'
import sys, numba, numpy
print("python", sys.version.split()[0], "numba", numba.__version__, "numpy", numpy.__version__)
try:
    import numba_cuda
    print("numba-cuda", numba_cuda.__version__)
except ImportError:
    print("numba-cuda: not installed")
EOF
check timeout 60 $PY -c "from numba import cuda; cuda.detect()"

step tests
check timeout 300 $PY -m pytest -p no:cacheprovider -q -rs tests/crawler/relevance/test_scoring_gpu.py tests/crawler/relevance/test_scoring.py \
    tests/crawler/relevance/test_search_gpu.py \
    tests/e2e/test_focus.py 2>&1 | tee "$OUT/tests.log"
check test "${PIPESTATUS[0]}" = 0

step crawl-time scoring cost
timeout 120 $PY bench/focus_bench.py | tee "$OUT/focus.md"
check test "${PIPESTATUS[0]}" = 0

[ "${BENCH:-1}" = 0 ] || step scoring benchmark
for docs in 20000 100000; do
    [ "${BENCH:-1}" = 0 ] && break
    timeout 240 $PY bench/scoring_bench.py --docs $docs --tokens 1000 --repeats 3 | tee "$OUT/scoring-$docs.md"
    check test "${PIPESTATUS[0]}" = 0
done

step search index on the GPU
if [ "$DEVICE" = gpu ] && $PY -c "import bm25s" 2>/dev/null; then
    timeout 300 $PY bench/search_bench.py --docs 200000 --queries 30 --gpu | tee "$OUT/search.jsonl"
    check test "${PIPESTATUS[0]}" = 0
else
    echo "skipped (DEVICE=$DEVICE, or bm25s not installed: pip install bm25s before)"
fi

step crawl with --device $DEVICE
work=$(mktemp -d)
$PY bench/sitegen.py "$work/site" --pages 300 --base-url http://127.0.0.1:18097 >/dev/null
$PY -m http.server 18097 --bind 127.0.0.1 --directory "$work/site" >/dev/null 2>&1 &
server=$!
sleep 1
echo "http://127.0.0.1:18097/index.html" >"$work/seeds.txt"
check timeout 120 $PY -m crawler "$work/seeds.txt" --db "$work/crawl.db" --query "kosa derilepu page" \
    --device "$DEVICE" --delay 0 --concurrency 16 --no-progress 2>&1 | tail -n 15 | tee "$OUT/crawl.log"
check grep -q "scoring on $DEVICE" "$OUT/crawl.log"
for where in gpu cpu; do
    [ "$DEVICE" = cpu ] && [ "$where" = gpu ] && continue
    check timeout 120 $PY -m crawler rank "$work/crawl.db" --query "kosa derilepu page" --query "page" \
        --top 20 --device $where >"$OUT/rank-$where.tsv" 2>"$OUT/rank-$where.log"
    cat "$OUT/rank-$where.log"
done
if [ -s "$OUT/rank-gpu.tsv" ] && [ -s "$OUT/rank-cpu.tsv" ]; then
    check $PY - "$OUT/rank-gpu.tsv" "$OUT/rank-cpu.tsv" <<'EOF'
import sys
def rows(path):
    return [line.rstrip("\n").split("\t") for line in open(path, encoding="utf-8")]
gpu, cpu = rows(sys.argv[1]), rows(sys.argv[2])
assert len(gpu) == len(cpu) and len(gpu) > 2, (len(gpu), len(cpu))
for g, c in zip(gpu, cpu):
    if g[0].startswith("#"):
        assert g == c, (g, c)
        continue
    assert g[2] == c[2] and abs(float(g[1]) - float(c[1])) <= 1e-4 * max(1.0, abs(float(c[1]))), (g, c)
print(f"rank on the GPU equals rank on the CPU ({len(gpu)} lines)")
EOF
fi
kill $server 2>/dev/null
rm -rf "$work"

step "done: status $status"
exit $status
