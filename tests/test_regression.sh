#!/usr/bin/env bash
# Regression ("loss": "mse") and binary classifiers' AUC, with the real
# programs, on data of known linear structure that tests/gen_regression.py
# writes: y = W x + B + Gaussian noise of standard deviation 0.1, so that a
# linear model's test mean squared error can reach about 0.01 and no
# lower. A linear model trained on CSV data, standalone and on a local
# cluster (2 ps-servers, 2 workers), reaches a test mse below 0.02 (twice
# the noise's variance) and a test mae below 0.12 (E|noise| is 0.08), and
# its metrics records (which validate against schemas/metrics.schema.json)
# give test_mse and test_mae in place of test_accuracy. Float .npy targets
# train too: float32 [N] and float64 [N, 2] for a model of two outputs.
# ps-worker predict writes the model's outputs (CSV and JSON lines), which
# equal x W + b computed here from the exported weights, and the weights
# are the generator's W and B. Refused before any training, one line
# naming the fault: IDX labels for a regression model, a target that is
# not a number, two targets from one CSV column, --classes for a
# regression model, and --device gpu. A binary CSV classifier's exact test
# AUC is in its metrics records, standalone and on the cluster, and equals
# the AUC computed here (pairs of a positive and a negative, ties as one
# half) from predict's probabilities with the same weights.
#
# Usage: test_regression.sh JSONSCHEMA_CHECK (PS_WORKER, PS_COORDINATOR and
# PS_SOURCE_ROOT name the programs and the source tree)
set -u
check_tool=${1:?usage: test_regression.sh JSONSCHEMA_CHECK}
worker=${PS_WORKER:?PS_WORKER is not set}
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
schema="${PS_SOURCE_ROOT:?PS_SOURCE_ROOT is not set}/schemas/metrics.schema.json"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/ps-regression-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

. "$here/cli_lib.sh"

# --- the data and the models ------------------------------------------------
gen () { /usr/bin/python3 "$here/gen_regression.py" "$@" >"$work/out" 2>&1 ||
         { fail "gen_regression.py $*"; exit 1; }; }
gen --out "$work/r1" --prefix train --count 1024 --seed 1
gen --out "$work/r1" --prefix test --count 256 --seed 2
gen --out "$work/r2" --prefix train --count 1024 --outputs 2 --seed 3
gen --out "$work/r2" --prefix test --count 256 --outputs 2 --seed 4
gen --out "$work/b" --prefix train --count 1024 --binary --noise 0.7 --seed 5
gen --out "$work/b" --prefix test --count 512 --binary --noise 0.7 --seed 6
cat >"$work/lin.json" <<'EOF'
{"name": "lin", "input_shape": [4], "loss": "mse", "layers": [{"type": "Dense", "units": 1}]}
EOF
sed 's/"units": 1/"units": 2/; s/"lin"/"lin2"/' "$work/lin.json" >"$work/lin2.json"
cat >"$work/bin.json" <<'EOF'
{"name": "bin", "input_shape": [4], "layers": [{"type": "Dense", "units": 1}]}
EOF
csv=(--train-data "$work/r1/train.csv" --test-data "$work/r1/test.csv" --label-column y)
train=(--batch 32 --lr 0.05 --threads 1)

# check_records NAME FILE: every line of metrics FILE validates against the
# schema (ps_jsonschema, one document per line).
check_records () {
  local docs=() i=0 line
  mkdir -p "$work/docs"
  while IFS= read -r line; do
    i=$((i + 1))
    printf '%s\n' "$line" >"$work/docs/$i.json"
    docs+=("$work/docs/$i.json")
  done <"$2"
  if "$check_tool" "$schema" "${docs[@]}" >"$work/out" 2>&1 && ! grep -q invalid "$work/out"
  then
    pass "$1: $i records validate against metrics.schema.json"
  else
    fail "$1" "records that do not validate against metrics.schema.json"
  fi
  rm -rf "$work/docs"
}

# check_errors NAME FILE EVENT MSE MAE: the last EVENT record of metrics FILE
# has a test_mse below MSE and a test_mae below MAE, and no test_accuracy.
check_errors () {
  local got
  got=$(/usr/bin/python3 - "$2" "$3" "$4" "$5" <<'PY' 2>&1
import json, sys
path, event, mse, mae = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
rows = [json.loads(l) for l in open(path) if l.strip()]
r = [r for r in rows if r["event"] == event][-1]
if "test_accuracy" in r:
    print("a test_accuracy in the %s record: %s" % (event, r))
elif not (r["test_mse"] < mse and r["test_mae"] < mae):
    print("test_mse %s, test_mae %s: expected below %s and %s" % (r["test_mse"], r["test_mae"],
                                                                   mse, mae))
else:
    print("ok test mse %.4f, mae %.4f" % (r["test_mse"], r["test_mae"]))
PY
)
  case $got in
    ok*) pass "$1: ${got#ok }" ;;
    *) fail "$1" "$got" ;;
  esac
}

# --- regression on CSV data ---------------------------------------------------
run 60 "$worker" --standalone --model "$work/lin.json" --format csv --data "$work/r1/train.csv" \
  --test-data "$work/r1/test.csv" --label-column y --epochs 8 "${train[@]}" --progress 0 \
  --metrics "$work/standalone.jsonl" --checkpoint-dir "$work/ckpt"
if [ "$status" = 0 ] && grep -q "^epoch 8/8: .*test mse [0-9.]*, test mae " "$work/out"; then
  check_errors "standalone, CSV" "$work/standalone.jsonl" epoch 0.02 0.12
  check_errors "standalone, CSV (done record)" "$work/standalone.jsonl" "done" 0.02 0.12
  check_records "standalone, CSV" "$work/standalone.jsonl"
else
  fail "standalone, CSV" "exit $status, expected 0 and an epoch line with test mse and mae"
fi
run 120 "$coordinator" --local --model "$work/lin.json" --data-format csv "${csv[@]}" \
  --epochs 6 "${train[@]}" --metrics "$work/cluster.jsonl"
if [ "$status" = 0 ] && grep -q "test mse [0-9.]*, test mae" "$work/out"; then
  check_errors "local cluster, CSV" "$work/cluster.jsonl" eval 0.02 0.12
  check_errors "local cluster, CSV (done record)" "$work/cluster.jsonl" "done" 0.02 0.12
  check_records "local cluster, CSV" "$work/cluster.jsonl"
else
  fail "local cluster, CSV" "exit $status, expected 0 and an evaluation with test mse and mae"
fi

# --- float .npy targets ---------------------------------------------------------
run 60 "$worker" --standalone --model "$work/lin.json" --train-images "$work/r1/train-x.npy" \
  --train-labels "$work/r1/train-y.npy" --test-images "$work/r1/test-x.npy" \
  --test-labels "$work/r1/test-y.npy" --epochs 8 "${train[@]}" --progress 0 \
  --metrics "$work/npy1.jsonl"
if [ "$status" = 0 ]; then
  check_errors "standalone, float32 .npy [N]" "$work/npy1.jsonl" epoch 0.02 0.12
else
  fail "standalone, float32 .npy [N]" "exit $status, expected 0"
fi
run 60 "$worker" --standalone --model "$work/lin2.json" --train-images "$work/r2/train-x.npy" \
  --train-labels "$work/r2/train-y.npy" --test-images "$work/r2/test-x.npy" \
  --test-labels "$work/r2/test-y.npy" --epochs 8 "${train[@]}" --progress 0 \
  --metrics "$work/npy2.jsonl"
if [ "$status" = 0 ]; then
  check_errors "standalone, float64 .npy [N, 2], two outputs" "$work/npy2.jsonl" epoch 0.02 0.12
else
  fail "standalone, float64 .npy [N, 2], two outputs" "exit $status, expected 0"
fi

# --- predict ----------------------------------------------------------------------
# The outputs against x W + b from the exported weights (safetensors read
# here with the standard library), and the weights against the generator's.
run 60 "$coordinator" export --checkpoint "$work/ckpt" --format safetensors \
  --out "$work/lin.safetensors"
[ "$status" = 0 ] || fail "export" "exit $status, expected 0"
run 60 "$worker" predict --weights "$work/ckpt" --data "$work/r1/test-x.npy" \
  --out "$work/pred.csv"
[ "$status" = 0 ] || fail "predict to CSV" "exit $status, expected 0"
run 60 "$worker" predict --weights "$work/lin.safetensors" --data "$work/r1/test-x.npy" \
  --out "$work/pred.jsonl"
[ "$status" = 0 ] || fail "predict to JSON lines" "exit $status, expected 0"
got=$(/usr/bin/python3 - "$work" <<'PY' 2>&1
import json, struct, sys
work = sys.argv[1]

def npy(path):
    data = open(path, "rb").read()
    n = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + n].decode()
    shape = eval(header[header.index("(", header.index("shape")):header.index(")") + 1])
    return shape, struct.unpack("<%df" % (len(data[10 + n:]) // 4), data[10 + n:])

def safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        out[name] = struct.unpack("<%df" % (len(raw) // 4), raw)
    return out

(count, features), x = npy(work + "/r1/test-x.npy")
w = safetensors(work + "/lin.safetensors")
kernel, bias = w["dense/kernel"], w["dense/bias"]
want = [sum(x[e * features + i] * kernel[i] for i in range(features)) + bias[0]
        for e in range(count)]
lines = open(work + "/pred.csv").read().split("\n")
if lines[0] != "index,y0":
    sys.exit("pred.csv header %r, expected 'index,y0'" % lines[0])
rows = [l.split(",") for l in lines[1:] if l]
jsonl = [json.loads(l) for l in open(work + "/pred.jsonl") if l.strip()]
if len(rows) != count or len(jsonl) != count:
    sys.exit("%d CSV rows and %d JSON lines, expected %d" % (len(rows), len(jsonl), count))
worst = 0
for e in range(count):
    if int(rows[e][0]) != e or jsonl[e]["index"] != e:
        sys.exit("row %d has index %s" % (e, rows[e][0]))
    worst = max(worst, abs(float(rows[e][1]) - want[e]), abs(jsonl[e]["outputs"][0] - want[e]))
if worst > 1e-4:
    sys.exit("predictions differ from x W + b by up to %g" % worst)
coef = json.load(open(work + "/r1/coefficients.json"))
far = max([abs(kernel[i] - coef["W"][i][0]) for i in range(features)]
          + [abs(bias[0] - coef["B"][0])])
if far > 0.05:
    sys.exit("weights %s %s, expected about %s %s" % (kernel, bias, coef["W"], coef["B"]))
print("ok %d predictions within %.1e of x W + b; weights within %.3f of the generator's"
      % (count, worst, far))
PY
)
case $got in
  ok*) pass "predict: ${got#ok }" ;;
  *) fail "predict of a regression model" "$got" ;;
esac

# --- refusals -----------------------------------------------------------------------
/usr/bin/python3 "$here/gen_images.py" --out "$work/idx" --count 16 --seed 1 --prefix t \
  >"$work/out" 2>&1 || fail "gen_images.py"
cat >"$work/img.json" <<'EOF'
{"name": "img", "input_shape": [8, 8, 3], "loss": "mse",
 "layers": [{"type": "Flatten"}, {"type": "Dense", "units": 1}]}
EOF
idx=(--train-images "$work/idx/t-images.idx.gz" --train-labels "$work/idx/t-labels.idx.gz"
     --test-images "$work/idx/t-images.idx.gz" --test-labels "$work/idx/t-labels.idx.gz")
expect "standalone: IDX labels for a regression model" 1 \
  "t-labels.idx.gz: IDX labels are integer classes, but the model is a regression model" -- \
  "$worker" --standalone --model "$work/img.json" "${idx[@]}" --progress 0
expect "coordinator: IDX labels for a regression model" 2 \
  "t-labels.idx.gz: IDX labels are integer classes, but the model is a regression model" -- \
  "$coordinator" --local --model "$work/img.json" "${idx[@]}"
sed '3s/^\([^,]*\),\([^,]*\),[^,]*,/\1,\2,high,/' "$work/r1/train.csv" >"$work/bad.csv"
expect "standalone: a target that is not a number" 1 \
  "$work/bad.csv: line 3, column 3: \"high\" is not a finite number" -- \
  "$worker" --standalone --model "$work/lin.json" --format csv --data "$work/bad.csv" \
  --test-data "$work/r1/test.csv" --label-column y --progress 0
expect "coordinator: a target that is not a number" 2 \
  "$work/bad.csv: line 3, column 3: \"high\" is not a finite number" -- \
  "$coordinator" --local --model "$work/lin.json" --data-format csv \
  --train-data "$work/bad.csv" --test-data "$work/r1/test.csv" --label-column y
expect "coordinator: two targets from one CSV column" 2 \
  "CSV data holds one target (the column \"y\"); give 2 targets an example as a .npy" -- \
  "$coordinator" --local --model "$work/lin2.json" --data-format csv "${csv[@]}"
expect "coordinator: --classes for a regression model" 2 \
  "at /data/classes: model \"lin\" is a regression model (\"loss\": \"mse\"), which has no" -- \
  "$coordinator" --local --model "$work/lin.json" --data-format csv "${csv[@]}" --classes 2
expect "coordinator: --device gpu" 2 \
  "model \"lin\" is a regression model (\"loss\": \"mse\"), which runs on the CPU only" -- \
  "$coordinator" --local --model "$work/lin.json" --data-format csv "${csv[@]}" --device gpu

# --- a binary classifier's AUC ------------------------------------------------------
# check_auc NAME FILE EVENT CKPT: the last EVENT record's test_auc equals
# the AUC of predict's probabilities with checkpoint CKPT's weights.
check_auc () {
  local got
  if ! run 60 "$worker" predict --weights "$4" --data "$work/b/test-x.npy" \
       --out "$work/bpred.csv" || [ "$status" != 0 ]; then
    fail "$1: predict" "exit $status, expected 0"
    return
  fi
  got=$(/usr/bin/python3 - "$2" "$3" "$work" <<'PY' 2>&1
import csv, json, sys
path, event, work = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.strip()]
record = [r for r in rows if r["event"] == event][-1]
lines = list(csv.reader(open(work + "/bpred.csv")))
if lines[0] != ["index", "predicted", "p0", "p1"]:
    sys.exit("predict's header %s, expected index,predicted,p0,p1" % lines[0])
p = [float(l[3]) for l in lines[1:]]
labels = [int(l.split(",")[2]) for l in open(work + "/b/test.csv").read().split("\n")[1:] if l]
pos = [p[i] for i in range(len(p)) if labels[i] == 1]
neg = [p[i] for i in range(len(p)) if labels[i] == 0]
wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
auc = wins / (len(pos) * len(neg))
if "test_auc" not in record:
    sys.exit("no test_auc in the %s record: %s" % (event, record))
if abs(record["test_auc"] - auc) > 1e-4 or not 0.8 < auc < 1:
    sys.exit("test_auc %s, but the predictions' AUC is %s" % (record["test_auc"], auc))
print("ok test_auc %.6f, predictions' AUC %.6f" % (record["test_auc"], auc))
PY
)
  case $got in
    ok*) pass "$1: ${got#ok }" ;;
    *) fail "$1" "$got" ;;
  esac
}
bcsv=(--train-data "$work/b/train.csv" --test-data "$work/b/test.csv" --label-column y)
run 60 "$worker" --standalone --model "$work/bin.json" --format csv --data "$work/b/train.csv" \
  --test-data "$work/b/test.csv" --label-column y --epochs 4 "${train[@]}" --progress 0 \
  --metrics "$work/bin.jsonl" --checkpoint-dir "$work/bckpt"
if [ "$status" = 0 ] && grep -q "^epoch 4/4: .*test accuracy [0-9.]*, test auc " "$work/out"
then
  check_auc "standalone, binary CSV" "$work/bin.jsonl" epoch "$work/bckpt"
  check_records "standalone, binary CSV" "$work/bin.jsonl"
else
  fail "standalone, binary CSV" "exit $status, expected 0 and an epoch line with the AUC"
fi
run 120 "$coordinator" --local --model "$work/bin.json" --data-format csv "${bcsv[@]}" \
  --epochs 4 "${train[@]}" --metrics "$work/bin-cluster.jsonl" --checkpoint-dir "$work/bcc"
if [ "$status" = 0 ] && grep -q "test AUC [0-9.]*" "$work/out"; then
  check_auc "local cluster, binary CSV" "$work/bin-cluster.jsonl" eval "$work/bcc"
  check_records "local cluster, binary CSV" "$work/bin-cluster.jsonl"
else
  fail "local cluster, binary CSV" "exit $status, expected 0 and an evaluation with the AUC"
fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
