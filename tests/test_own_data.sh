#!/usr/bin/env bash
# A user's own image data as IDX files of any name (tests/gen_images.py writes
# them): 8x8 RGB images of 4 classes train to a test accuracy of at least
# 0.9 standalone and on a real local cluster (2 ps-servers, 2 workers),
# where every batch is applied exactly once (tests/faults/check_run.py on
# the metrics and checkpoints); 12x12 grayscale images in [N, H, W] files
# train a flat model standalone; the job file's "data" object names the
# files as the flags do. The mistakes are refused before any training,
# with one line naming both sides: a model of another input shape (both
# shapes), a last layer with fewer classes than the labels (both numbers),
# half a pair of files, and IDX files with text data. A binary classifier
# (a last layer of one logit, sigmoid cross-entropy) learns 2-class data
# standalone and on the cluster, and --device gpu is refused for it at
# once, since only the CPU engine has its loss. NumPy .npy files written
# by numpy.save (float32 flat features, uint8 images, int64 labels) train
# standalone and on the cluster, and damaged or unsupported ones (cut
# short, big-endian, Fortran order, float labels, a label past 255) are
# refused with one line naming the file and the fault. CSV files (gzip,
# a header row, the labels in a named column) train standalone and on the
# cluster, and a missing label column, a cell that is no number, a line
# of the wrong length and a label that is no class are refused naming the
# file, the line and the column. A model of the Keras layers added for
# own models (Activation gelu, tanh and sigmoid, AveragePooling2D,
# GlobalAveragePooling2D) trains standalone and on the cluster; it is
# refused on the GPU and with an activation after its logits.
#
# Usage: test_own_data.sh (PS_WORKER and PS_COORDINATOR name the programs)
set -u
worker=${PS_WORKER:?PS_WORKER is not set}
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/ps-own-data-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

. "$here/cli_lib.sh"

# --- the data and the models ------------------------------------------------
data=$work/data
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 512 --seed 1 --prefix train \
  >"$work/out" 2>&1 || { fail "gen_images.py (train)"; exit 1; }
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 128 --seed 2 --prefix test \
  >"$work/out" 2>&1 || { fail "gen_images.py (test)"; exit 1; }
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 256 --seed 3 --prefix gray-train \
  --size 12 --channels 1 >"$work/out" 2>&1 || { fail "gen_images.py (gray)"; exit 1; }
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 64 --seed 4 --prefix gray-test \
  --size 12 --channels 1 >"$work/out" 2>&1 || { fail "gen_images.py (gray test)"; exit 1; }
files=(--train-images "$data/train-images.idx.gz" --train-labels "$data/train-labels.idx.gz"
       --test-images "$data/test-images.idx.gz" --test-labels "$data/test-labels.idx.gz")
cat >"$work/rgb8.json" <<'EOF'
{"name": "rgb8", "input_shape": [8, 8, 3], "layers": [
  {"type": "Conv2D", "filters": 8, "kernel_size": 3, "padding": "same", "activation": "relu"},
  {"type": "MaxPool2D"},
  {"type": "Flatten"},
  {"type": "Dense", "units": 4}]}
EOF
sed 's/"units": 4/"units": 3/' "$work/rgb8.json" >"$work/rgb8-3.json"
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 512 --seed 5 --prefix bin-train \
  --classes 2 >"$work/out" 2>&1 || { fail "gen_images.py (binary)"; exit 1; }
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 128 --seed 6 --prefix bin-test \
  --classes 2 >"$work/out" 2>&1 || { fail "gen_images.py (binary test)"; exit 1; }
bin_files=(--train-images "$data/bin-train-images.idx.gz"
           --train-labels "$data/bin-train-labels.idx.gz"
           --test-images "$data/bin-test-images.idx.gz" --test-labels "$data/bin-test-labels.idx.gz")
cat >"$work/bin8.json" <<'EOF'
{"name": "bin8", "input_shape": [8, 8, 3], "layers": [
  {"type": "Flatten"},
  {"type": "Dense", "units": 8, "activation": "relu"},
  {"type": "Dense", "units": 1}]}
EOF
cat >"$work/gray12.json" <<'EOF'
{"name": "gray12", "input_shape": [144], "layers": [
  {"type": "Dense", "units": 16, "activation": "relu"},
  {"type": "Dense", "units": 4}]}
EOF

# check_accuracy NAME FILE MIN: the last record of metrics FILE has a test
# accuracy of at least MIN.
check_accuracy () {
  local accuracy
  accuracy=$(python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(rows[-1]["test_accuracy"])' "$2" 2>/dev/null)
  if python3 -c 'import sys; sys.exit(not float(sys.argv[1]) >= float(sys.argv[2]))' \
       "${accuracy:-0}" "$3"; then
    pass "$1: test accuracy $accuracy"
  else
    fail "$1" "test accuracy ${accuracy:-none}, expected at least $3"
  fi
}

# --- standalone -------------------------------------------------------------
run 120 "$worker" --standalone --model "$work/rgb8.json" "${files[@]}" --epochs 3 --batch 32 \
  --lr 0.01 --threads 1 --progress 0 --metrics "$work/standalone.jsonl"
if [ "$status" = 0 ] && grep -qF "512 training and 128 test examples" "$work/out"; then
  check_accuracy "standalone, 8x8 RGB, 4 classes" "$work/standalone.jsonl" 0.9
else
  fail "standalone, 8x8 RGB, 4 classes" "exit $status, expected 0 with 512 and 128 examples"
fi
run 120 "$worker" --standalone --model "$work/gray12.json" --epochs 3 --batch 32 --lr 0.01 \
  --threads 1 --progress 0 --metrics "$work/gray.jsonl" \
  --train-images "$data/gray-train-images.idx.gz" --train-labels "$data/gray-train-labels.idx.gz" \
  --test-images "$data/gray-test-images.idx.gz" --test-labels "$data/gray-test-labels.idx.gz"
if [ "$status" = 0 ]; then
  check_accuracy "standalone, 12x12 grayscale [N, H, W], flat model" "$work/gray.jsonl" 0.9
else
  fail "standalone, 12x12 grayscale" "exit $status, expected 0"
fi

# --- a local cluster ----------------------------------------------------------
# 512 examples in batches of 32 for 2 epochs: 32 steps over 2 servers.
run 180 "$coordinator" --local --model "$work/rgb8.json" "${files[@]}" --epochs 2 --batch 32 \
  --lr 0.01 --threads 1 --metrics "$work/cluster.jsonl" --checkpoint-dir "$work/ckpt" --keep 10
if [ "$status" = 0 ]; then
  check_accuracy "local cluster, 8x8 RGB, 4 classes" "$work/cluster.jsonl" 0.9
  if /usr/bin/python3 "$here/faults/check_run.py" --metrics "$work/cluster.jsonl" --total 32 \
       --servers 2 >"$work/out" 2>&1; then
    pass "local cluster: every batch applied exactly once"
  else
    fail "local cluster: every batch applied exactly once" "check_run.py found violations"
  fi
else
  fail "local cluster, 8x8 RGB, 4 classes" "exit $status, expected 0"
fi
# Its checkpoints resume only the job that trained on the same files.
cp "$data/train-images.idx.gz" "$data/copy-images.idx.gz"
expect "resume with other training files" 1 \
  "was written by a job with another data.train_images" -- \
  "$coordinator" --local --resume --model "$work/rgb8.json" "${files[@]}" --epochs 2 \
  --batch 32 --lr 0.01 --threads 1 --checkpoint-dir "$work/ckpt" --keep 10 \
  --train-images "$data/copy-images.idx.gz" --log-dir "$work/refused-logs"

# --- a binary classifier ------------------------------------------------------
run 120 "$worker" --standalone --model "$work/bin8.json" "${bin_files[@]}" --epochs 3 \
  --batch 32 --lr 0.01 --threads 1 --progress 0 --metrics "$work/bin.jsonl"
if [ "$status" = 0 ]; then
  check_accuracy "standalone, binary (one logit)" "$work/bin.jsonl" 0.9
else
  fail "standalone, binary (one logit)" "exit $status, expected 0"
fi
run 180 "$coordinator" --local --model "$work/bin8.json" "${bin_files[@]}" --epochs 2 \
  --batch 32 --lr 0.01 --threads 1 --metrics "$work/bin-cluster.jsonl" \
  --checkpoint-dir "$work/bin-ckpt" --keep 10
if [ "$status" = 0 ]; then
  check_accuracy "local cluster, binary (one logit)" "$work/bin-cluster.jsonl" 0.9
else
  fail "local cluster, binary (one logit)" "exit $status, expected 0"
fi
cpu_only="is a binary classifier (a last layer of one logit), which runs on the CPU only"
expect "coordinator: binary on --device gpu" 2 "$cpu_only" -- \
  "$coordinator" --local --model "$work/bin8.json" "${bin_files[@]}" --device gpu
# Where no GPU is usable, ps-worker's device check comes first (exit 69,
# test_no_gpu), and the model's refusal is the coordinator's above.
bin_gpu=("$worker" --standalone --model "$work/bin8.json" "${bin_files[@]}" --device gpu
         --progress 0)
run 60 "${bin_gpu[@]}"
if [ "$status" = 69 ]; then
  expect "standalone: binary on --device gpu, no usable GPU here" 69 "no usable GPU" -- \
    "${bin_gpu[@]}"
else
  expect "standalone: binary on --device gpu" 1 "$cpu_only" -- "${bin_gpu[@]}"
fi
expect "binary model on 4 classes" 2 \
  "gives 2 classes (one logit: binary), but the data has labels up to 3 (4 classes)" -- \
  "$coordinator" --local --model "$work/bin8.json" "${files[@]}"

# --- NumPy .npy ------------------------------------------------------------------
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 512 --seed 7 --prefix npy-train \
  --format npy-f32 --flat >"$work/out" 2>&1 || { fail "gen_images.py (npy)"; exit 1; }
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 128 --seed 8 --prefix npy-test \
  --format npy-f32 --flat >"$work/out" 2>&1 || { fail "gen_images.py (npy test)"; exit 1; }
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 128 --seed 9 --prefix u8-test \
  --format npy-u8 >"$work/out" 2>&1 || { fail "gen_images.py (npy u8)"; exit 1; }
npy_files=(--train-images "$data/npy-train-images.npy" --train-labels "$data/npy-train-labels.npy"
           --test-images "$data/npy-test-images.npy" --test-labels "$data/npy-test-labels.npy")
cat >"$work/flat192.json" <<'EOF'
{"name": "flat192", "input_shape": [192], "layers": [
  {"type": "Dense", "units": 16, "activation": "relu"},
  {"type": "Dense", "units": 4}]}
EOF
run 120 "$worker" --standalone --model "$work/flat192.json" "${npy_files[@]}" --epochs 3 \
  --batch 32 --lr 0.01 --threads 1 --progress 0 --metrics "$work/npy.jsonl"
if [ "$status" = 0 ]; then
  check_accuracy "standalone, float32 .npy [N, 192]" "$work/npy.jsonl" 0.9
else
  fail "standalone, float32 .npy [N, 192]" "exit $status, expected 0"
fi
run 120 "$worker" --standalone --model "$work/rgb8.json" "${files[@]:0:4}" --epochs 3 \
  --batch 32 --lr 0.01 --threads 1 --progress 0 --metrics "$work/u8.jsonl" \
  --test-images "$data/u8-test-images.npy" --test-labels "$data/u8-test-labels.npy"
if [ "$status" = 0 ]; then
  check_accuracy "standalone, IDX training and uint8 .npy test images" "$work/u8.jsonl" 0.9
else
  fail "standalone, IDX training and uint8 .npy test images" "exit $status, expected 0"
fi
run 180 "$coordinator" --local --model "$work/flat192.json" "${npy_files[@]}" --epochs 2 \
  --batch 32 --lr 0.01 --threads 1 --metrics "$work/npy-cluster.jsonl" \
  --checkpoint-dir "$work/npy-ckpt" --keep 10
if [ "$status" = 0 ]; then
  check_accuracy "local cluster, float32 .npy" "$work/npy-cluster.jsonl" 0.9
else
  fail "local cluster, float32 .npy" "exit $status, expected 0"
fi
# Bad .npy files, each named with its fault; labels.npy stays good.
/usr/bin/python3 - "$data" <<'EOF' >"$work/out" 2>&1 || fail "writing the bad .npy files"
import numpy, sys
d = sys.argv[1]
good = numpy.load(d + "/npy-train-images.npy")
raw = open(d + "/npy-train-images.npy", "rb").read()
open(d + "/cut.npy", "wb").write(raw[:len(raw) - 100])
numpy.save(d + "/big.npy", good.astype(">f4"))
numpy.save(d + "/fortran.npy", numpy.asfortranarray(good))
numpy.save(d + "/f64.npy", good.astype(numpy.float64))
numpy.save(d + "/float-labels.npy", numpy.load(d + "/npy-train-labels.npy").astype(numpy.float32))
wide = numpy.load(d + "/npy-train-labels.npy")
wide[17] = 300
numpy.save(d + "/wide-labels.npy", wide)
EOF
labels_ok=--train-labels=$data/npy-train-labels.npy
images_ok=--train-images=$data/npy-train-images.npy
test_ok=("${npy_files[@]:4:4}")
for bad in "cut.npy|truncated: the shape needs 393216 bytes of data, the file has 393116" \
           "big.npy|element type '>f4' is not supported" \
           "fortran.npy|the array is in Fortran order; expected C order" \
           "f64.npy|features of element type '<f8', expected uint8"; do
  file=${bad%%|*}
  expect "bad .npy features: $file" 2 "$data/$file: ${bad#*|}" -- \
    "$coordinator" --local --model "$work/flat192.json" --train-images "$data/$file" \
    "$labels_ok" "${test_ok[@]}"
done
expect "bad .npy labels: float32" 1 \
  "$data/float-labels.npy: labels of element type '<f4', expected integer class indices" -- \
  "$worker" --standalone --model "$work/flat192.json" "$images_ok" \
  --train-labels "$data/float-labels.npy" "${test_ok[@]}" --progress 0
expect "bad .npy labels: 300" 2 "$data/wide-labels.npy: label 300 at index 17" -- \
  "$coordinator" --local --model "$work/flat192.json" "$images_ok" \
  --train-labels "$data/wide-labels.npy" "${test_ok[@]}"

# --- CSV ----------------------------------------------------------------------------
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 512 --seed 10 --prefix csv-train \
  --format csv >"$work/out" 2>&1 || { fail "gen_images.py (csv)"; exit 1; }
/usr/bin/python3 "$here/gen_images.py" --out "$data" --count 128 --seed 11 --prefix csv-test \
  --format csv >"$work/out" 2>&1 || { fail "gen_images.py (csv test)"; exit 1; }
csv_train=$data/csv-train.csv.gz
csv_test=$data/csv-test.csv.gz
run 120 "$worker" --standalone --model "$work/flat192.json" --format csv --data "$csv_train" \
  --test-data "$csv_test" --label-column class --epochs 3 --batch 32 --lr 0.01 --threads 1 \
  --progress 0 --metrics "$work/csv.jsonl"
if [ "$status" = 0 ] && grep -qF "512 training and 128 test examples" "$work/out"; then
  check_accuracy "standalone, CSV (gzip)" "$work/csv.jsonl" 0.9
else
  fail "standalone, CSV (gzip)" "exit $status, expected 0 with 512 and 128 examples"
fi
run 180 "$coordinator" --local --model "$work/flat192.json" --data-format csv \
  --train-data "$csv_train" --test-data "$csv_test" --label-column class --epochs 2 \
  --batch 32 --lr 0.01 --threads 1 --metrics "$work/csv-cluster.jsonl" \
  --checkpoint-dir "$work/csv-ckpt" --keep 10
if [ "$status" = 0 ]; then
  check_accuracy "local cluster, CSV" "$work/csv-cluster.jsonl" 0.9
  if /usr/bin/python3 "$here/faults/check_run.py" --metrics "$work/csv-cluster.jsonl" \
       --total 32 --servers 2 >"$work/out" 2>&1; then
    pass "local cluster, CSV: every batch applied exactly once"
  else
    fail "local cluster, CSV: every batch applied exactly once" "check_run.py found violations"
  fi
else
  fail "local cluster, CSV" "exit $status, expected 0"
fi
# Bad CSV files, plain, made from the good one.
zcat "$csv_train" >"$work/good.csv"
sed '3s/^[^,]*,/x1,/' "$work/good.csv" >"$work/cell.csv"
sed '4s/,[^,]*$//' "$work/good.csv" >"$work/short.csv"
sed '5s/,[0-3],/,1.5,/' "$work/good.csv" >"$work/label.csv"
head -1 "$work/good.csv" >"$work/empty.csv"
for bad in "cell.csv|line 3, column 1: \"x1\" is not a finite number" \
           "short.csv|line 4: 192 cells, expected 193 (the header's columns)" \
           "label.csv|line 5, column 97: label 1.5, expected a class 0 .. 255" \
           "empty.csv|a header but no examples"; do
  file=${bad%%|*}
  expect "bad CSV: $file" 2 "$work/$file: ${bad#*|}" -- \
    "$coordinator" --local --model "$work/flat192.json" --data-format csv \
    --train-data "$work/$file" --test-data "$csv_test" --label-column class
done
expect "CSV without the label column" 1 \
  "$csv_train: line 1: no column \"label\" for the labels in the header (columns: p0, p1," -- \
  "$worker" --standalone --model "$work/flat192.json" --format csv --data "$csv_train" \
  --test-data "$csv_test" --progress 0
expect "CSV without a test file" 2 "--format csv needs the training file" -- \
  "$worker" --standalone --model "$work/flat192.json" --format csv --data "$csv_train"

# --- Activation and average-pooling layers ---------------------------------------
cat >"$work/act8.json" <<'EOF'
{"name": "act8", "input_shape": [8, 8, 3], "layers": [
  {"type": "Conv2D", "filters": 8, "kernel_size": 3, "padding": "same"},
  {"type": "Activation", "activation": "gelu"},
  {"type": "AveragePooling2D"},
  {"type": "Conv2D", "filters": 8, "kernel_size": 3, "padding": "same"},
  {"type": "Activation", "activation": "tanh"},
  {"type": "GlobalAveragePooling2D"},
  {"type": "Dense", "units": 8},
  {"type": "Activation", "activation": "sigmoid"},
  {"type": "Dense", "units": 1}]}
EOF
# The global average keeps the colour and drops the position, so the
# binary data (colour alone tells its classes apart) is what it learns.
run 120 "$worker" --standalone --model "$work/act8.json" "${bin_files[@]}" --epochs 5 --batch 32 \
  --lr 0.01 --threads 1 --progress 0 --metrics "$work/act.jsonl"
if [ "$status" = 0 ]; then
  check_accuracy "standalone, gelu/tanh/sigmoid and average pooling" "$work/act.jsonl" 0.9
else
  fail "standalone, gelu/tanh/sigmoid and average pooling" "exit $status, expected 0"
fi
run 180 "$coordinator" --local --model "$work/act8.json" "${bin_files[@]}" --epochs 4 --batch 32 \
  --lr 0.01 --threads 1 --metrics "$work/act-cluster.jsonl"
if [ "$status" = 0 ]; then
  check_accuracy "local cluster, gelu/tanh/sigmoid and average pooling" \
    "$work/act-cluster.jsonl" 0.9
else
  fail "local cluster, gelu/tanh/sigmoid and average pooling" "exit $status, expected 0"
fi
expect "average pooling on --device gpu" 2 \
  "is a binary classifier (a last layer of one logit), which runs on the CPU only" -- \
  "$coordinator" --local --model "$work/act8.json" "${bin_files[@]}" --device gpu
sed 's/"units": 1}]}/"units": 1}, {"type": "Activation", "activation": "softmax"}]}/' \
  "$work/act8.json" >"$work/softmax-last.json"
expect "softmax after the logits" 1 \
  "is an Activation \"softmax\", but the loss takes logits" -- \
  "$worker" --summary --model "$work/softmax-last.json"

# --- mistakes -------------------------------------------------------------------
shapes="takes 28x28x1 inputs, but the data has 8x8x3 images"
expect "coordinator: cnn on 8x8 RGB" 2 "$shapes" -- \
  "$coordinator" --local --model cnn "${files[@]}"
expect "standalone: cnn on 8x8 RGB" 1 "$shapes" -- \
  "$worker" --standalone --model cnn "${files[@]}" --progress 0
classes="gives 3 classes, but the data has labels up to 3 (4 classes)"
expect "coordinator: 3 classes for labels 0..3" 2 "$classes" -- \
  "$coordinator" --local --model "$work/rgb8-3.json" "${files[@]}"
expect "standalone: 3 classes for labels 0..3" 1 "$classes" -- \
  "$worker" --standalone --model "$work/rgb8-3.json" "${files[@]}" --progress 0
expect "coordinator: images without labels" 2 \
  "the training images file is given ($data/train-images.idx.gz) but not its labels file" -- \
  "$coordinator" --local --model "$work/rgb8.json" --train-images "$data/train-images.idx.gz"
expect "standalone: labels without images" 1 \
  "the test labels file is given ($data/test-labels.idx.gz) but not its images file" -- \
  "$worker" --standalone --model "$work/rgb8.json" --test-labels "$data/test-labels.idx.gz"
expect "coordinator: a missing named file" 2 "$work/nothing.idx: not found" -- \
  "$coordinator" --local --model "$work/rgb8.json" --train-images "$work/nothing.idx" \
  --train-labels "$data/train-labels.idx.gz"

# Classes set by hand: the model's last layer must give exactly that many,
# and no label may reach past them.
expect "--classes 5 with a 4-unit model" 2 \
  "at /data/classes: 5 classes, but the last layer of model \"rgb8\" gives 4" -- \
  "$coordinator" --local --model "$work/rgb8.json" "${files[@]}" --classes 5
expect "--classes 3 with labels up to 3" 2 \
  "at /data/classes: 3 classes, but the labels go up to 3 (4 classes)" -- \
  "$coordinator" --local --model "$work/rgb8-3.json" "${files[@]}" --classes 3

# The job file's "data" object reads as the flags do: cnn is refused on
# the files it names, and so are IDX files with text data.
cat >"$work/job.json" <<EOF
{"model": "cnn", "epochs": 1,
 "data": {"train_images": "$data/train-images.idx.gz", "train_labels": "$data/train-labels.idx.gz",
          "test_images": "$data/test-images.idx.gz", "test_labels": "$data/test-labels.idx.gz"}}
EOF
expect "job file: data object" 2 "$shapes" -- "$coordinator" --local --job "$work/job.json"
expect "job file: IDX files with criteo data" 2 \
  "at /data/train_images: expected no IDX file while data_format is criteo" -- \
  "$coordinator" --local --job "$work/job.json" --data-format criteo \
  --train-data "$work/t.txt" --test-data "$work/t.txt"

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
