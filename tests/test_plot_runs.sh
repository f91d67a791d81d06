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
#   * `--cfg job` never loads cairo (LD_DEBUG=libs), `mingpt plot` does;
#   * axes: integer iteration ticks, log ticks inside a decade and over six decades (densest
#     non-overlapping), legend numbers normalised, the default size and --size (tick labels read
#     back from the SVG's <metadata id="ticks">);
#   * bounded memory: 2.5M metrics lines under an RSS bound and a `ulimit -v` cap, 3000 runs
#     (legend in columns within cairo's limit), out of memory exits 1;
#   * runs: huge numbers whole, control characters escaped, FIFO / directory / symlink loop in
#     place of metrics.jsonl, a sweep stopped by SIGTERM lists its other jobs as "not run".
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
assert w == 1200 and h > 800, (w, h)
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

echo "-- axes, legend and size"
# a 2-point run: integer iteration ticks only; a log axis over 1.6..1.7 labels inside the decade
T=$WORK/two && mkdir -p $T && printf '{"iter": 10, "loss": 1.7}\n{"iter": 11, "loss": 1.6}\n' > $T/metrics.jsonl
# ticks(FILE AXIS): the tick labels of AXIS (x or y) from the SVG's <metadata id="ticks">, one a line
ticks() { $PY -c '
import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot()
m = [e for e in r.iter("{http://www.w3.org/2000/svg}metadata") if e.get("id") == "ticks"][0]
for line in m.text.split("\n"):
    if line.startswith(sys.argv[2] + ": "): print("\n".join(line[3:].split("|")))' "$@"; }
$MINGPT plot $T --log --out $WORK/two.svg > /dev/null 2>&1
xt=$(ticks $WORK/two.svg x)
[ "$(tr '\n' ' ' <<<"$xt")" = "10 11 " ] && ok "plot: a 2-point run has integer iteration ticks only (10, 11)" \
  || bad "plot: integer iteration ticks" "$xt"
yt=$(ticks $WORK/two.svg y)
[ "$(wc -l <<<"$yt")" -ge 3 ] && grep -qx '1.7' <<<"$yt" && ok "plot: a log axis within one decade has nice labels (1.7 among them)" \
  || bad "plot: log ticks within a decade" "$yt"
# a curve from 5.5 down to 1.5 on a log axis: 2, 3, 4, 5 labelled (1..9 per decade where they fit)
L=$WORK/decay && mkdir -p $L && awk 'BEGIN{for(i=0;i<=100;i++) printf "{\"iter\": %d, \"loss\": %g}\n", i*10, 4*exp(-i/20)+1.5}' > $L/metrics.jsonl
$MINGPT plot $L --log --out $WORK/decay.svg > /dev/null 2>&1
yt=$(ticks $WORK/decay.svg y | tr '\n' ' ')
[ "$yt" = "2 3 4 5 " ] && ok "plot: log axis 1.5..5.5 labels 2 3 4 5" || bad "plot: log axis 1.5..5.5" "$yt"
# six decades on a small figure: 1-2-5 or decades, never two labels closer than 16 points
awk 'BEGIN{for(i=0;i<=60;i++) printf "{\"iter\": %d, \"loss\": %g}\n", i, 10^(3 - i/10)}' > $L/metrics.jsonl
for size in 1200x800 400x300; do
  $MINGPT plot $L --log --size $size --out $WORK/dec.svg > /dev/null 2>&1
  yt=$(ticks $WORK/dec.svg y | tr '\n' ' ')
  h=${size#*x}
  check=$($PY -c '
import math, sys
t = [float(v) for v in sys.argv[1].split()]
plot_h = float(sys.argv[2]) - 90          # the plot area: the height less the margins
per_decade = plot_h / 6.5                 # 6 decades and the padding
gaps = [per_decade * (math.log10(b) - math.log10(a)) for a, b in zip(t, t[1:])]
assert len(t) >= 3 and min(gaps) >= 15, (t, gaps)
decades = [v for v in t if abs(math.log10(v) - round(math.log10(v))) < 1e-9]
assert len(decades) >= 2, t
print("ok")' "$yt" $h 2>&1)
  [ "$check" = ok ] && ok "plot: 6 decades at $size: labels at decades or 1-2-5, none overlapping ($yt)" || bad "plot: 6 decades at $size" "$check"
done
# the same number written two ways is one legend value
A=$WORK/lra && B=$WORK/lrb && mkdir -p $A/.hydra $B/.hydra && cp $T/metrics.jsonl $A/ && cp $T/metrics.jsonl $B/
printf -- '- optimizer_config.learning_rate=1e-3\n- seed=1\n' > $A/.hydra/overrides.yaml
printf -- '- optimizer_config.learning_rate=0.001\n- seed=2\n' > $B/.hydra/overrides.yaml
$MINGPT plot $A $B --out $WORK/lr.svg > /dev/null 2>&1
desc=$($PY -c 'import sys, xml.etree.ElementTree as E; print(E.parse(sys.argv[1]).getroot().find("{http://www.w3.org/2000/svg}desc").text.strip())' $WORK/lr.svg)
[ "$desc" = "$(printf 'seed=1 (train)\nseed=2 (train)')" ] && ok "plot: lr=1e-3 and lr=0.001 are one legend value (shared, dropped)" \
  || bad "plot: legend values normalised" "$desc"
# default size and --size
$MINGPT plot $T --out $WORK/size.png > /dev/null 2>&1 && $MINGPT plot $T --size 1500x1000 --out $WORK/size2.png > /dev/null 2>&1
check=$($PY -c '
import struct, sys
w, h = struct.unpack(">II", open(sys.argv[1], "rb").read()[16:24])
w2, h2 = struct.unpack(">II", open(sys.argv[2], "rb").read()[16:24])
assert w == 1200 and h >= 800, (w, h)
assert w2 == 1500 and h2 >= 1000 and h2 - 1000 == h - 800, (w2, h2)
print("ok")' $WORK/size.png $WORK/size2.png 2>&1)
[ "$check" = ok ] && ok "plot: a PNG is 1200x800 (and the legend) by default, --size 1500x1000 makes it so" || bad "plot: --size" "$check"
bad_input plot-size-syntax 2 'expected WIDTHxHEIGHT in pixels, e.g. 1200x800' -- $MINGPT plot $T --size 12OOx800
bad_input plot-size-range 2 'the width must be from 320 to 32767 and the height from 240 to 32767' -- $MINGPT plot $T --size 40000x800
grep -q -- '--size' <<<"$($MINGPT plot --help 2>&1)" && [ "$($MINGPT -cp $PWD --shell-completion 'query=plot d --s')" = --size ] \
  && ok "plot --help and shell completion know --size" || bad "plot --help / completion of --size"

echo "-- bounded memory: millions of lines, thousands of runs"
# 2.5 million training lines (about 180 MB): read line by line and decimated while read, so the
# plot's peak RSS is that of a small run's plot, and it draws under an address-space cap that
# holding the file (or its points) would exceed
G=$WORK/big && mkdir -p $G
awk 'BEGIN{for(i=1;i<=2500000;i++){printf "{\"iter\": %d, \"loss\": %.4f, \"tokens\": %d}\n", i, 4/(1+i/100000)+(i%997)/5000, i*64; if(i%1000==0) printf "{\"iter\": %d, \"test_loss\": %.4f}\n", i, 4.2/(1+i/100000)}}' > $G/metrics.jsonl
# rss CMD...: CMD's peak RSS in kB (getrusage of the child; no /usr/bin/time on a fresh machine)
rss() {
  $PY -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}
small=$(rss $MINGPT plot $T --out $WORK/rss_small.svg)
large=$(rss $MINGPT plot $G --log --out $WORK/big.svg)
check=$($PY - "$WORK/big.svg" <<'EOF' 2>&1
import re, sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
n = []
for p in root.iter(ns + "path"):
    m = re.search(r"stroke:(rgb\([^)]*\))", p.get("style", ""))
    if m and m.group(1) != "rgb(0%,0%,0%)" and p.get("d", "").count("L") >= 2:
        n.append(p.get("d").count("L") + 1)
assert len(n) == 2 and max(n) <= 2 * 2048 + 2 and min(n) >= 1000, n   # decimated, not emptied
print("ok")
EOF
)
# (AddressSanitizer keeps freed memory in quarantine and reserves terabytes of address space:
# there only the decimation is checked)
SANITIZED=$(ldd $MINGPT | grep -q libasan && echo 1)
[ -n "$SANITIZED" ] && small=0 large=0
[[ $small =~ ^[0-9]+$ && $large =~ ^[0-9]+$ ]] && [ "$large" -lt $((small + 32768)) ] && [ "$check" = ok ] \
  && ok "plot: 2.5M lines in bounded memory (peak RSS ${large} kB, a 2-line run ${small} kB), decimated to <= 4098 points" \
  || bad "plot: 2.5M lines (RSS $large kB vs $small kB)" "$check"
# the address-space cap: the least (to 8 MiB) under which the small plot draws, plus 96 MiB; the
# file alone is 180 MB
export OPENBLAS_NUM_THREADS=1   # a smaller, steadier address space at start
# capped KB CMD...: CMD under ulimit -v KB; below its start-up need OpenBLAS retries its
# allocation for ever, hence the timeout: short while bisecting, long for real work (a busy machine)
capped() { (ulimit -v $1; timeout ${CAP_TIMEOUT:-6} "${@:2}"); }
if [ -n "$SANITIZED" ]; then ok "(the address-space caps are not tried under AddressSanitizer)"; else
lo=65536 hi=4194304
while [ $((hi - lo)) -gt 8192 ]; do
  mid=$(((lo + hi) / 2))
  if capped $mid $MINGPT plot $T --out $WORK/cap.svg > /dev/null 2>&1; then hi=$mid; else lo=$mid; fi
done
out=$(CAP_TIMEOUT=300 capped $((hi + 98304)) $MINGPT plot $G --out $WORK/capbig.svg 2>&1); rc=$?
[ $rc -eq 0 ] && ok "plot: 2.5M lines draw under ulimit -v $((hi + 98304)) kB (a small plot needs $hi)" \
  || bad "plot: 2.5M lines under ulimit -v $((hi + 98304)) (exit $rc)" "$out"
fi
# 3000 runs: the legend wraps into columns and the figure stays within cairo's 32767
M=$WORK/many && mkdir -p $M && touch $M/multirun.yaml
for i in $(seq 0 2999); do mkdir $M/$i; printf '{"iter": 0, "loss": 3.5}\n{"iter": 1, "loss": 1.5}\n' > $M/$i/metrics.jsonl; done
out=$($MINGPT plot $M --out $WORK/many.png 2>&1); rc=$?
check=$($PY -c '
import struct, sys
w, h = struct.unpack(">II", open(sys.argv[1], "rb").read()[16:24])
assert w == 1200 and 800 < h <= 32767 and h < 3000 * 18, (w, h)   # one row a run would be 54000
print("ok")' $WORK/many.png 2>&1)
[ $rc -eq 0 ] && [ "$check" = ok ] && grep -q "3000 runs" <<<"$out" && ok "plot: 3000 runs draw, the legend in columns" \
  || bad "plot: 3000 runs (exit $rc)" "$out $check"
bad_input plot-legend-too-big 1 'limit of 32767; plot fewer runs or make the figure wider (--size)' -- $MINGPT plot $M --size 320x32000 --out $WORK/tall.svg
bad_input plot-png-too-big 1 'more than the limit of 134217728 pixels' -- $MINGPT plot $T --size 32000x32000 --out $WORK/huge.png
# out of memory is a runtime failure (1), never a usage error (2) or a crash: `runs` and `plot`
# of the 3000 runs under caps from the small plot's up
if [ -n "$SANITIZED" ]; then ok "(out of memory is not tried under AddressSanitizer)"; else
oom=0 wrong=""
for extra in 0 4096 8192 12288 16384 20480 24576 32768; do
  for cmd in "runs $M" "plot $M --out $WORK/oom.svg"; do
    out=$(CAP_TIMEOUT=120 capped $((hi + extra)) $MINGPT $cmd 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 1 ] && grep -q "out of memory" <<<"$out"; then oom=$((oom + 1))
    elif [ $rc -ne 0 ] && ! { [ $rc -eq 1 ] && grep -q "cannot load the plotting library" <<<"$out"; }; then
      wrong+="[$cmd under $((hi + extra)) kB: exit $rc: $out] "
    fi
  done
done
[ -z "$wrong" ] && [ $oom -gt 0 ] && ok "runs/plot: out of memory exits 1 with 'out of memory' ($oom of 16 capped runs)" \
  || bad "runs/plot: out of memory ($oom times)" "$wrong"
fi
unset OPENBLAS_NUM_THREADS

echo "-- runs: what it prints"
# an escape sequence in a label: the SVG stays well-formed XML (control characters as '?')
E=$WORK/esclabel && mkdir -p $E/.hydra && cp $T/metrics.jsonl $E/ && printf -- '- "lr=\\e[31m1\\x07"\n' > $E/.hydra/overrides.yaml
$MINGPT plot $E --out $WORK/esc.svg > /dev/null 2>&1
desc=$($PY -c 'import sys, xml.etree.ElementTree as E; print(E.parse(sys.argv[1]).getroot().find("{http://www.w3.org/2000/svg}desc").text.strip())' $WORK/esc.svg 2>&1)
[ "$desc" = 'lr=?[31m1? (train)' ] && ok "plot: control characters in a label leave the SVG well-formed" || bad "plot: control characters in a label" "$desc"
N=$WORK/huge && mkdir -p $N/.hydra
printf '{"exit_status": 0, "test_loss": 1e308, "final_train_loss": 2.5, "tokens_per_s": 1e308, "wall_s": 1e300, "iters": 5}\n' > $N/summary.json
printf -- '- "lr=\\e[31mred\\x07"\n' > $N/.hydra/overrides.yaml
out=$($MINGPT runs $N 2>&1)
row=$(grep -E '^ *1  ' <<<"$out")
grep -q "1e+308  *1e+308  *1e+300" <<<"$row" && ok "runs: 1e308 shows as 1e+308, not cut" || bad "runs: huge numbers" "$out"
! grep -q $'\e' <<<"$out" && ! grep -q $'\a' <<<"$out" && grep -qF 'lr=\033[31mred\007' <<<"$out" \
  && ok "runs: an escape sequence in overrides.yaml is shown escaped (\\033), not obeyed" || bad "runs: escapes" "$(cat -v <<<"$out")"
out=$($MINGPT runs $N --csv 2>&1)
! grep -q $'\e' <<<"$out" && ok "runs --csv: no raw control characters" || bad "runs --csv: escapes" "$(cat -v <<<"$out")"
F=$WORK/fifo && mkdir -p $F && mkfifo $F/metrics.jsonl
bad_input runs-metrics-fifo 2 'metrics.jsonl'\'' is a FIFO, not a file' -- timeout 10 $MINGPT runs $F
bad_input plot-metrics-fifo 2 'is a FIFO, not a file' -- timeout 10 $MINGPT plot $F
D=$WORK/mdir && mkdir -p $D/metrics.jsonl
bad_input runs-metrics-dir 2 'is a directory, not a file' -- $MINGPT runs $D
Y=$WORK/loop && mkdir -p $Y && ln -s l2 $Y/metrics.jsonl && ln -s metrics.jsonl $Y/l2
bad_input runs-metrics-loop 2 'is a symbolic link loop, not a file' -- $MINGPT runs $Y
# a sweep's job whose metrics.jsonl is a FIFO (beside its summary): read without blocking
cp -r $SW/0 $WORK/fifojob && rm $WORK/fifojob/metrics.jsonl && mkfifo $WORK/fifojob/metrics.jsonl
bad_input runs-job-metrics-fifo 2 'is not a regular file' -- timeout 10 $MINGPT runs $WORK/fifojob

echo "-- a sweep stopped early: its jobs that never ran"
S=$WORK/stopped
$MINGPT -m "${TINY[@]}" trainer_config.max_epochs=1000 trainer_config.max_iters=5,1000000,5,7 hydra.sweep.dir=$S > $WORK/stopped.log 2>&1 &
pid=$!
for i in $(seq 600); do [ -s $S/1/metrics.jsonl ] && break; sleep 0.1; done
plan_before=$([ -f $S/.hydra/jobs.yaml ] && echo yes)
kill -TERM $pid; wait $pid; rc=$?
out=$($MINGPT runs $S 2>&1)
rows=$(grep -E '^ *[0-9]+  ' <<<"$out")
[ $rc -eq 75 ] && [ "$plan_before" = yes ] && [ "$(wc -l <<<"$rows")" -eq 4 ] \
  && [ "$(grep -c '  not run  ' <<<"$rows")" -eq 2 ] && grep -q 'not run .*max_iters=5$' <<<"$rows" \
  && grep -q 'not run .*max_iters=7$' <<<"$rows" && grep -q '^ *[0-9]  interrupted' <<<"$rows" && [ ! -e $S/2 ] \
  && ok "runs: a sweep stopped in job 1 lists jobs 2 and 3 as 'not run' with their overrides" \
  || bad "runs: a stopped sweep (exit $rc, plan written before job 1: $plan_before)" "$out"
check=$($MINGPT runs $S --json | $PY -c '
import json, sys
rows = json.load(sys.stdin)
nr = [r for r in rows if r["status"] == "not run"]
assert [r["dir"].rsplit("/", 1)[1] for r in nr] == ["2", "3"], rows
assert all(r["exit_status"] is None and r["iters"] is None for r in nr), nr
print("ok")' 2>&1)
[ "$check" = ok ] && ok "runs --json: the jobs not run" || bad "runs --json: not run" "$check"
$MINGPT plot $S --out $WORK/stopped.svg > /dev/null 2>&1 && ok "plot: a stopped sweep plots the jobs that ran" || bad "plot: a stopped sweep"

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
