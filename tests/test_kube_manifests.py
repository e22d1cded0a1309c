#!/usr/bin/env python3
"""The manifests of deploy/k8s pass tests/kube_manifests.py's check, with
the keys of deploy/k8s/make-secrets.sh; and the check is not a rubber
stamp: each of a set of mistakes, made in a copy of the real manifests, is
reported with what is wrong. Also: make-secrets.sh refuses bad options
(exit 2, naming the option), and the podman transform keeps each Job's pod
template and says what it substitutes.

usage: test_kube_manifests.py SOURCE_ROOT COORDINATOR
"""

import copy
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

root, coordinator = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, "tests"))
import kube_manifests  # noqa: E402

k8s = os.path.join(root, "deploy", "k8s")
failures = 0


def report(ok, name, detail=""):
    global failures
    print("%s: %s%s" % ("PASS" if ok else "FAIL", name, "" if ok else "\n      " + detail))
    failures += 0 if ok else 1


secrets = subprocess.run([os.path.join(k8s, "make-secrets.sh")], capture_output=True, text=True,
                         env=dict(os.environ, PS_COORDINATOR=coordinator))
report(secrets.returncode == 0, "make-secrets.sh makes the keys", secrets.stderr)
secret_docs = [("secrets", d) for d in yaml.safe_load_all(secrets.stdout) if d]
kinds = sorted((d["kind"], d["metadata"]["name"]) for _, d in secret_docs)
report(kinds == [("ConfigMap", "ps-cluster-public"), ("Secret", "ps-cluster-keys-chief"),
                 ("Secret", "ps-cluster-keys-ps"), ("Secret", "ps-cluster-keys-worker")],
       "make-secrets.sh: a Secret per role and the public ConfigMap", repr(kinds))
ps_secret = [d for _, d in secret_docs if d["metadata"]["name"] == "ps-cluster-keys-ps"]
report(bool(ps_secret) and sorted(ps_secret[0]["data"]) == ["passwords", "ps-0.cert_secret",
                                                             "ps-0.password", "ps-1.cert_secret",
                                                             "ps-1.password"],
       "make-secrets.sh: the ps Secret holds the servers' secret certificates and passwords, "
       "and every task's passwords file, nothing else",
       repr(ps_secret and sorted(ps_secret[0]["data"])))

for args, says in ((["--ps", "x"], '--ps "x": expected a whole number'),
                   (["--workers", "0"], '--workers "0": expected a whole number, 1 or more'),
                   (["--name", "Bad_Name"], '--name "Bad_Name": expected a DNS label'),
                   (["--frob"], 'unknown argument "--frob"')):
    r = subprocess.run([os.path.join(k8s, "make-secrets.sh")] + args, capture_output=True,
                       text=True, env=dict(os.environ, PS_COORDINATOR=coordinator))
    report(r.returncode == 2 and says in r.stderr and not r.stdout,
           "make-secrets.sh %s: exit 2, says %s" % (" ".join(args), says),
           "exit %d, stderr %r" % (r.returncode, r.stderr))

files = sorted(glob.glob(os.path.join(k8s, "*.yaml"))) + [os.path.join(k8s, "tfjob", "tfjob.yaml")]
docs = kube_manifests.load(files) + secret_docs
problems = kube_manifests.Checker(docs, root).run()
report(not problems, "deploy/k8s and the TFJob check", "\n      ".join(problems))
report({d["kind"] for _, d in docs} >= {"Service", "PersistentVolumeClaim", "ConfigMap", "Job",
                                         "TFJob", "Secret", "Kustomization"},
       "every kind is there", repr({d["kind"] for _, d in docs}))


def named(ds, kind, name):
    return [d for _, d in ds if d.get("kind") == kind and d["metadata"].get("name") == name][0]


def container(job):
    return job["spec"]["template"]["spec"]["containers"][0]


def tf_container(ds, rtype):
    tf = [d for _, d in ds if d.get("kind") == "TFJob"][0]
    return tf["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]


# Each mistake: what it changes in a copy, and what the check must say.
mistakes = [
    ("ps completions 3", lambda ds: named(ds, "Job", "ps-cluster-ps")["spec"].update(completions=3),
     "completions 3, but its pods read 2"),
    ("no readiness probe on the servers",
     lambda ds: container(named(ds, "Job", "ps-cluster-ps")).pop("readinessProbe"),
     "readinessProbe is None, expected exec [ps-k8s, probe]"),
    ("a worker probe that is not the ping",
     lambda ds: container(named(ds, "Job", "ps-cluster-worker"))["readinessProbe"]
     .update(exec={"command": ["true"]}), "readinessProbe is ['true']"),
    ("no memory limit", lambda ds: container(named(ds, "Job", "ps-cluster-worker"))["resources"]
     ["limits"].pop("memory"), "resources.limits needs cpu and memory"),
    ("no image", lambda ds: container(named(ds, "Job", "ps-cluster-chief")).pop("image"),
     "container coordinator has no image"),
    ("no command", lambda ds: container(named(ds, "Job", "ps-cluster-chief")).pop("command"),
     "container coordinator has no command"),
    ("restartPolicy Always", lambda ds: named(ds, "Job", "ps-cluster-chief")["spec"]["template"]
     ["spec"].update(restartPolicy="Always"), "restartPolicy is 'Always', expected OnFailure"),
    ("a claim not ReadWriteMany", lambda ds: named(ds, "PersistentVolumeClaim", "ps-cluster-state")
     ["spec"].update(accessModes=["ReadWriteOnce"]), "accessModes lacks ReadWriteMany"),
    ("a service that is not headless", lambda ds: named(ds, "Service", "ps-cluster-ps")["spec"]
     .pop("clusterIP"), "not headless"),
    ("a subdomain without a service", lambda ds: named(ds, "Job", "ps-cluster-worker")["spec"]
     ["template"]["spec"].update(subdomain="nowhere"), "its subdomain 'nowhere' is no headless"),
    ("a job file that is not a job", lambda ds: named(ds, "ConfigMap", "ps-cluster-job")["data"]
     .update({"job.json": '{"epochs": -1}'}), "job.json at /epochs"),
    ("a Secret nobody made", lambda ds: [d for d in ds if d[0] == "secrets"
                                         and d[1]["metadata"]["name"] == "ps-cluster-keys-ps"][0]
     [1]["metadata"].update(name="other"), "names Secret 'ps-cluster-keys-ps'"),
    ("no metadata.name", lambda ds: named(ds, "Service", "ps-cluster-chief")["metadata"]
     .pop("name"), "no metadata.name"),
    ("TFJob without the tensorflow container", lambda ds: tf_container(ds, "PS")
     .update(name="server"), "PS has no container named tensorflow"),
    ("TFJob PS without its liveness probe", lambda ds: tf_container(ds, "PS")
     .pop("livenessProbe"), "livenessProbe is None"),
]
for name, change, says in mistakes:
    bad = copy.deepcopy(docs)
    change(bad)
    got = kube_manifests.Checker(bad, root).run()
    report(any(says in p for p in got), "the check finds: %s" % name,
           "expected a problem saying %r, got %r" % (says, got))

# The podman form: each Job's pods keep its template, every pod's
# /etc/hosts names every pod at its address, and every substitution is
# said.
scratch = tempfile.mkdtemp()
ip_file = os.path.join(scratch, "ips")
r = subprocess.run([sys.executable, os.path.join(root, "tests", "kube_manifests.py"), "podman",
                    "--prefix", "pskt", "--image", "img", "--coordinator-args", "--epochs 1",
                    "--addresses", "10.9.8", "--ip-file", ip_file]
                   + [os.path.join(k8s, f) for f in ("services.yaml", "storage.yaml", "ps.yaml",
                                                     "worker.yaml", "coordinator.yaml")],
                   input="", capture_output=True, text=True)
pods = {d["metadata"]["name"]: d for d in yaml.safe_load_all(r.stdout) if d and d["kind"] == "Pod"}
report(r.returncode == 0 and sorted(pods) == ["pskt-chief-0", "pskt-ps-0", "pskt-ps-1",
                                              "pskt-worker-0", "pskt-worker-1"],
       "podman form: a Pod per task", "exit %d, pods %r, %s" % (r.returncode, sorted(pods), r.stderr))
if "pskt-ps-1" in pods:
    c = pods["pskt-ps-1"]["spec"]["containers"][0]
    env = kube_manifests.env_of(c)
    orig = container(named(docs, "Job", "ps-cluster-ps"))
    report(env.get("JOB_COMPLETION_INDEX") == "1" and env.get("PS_JOB_NAME") == "pskt"
           and c["args"] == orig["args"] and c["command"] == orig["command"]
           and c["image"] == "img" and c["resources"] == orig["resources"],
           "podman form: ps-1 keeps the template's command, args and resources, with its index",
           repr(c))
    report(pods["pskt-chief-0"]["spec"]["containers"][0]["args"][-2:] == ["--epochs", "1"],
           "podman form: the coordinator's args appended", repr(pods["pskt-chief-0"]))
with open(ip_file, encoding="utf-8") as f:
    ips = f.read().split()
shutil.rmtree(scratch)
report(ips == ["10.9.8.%d" % k for k in range(10, 15)], "podman form: an address per pod", repr(ips))
if "pskt-worker-1" in pods:
    aliases = pods["pskt-worker-1"]["spec"].get("hostAliases", [])
    report(sorted(a["hostnames"][0] for a in aliases) == sorted(pods)
           and sorted(a["ip"] for a in aliases) == sorted(ips),
           "podman form: every pod's /etc/hosts names every pod", repr(aliases))
for says in ("Service ps-cluster-ps dropped", "Job ps-cluster-ps -> Pod pskt-ps-0",
             "emptyDir volumes dropped", "containers' ports dropped"):
    report(("substituted: " + says) in r.stderr, "podman form says: %s" % says, r.stderr)

print("%d failure(s)" % failures if failures else "PASS: every check")
sys.exit(1 if failures else 0)
