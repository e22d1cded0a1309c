#!/usr/bin/env bash
# Standalone click-through-rate training (worker/ps_ctrstandalone.c) on
# data from tests/gen_ctr (small cardinalities, a planted logistic model):
# lr reaches the planted model's test AUC less 0.01 in one epoch of 100,000
# rows, with every step recorded once in each table's ledger (the done
# record); dlrm trains (an AUC well above 0.5, and the test log loss falls
# from one epoch to the next, below the 0.56 of predicting the base rate);
# LIBSVM data trains a spec for it; --summary shows dlrm's tables; and the
# mistakes (no test file, a model that does not fit the data, an image
# model given CTR options, a missing file, a mostly malformed file, a row
# gradient that is not finite) are refused naming what is wrong.
#
# Usage: test_ctr_standalone.sh GEN_CTR (PS_WORKER names ps-worker)
set -u
worker=${PS_WORKER:?PS_WORKER is not set}
gen=${1:?usage: test_ctr_standalone.sh GEN_CTR}
work=$(mktemp -d /tmp/ps-ctr-standalone-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

. "$(dirname "$0")/cli_lib.sh"

"$gen" --out "$work/data" --train-rows 100000 --test-rows 20000 --seed 1 \
  --cardinalities small >"$work/out" 2>&1 || { fail "gen_ctr"; exit 1; }
train=$work/data/train.txt
test=$work/data/test.txt

# The field of the last metrics line (the done record) or of a table of it.
done_field () {
  python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(rows[-1][sys.argv[2]])' "$1" "$2"
}

# --- lr: the planted AUC ------------------------------------------------------
run 300 "$worker" --standalone --model lr --data "$train" --test-data "$test" \
  --metrics "$work/lr.jsonl" --progress 0
if [ "$status" != 0 ]; then
  fail "lr trains" "exit $status"
else
  verdict=$(python3 - "$work/lr.jsonl" "$work/data/planted.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
planted = json.load(open(sys.argv[2]))["splits"]["test"]["auc"]
done = rows[-1]
assert done["event"] == "done", done
bad = []
if done["test_auc"] < planted - 0.01:
    bad.append("test AUC %.4f, below the planted %.4f less 0.01" % (done["test_auc"], planted))
steps = done["steps"]
if steps != 196:
    bad.append("%d steps, not 196 (100,000 lines in batches of 512)" % steps)
for t in done["tables"]:
    if t["steps"] != steps:
        bad.append("table %s holds %d steps in its ledger, not %d" % (t["name"], t["steps"], steps))
    if t["rows"] == 0 or t["created"] != t["rows"]:
        bad.append("table %s: %d rows, %d created" % (t["name"], t["rows"], t["created"]))
print("; ".join(bad) if bad else "ok: test AUC %.4f, planted %.4f" % (done["test_auc"], planted))
PY
)
  case $verdict in
    ok*) pass "lr reaches the planted AUC less 0.01 (${verdict#ok: })" ;;
    *) fail "lr reaches the planted AUC less 0.01" "$verdict" ;;
  esac
fi

# --- dlrm: it trains ------------------------------------------------------------
run 300 "$worker" --standalone --model dlrm --data "$train" --test-data "$test" \
  --limit 30000 --test-limit 10000 --epochs 2 --metrics "$work/dlrm.jsonl" --progress 0
if [ "$status" != 0 ]; then
  fail "dlrm trains" "exit $status"
else
  verdict=$(python3 - "$work/dlrm.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evals = [r for r in rows if r["event"] == "eval"]
done = rows[-1]
bad = []
if len(evals) != 2:
    bad.append("%d eval records, not 2" % len(evals))
elif not evals[1]["test_loss"] < evals[0]["test_loss"]:
    bad.append("test log loss %.4f after epoch 2, not below %.4f after epoch 1"
               % (evals[1]["test_loss"], evals[0]["test_loss"]))
if done["test_auc"] < 0.75 or done["test_loss"] > 0.5:
    bad.append("test AUC %.4f (expected over 0.75), log loss %.4f (expected under 0.5)"
               % (done["test_auc"], done["test_loss"]))
if len(done["tables"]) != 26:
    bad.append("%d tables, not 26" % len(done["tables"]))
print("; ".join(bad) if bad else "ok: test AUC %.4f, log loss %.4f then %.4f"
      % (done["test_auc"], evals[0]["test_loss"], evals[1]["test_loss"]))
PY
)
  case $verdict in
    ok*) pass "dlrm trains (${verdict#ok: })" ;;
    *) fail "dlrm trains" "$verdict" ;;
  esac
fi

# --- LIBSVM: a spec of one field and no dense features --------------------------
"$gen" --out "$work/svm" --train-rows 5000 --test-rows 2000 --seed 2 --cardinalities small \
  --format libsvm >"$work/out" 2>&1 || fail "gen_ctr --format libsvm"
cat >"$work/svm.json" <<'JSON'
{"name": "lr-libsvm", "inputs": {"dense": 0, "fields": 1},
 "layers": [{"type": "Embedding", "dim": 1, "wide": true, "initializer": {"kind": "zeros"},
             "optimizer": {"kind": "ftrl", "lr": 0.2}},
            {"type": "Concatenate"}, {"type": "Dense", "units": 1}]}
JSON
expect "LIBSVM data with a spec for it" 0 "epoch 1/1: train loss|test AUC" -- \
  "$worker" --standalone --model "$work/svm.json" --format libsvm --progress 0 \
  --data "$work/svm/train.txt" --test-data "$work/svm/test.txt"

# --- the summary and the mistakes -------------------------------------------------
expect "--summary --model dlrm" 0 \
  "inputs 13 dense, 26 fields|embedding/f0 .. embedding/f25|total parameters: 143105" -- \
  "$worker" --summary --model dlrm
expect "no --test-data" 1 "--test-data FILE" -- \
  "$worker" --standalone --model lr --data "$train"
expect "dlrm on LIBSVM data" 1 \
  "model \"dlrm\" takes 13 dense features and 26 fields|libsvm data|has 0 and 1" -- \
  "$worker" --standalone --model dlrm --format libsvm --data "$work/svm/train.txt" \
  --test-data "$work/svm/test.txt"
expect "an image model with --test-data" 2 \
  "--test-data and --format are for click-through-rate models" -- \
  "$worker" --standalone --model mlp --test-data "$test"
expect "--eval-steps with a CTR model" 2 "--eval-steps is for image classifiers" -- \
  "$worker" --standalone --model lr --eval-steps 10 --data "$train" --test-data "$test"
expect "a bad --format" 2 "--format" -- \
  "$worker" --standalone --model lr --format csv --data "$train" --test-data "$test"
expect "a missing training file" 1 "$work/nosuch.txt" -- \
  "$worker" --standalone --model lr --data "$work/nosuch.txt" --test-data "$test"
# A row gradient that overflows (one id 200 times in a line, each at 3e38,
# summed) while the loss and the dense gradient stay finite: the step is
# refused naming the table and the id, before anything is applied.
sed 's/"wide": true,/"wide": true, "pooling": "sum",/' "$work/svm.json" >"$work/svm-sum.json"
python3 -c '
print("0 " + " ".join(["7:3e38"] * 200))
for i in range(20): print("%d %d:1" % (i % 2, i))' >"$work/overflow.txt"
expect "a row gradient that is not finite" 1 \
  "table embedding/f0: the gradient of id 7 is not finite|diverged" -- \
  "$worker" --standalone --model "$work/svm-sum.json" --format libsvm --progress 0 \
  --data "$work/overflow.txt" --test-data "$work/svm/test.txt"
printf '1\tnot\tcriteo\n0\tat\tall\n' >"$work/bad.txt"
expect "a mostly malformed file" 1 "$work/bad.txt|malformed" -- \
  "$worker" --standalone --model lr --data "$work/bad.txt" --test-data "$test"

echo "$failures failure(s)"
[ "$failures" = 0 ]
