#!/usr/bin/env bash
# Install what ps-cluster needs to build, test and train on Debian 12, as
# root. Only missing packages are installed; a machine that has them all is
# left alone (and needs no network).
set -eu
packages=(
  build-essential meson ninja-build pkg-config
  libzmq3-dev libczmq-dev libmsgpack-dev libopenblas-dev zlib1g-dev
  libjansson-dev libcmocka-dev
  libmicrohttpd-dev         # the coordinator's Prometheus endpoint (--metrics-port)
  python3-msgpack           # regenerates schemas/vectors.json
  json-schema-test-suite    # tests/test_jsonschema: the official JSON Schema tests
  python3-jsonschema        # tests/test_jsonschema_cross.py: a second validator of schemas/*.schema.json
  dataset-fashion-mnist     # /usr/share/datasets/fashion-mnist
  iproute2 iptables         # the failure-injection harness (tests/faults)
  clang libfuzzer-14-dev libclang-rt-14-dev   # the fuzz build (tests/fuzz): clang's libFuzzer and sanitizers
  slurm-wlm munge           # tests/test_slurm.sh: a real slurmctld and slurmd, authenticated by munge
  python3-yaml              # tests/kube_manifests.py: the Kubernetes manifests of deploy/k8s
  python3-numpy python3-torch   # tests/test_export.py (NumPy reads the export, PyTorch rebuilds the model), tests/gen_images.py (.npy data)
  prometheus                # tests/test_prometheus.sh: promtool and a real server scraping the coordinator
  gnuplot-nox               # coordinator plot (and tests/test_plot.sh)
  pyflakes3 shellcheck      # tests/test_lint.py: every Python file and shell script of the tree checked
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}"
fi
