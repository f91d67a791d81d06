#!/usr/bin/env bash
# tests/test_plot_runs.sh — `mingpt plot`, `mingpt runs` and a run's loss.svg (report/).
#
#   * a real 4-job `-m` sweep of a tiny model, one job failing at run time (a learning rate that
#     diverges at its second iteration, exit 1);
#   * runs: 4 rows in test-loss order with the failed job last and marked, --json (python json),
#     --csv (python csv, RFC 4180), a run still in progress (exit_status null) and its numbers
#     from metrics.jsonl, a damaged summary.json;
#   * plot: 3 runs -> a well-formed SVG (xml.etree) with 3 labelled series pairs in 3 colours;
#     the sweep root expands to its jobs; PNG; --x tokens/time; --log; a torn last line is a
#     warning naming file and line; the bad inputs;
#   * loss.svg written by the trainer at its evaluations, and a missing plot library warned
#     about once; under mpirun (2 ranks) one warning and one well-formed loss.svg (rank 0 draws);
#   * `--cfg job` never loads cairo (LD_DEBUG=libs), `mingpt plot` does.
cd "$(dirname "$0")/.."
. tests/lib.sh
PY=/usr/bin/python3
TINY=(--config-name char_cpu gpt_config.n_layer=1 gpt_config.n_embd=32 gpt_config.n_head=2 data_config.block_size=16
      data_config.truncate=0.02 data_config.path=$PWD/data/input.txt trainer_config.max_iters=30 trainer_config.batch_size=8
      trainer_config.eval_iters=4 trainer_config.eval_every=10 trainer_config.log_every=5 optimizer_config.warmup_iters=0)
export OMP_NUM_THREADS=1

echo "-- a 4-job sweep, job #2 diverges"
SW=$WORK/sw
out=$($MINGPT -m "${TINY[@]}" optimizer_config.learning_rate=1e-3,3e-3,1e9,1e-2 hydra.sweep.dir=$SW 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "job #2 exited with status 1" <<<"$out" && ok "the sweep ran 4 jobs, #2 failed" \
  || bad "the sweep ran 4 jobs, #2 failed (exit $rc)" "$out"
[ -s $SW/0/metrics.jsonl ] && [ -s $SW/1/metrics.jsonl ] && [ -s $SW/3/metrics.jsonl ] \
  && ok "each job that trained wrote its metrics.jsonl" || bad "each job that trained wrote its metrics.jsonl" "$(ls $SW/*)"

echo "-- mingpt runs"
out=$($MINGPT runs $SW 2>&1); rc=$?
rows=$(grep -E '^ *[0-9]+  ' <<<"$out")
[ $rc -eq 0 ] && [ "$(wc -l <<<"$rows")" -eq 4 ] && ok "runs: 4 rows" || bad "runs: 4 rows (exit $rc)" "$out"
last=$(tail -1 <<<"$rows")
grep -q "failed (1)" <<<"$last" && grep -q "learning_rate=1000000000.0" <<<"$last" && ok "runs: the failed job is last and marked" \
  || bad "runs: the failed job is last and marked" "$out"
grep -q "^overrides of every run: .*gpt_config.n_layer=1" <<<"$out" && ok "runs: the shared overrides are said once" \
  || bad "runs: the shared overrides are said once" "$out"
check=$($MINGPT runs $SW --json | $PY -c '
import json, sys
rows = json.load(sys.stdin)
want = []
for d in sorted(r["dir"] for r in rows):
    s = json.load(open(d + "/summary.json"))
    want.append((s["test_loss"] is None, s["test_loss"] or 0, d))
want = [d for _, _, d in sorted(want)]
assert len(rows) == 4, rows
assert [r["dir"] for r in rows] == want, ([r["dir"] for r in rows], want)
assert [r["status"] for r in rows] == ["ok", "ok", "ok", "failed (1)"], rows
assert rows[3]["exit_status"] == 1 and rows[3]["test_loss"] is None and rows[3]["iters"] == 1, rows[3]
for r in rows[:3]:
    s = json.load(open(r["dir"] + "/summary.json"))
    assert r["test_loss"] == s["test_loss"] and r["final_train_loss"] == s["final_train_loss"], (r, s)
    assert r["iters"] == 30 and r["wall_s"] == s["wall_s"] and r["tokens_per_s"] == s["tokens_per_s"]
    assert "optimizer_config.learning_rate=" in r["overrides"]
print("ok")' 2>&1)
[ "$check" = ok ] && ok "runs --json: sorted by the summaries' test loss, the failed job last" || bad "runs --json" "$check"
check=$($MINGPT runs $SW --csv | $PY -c '
import csv, io, json, sys
raw = sys.stdin.buffer.read().decode()
assert raw.count("\r\n") == 5, "CRLF line ends"
rows = list(csv.reader(io.StringIO(raw, newline="")))
assert rows[0][:6] == ["position", "status", "exit_status", "iters", "final_train_loss", "test_loss"], rows[0]
assert len(rows) == 5 and all(len(r) == 10 for r in rows), rows
losses = [float(r[5]) for r in rows[1:4]]
assert losses == sorted(losses) and rows[4][1] == "failed (1)" and rows[4][5] == "", rows
assert all(r[9].startswith("gpt_config.n_layer=1 ") for r in rows[1:]), rows
for r in rows[1:4]:   # the numbers of summary.json, exactly
    j = json.load(open(r[8] + "/summary.json"))
    assert float(r[5]) == j["test_loss"] and float(r[4]) == j["final_train_loss"] and float(r[7]) == j["wall_s"], (r, j)
print("ok")' 2>&1)
[ "$check" = ok ] && ok "runs --csv: parses (RFC 4180), the same order, exact numbers" || bad "runs --csv" "$check"

# a run in progress: summary.json says exit_status null; its numbers come from metrics.jsonl
cp -r $SW/1 $WORK/live
$PY - "$WORK/live/summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
s.update(exit_status=None, final_train_loss=None, test_loss=None, iters=0, tokens_per_s=None, wall_s=None)
json.dump(s, open(sys.argv[1], "w"))
EOF
live_test=$($PY -c 'import json,sys; print([l for l in map(json.loads, open(sys.argv[1])) if "test_loss" in l][-1]["test_loss"])' $WORK/live/metrics.jsonl)
out=$($MINGPT runs $WORK/live --json 2>&1)
check=$($PY -c '
import json, sys
r = json.loads(sys.argv[1])[0]
assert r["status"] == "running" and r["exit_status"] is None, r
assert r["iters"] == 30 and r["test_loss"] == float(sys.argv[2]) and r["wall_s"] is not None, r
print("ok")' "$out" "$live_test" 2>&1)
[ "$check" = ok ] && ok "runs: a run in progress is 'running', its numbers from metrics.jsonl" || bad "runs: a run in progress" "$check $out"

echo "-- mingpt plot"
P=$WORK/three.svg
out=$($MINGPT plot $SW/0 $SW/1 $SW/3 --out $P 2>&1); rc=$?
check=$($PY - "$P" $SW/0 $SW/1 $SW/3 <<'EOF' 2>&1
import json, re, sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
labels = root.find(ns + "desc").text.strip().split("\n")
want = [f"optimizer_config.learning_rate={lr} ({kind})" for lr in ("0.001", "0.003", "0.01") for kind in ("train", "test")]
assert labels == want, labels
# each series is a stroked polyline in its run's colour: three colours, two lines each
# Each series is a stroked polyline in its run's colour, drawn run after run: three colours,
# two lines each, with as many points as the run's metrics.jsonl has training / test lines,
# their x growing with the iterations.
lines = {}
for p in root.iter(ns + "path"):
    m = re.search(r"stroke:(rgb\([^)]*\))", p.get("style", ""))
    d = p.get("d", "")
    if m and m.group(1) != "rgb(0%,0%,0%)" and d.count("L") >= 2:   # not the frame, grid, ticks
        xy = [float(v) for v in re.findall(r"-?[0-9.]+", d)]
        lines.setdefault(m.group(1), []).append(xy[0::2])
assert len(lines) == 3 and all(len(v) == 2 for v in lines.values()), lines.keys()
for run_dir, xs in zip(sys.argv[2:], lines.values()):
    rows = [json.loads(l) for l in open(run_dir + "/metrics.jsonl")]
    want = sorted([sum("loss" in r for r in rows), sum("test_loss" in r for r in rows)])
    assert sorted(len(x) for x in xs) == want, (run_dir, [len(x) for x in xs], want)
    assert all(x == sorted(x) for x in xs), xs
print("ok")
EOF
)
[ $rc -eq 0 ] && [ "$check" = ok ] && ok "plot: 3 runs -> a well-formed SVG, 3 labelled train/test pairs in 3 colours" \
  || bad "plot: 3 runs (exit $rc)" "$out $check"
out=$($MINGPT plot $SW --out $WORK/sweep.png --x tokens --log 2>&1); rc=$?
check=$($PY -c '
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", b[:8]
w, h = struct.unpack(">II", b[16:24])
assert w == 860 and h > 500, (w, h)
print("ok")' $WORK/sweep.png 2>&1)
[ $rc -eq 0 ] && [ "$check" = ok ] && grep -q "4 runs" <<<"$out" && ok "plot: a sweep directory -> its 4 jobs, PNG, --x tokens --log" \
  || bad "plot: sweep root to PNG (exit $rc)" "$out $check"
$MINGPT plot $SW/1 --x time --out $WORK/time.svg > /dev/null 2>&1 && $PY -c 'import xml.etree.ElementTree as E,sys; E.parse(sys.argv[1])' $WORK/time.svg \
  && ok "plot: --x time" || bad "plot: --x time"
cp -r $SW/3 $WORK/torn && printf '{"iter": 31, "epoch": 1, "lo' >> $WORK/torn/metrics.jsonl
n=$(wc -l < $WORK/torn/metrics.jsonl)
out=$($MINGPT plot $WORK/torn --out $WORK/torn.svg 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "warning: $WORK/torn/metrics.jsonl:$((n + 1)): skipped a line" <<<"$out" && [ -s $WORK/torn.svg ] \
  && ok "plot: a torn last line is skipped with a warning naming file and line" || bad "plot: a torn last line (exit $rc)" "$out"

echo "-- bad input"
mkdir -p $WORK/empty $WORK/nometrics && cp $SW/0/summary.json $WORK/nometrics/
bad_input plot-x-unknown 2 'expected iter, tokens or time' -- $MINGPT plot $SW --x epochs
bad_input plot-out-extension 2 'the file name must end in .svg or .png' -- $MINGPT plot $SW --out $WORK/p.pdf
bad_input plot-no-metrics 2 'has no metrics.jsonl' -- $MINGPT plot $WORK/nometrics
bad_input plot-not-a-run 2 'is not a run directory (no summary.json or metrics.jsonl) nor a sweep directory' -- $MINGPT plot $WORK/empty
bad_input plot-out-unwritable 1 '/no/such/dir/p.svg.tmp.' -- $MINGPT plot $SW --out $WORK/no/such/dir/p.svg
bad_input runs-not-a-dir 2 'is not a directory' -- $MINGPT runs $WORK/none
bad_input runs-json-and-csv 2 '--json and --csv exclude each other' -- $MINGPT runs $SW --json --csv
cp -r $SW/0 $WORK/badsum && echo '{"exit_status": "done"}' > $WORK/badsum/summary.json
bad_input runs-bad-summary 2 'is malformed: "exit_status" is not null or an exit status' -- $MINGPT runs $WORK/badsum
cp -r $SW/0 $WORK/badov && echo '{a: 1}' > $WORK/badov/.hydra/overrides.yaml
bad_input runs-bad-overrides 2 'is malformed: not a YAML list' -- $MINGPT runs $WORK/badov
no_partial_files $WORK "plot: no temporary file left"

echo "-- loss.svg from the trainer"
# the run's metrics.jsonl is there before the run (a trainer that writes its own replaces or
# continues it); loss.svg is drawn at each evaluation and at the end
R=$WORK/run && mkdir -p $R && cp $SW/0/metrics.jsonl $R/
out=$(MINGPT_PLOT_LIB=$WORK/none.so $MINGPT "${TINY[@]}" trainer_config.max_iters=20 hydra.run.dir=$R 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'loss.svg is not drawn: no plotting library' <<<"$out")" -eq 1 ] && [ ! -e $R/loss.svg ] \
  && ok "trainer: a missing plot library is one warning, training goes on" || bad "trainer: missing plot library (exit $rc)" "$out"
rm -f $R/*.bin
out=$($MINGPT "${TINY[@]}" trainer_config.max_iters=20 trainer_config.plot_log_scale=true hydra.run.dir=$R 2>&1); rc=$?
check=$($PY -c '
import sys, xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
r = E.parse(sys.argv[1]).getroot()
assert r.find(ns + "title").text.startswith("loss: "), r.find(ns + "title").text
labels = r.find(ns + "desc").text.strip().split("\n")
assert len(labels) == 2 and labels[0].endswith("(train)") and labels[1].endswith("(test)"), labels
print("ok")' $R/loss.svg 2>&1)
[ $rc -eq 0 ] && [ "$check" = ok ] && ok "trainer: <run dir>/loss.svg with the train and test loss" || bad "trainer: loss.svg (exit $rc)" "$out $check"
no_partial_files $R "trainer: no temporary loss.svg left"

echo "-- cairo only for the commands that draw"
n=$(LD_DEBUG=libs $MINGPT "${TINY[@]}" --cfg job 2>&1 | grep -c 'libcairo')
m=$(LD_DEBUG=libs $MINGPT plot $SW/0 --out $WORK/ld.svg 2>&1 | grep -c 'libcairo')
[ "$n" -eq 0 ] && [ "$m" -gt 0 ] && ok "--cfg job loads no cairo; mingpt plot does" || bad "cairo loaded by --cfg job: $n, by plot: $m"

echo "-- under mpirun (2 ranks): rank 0 draws"
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  MPIRUN="timeout 120 env ASAN_OPTIONS=$MPI_ASAN_OPTIONS mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1"
  D=$WORK/ddp && mkdir -p $D && cp $SW/0/metrics.jsonl $D/
  out=$($MPIRUN -np 2 -x MINGPT_PLOT_LIB=$WORK/none.so $MINGPT "${TINY[@]}" trainer_config.batch_size=4 hydra.run.dir=$D 2>&1); rc=$?
  [ $rc -eq 0 ] && [ "$(grep -c 'loss.svg is not drawn' <<<"$out")" -eq 1 ] && ok "mpirun: one rank tries to draw (one warning)" \
    || bad "mpirun: one warning (exit $rc)" "$out"
  rm -f $D/*.bin
  out=$($MPIRUN -np 2 $MINGPT "${TINY[@]}" trainer_config.batch_size=4 hydra.run.dir=$D 2>&1); rc=$?
  [ $rc -eq 0 ] && $PY -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' $D/loss.svg 2>/dev/null \
    && ok "mpirun: a well-formed loss.svg" || bad "mpirun: loss.svg (exit $rc)" "$out"
  no_partial_files $D "mpirun: no temporary loss.svg left"
else
  bad "mpirun is installed (make deps installs openmpi-bin)"
fi
finish
