#!/usr/bin/env python3
"""The Kubernetes manifests of deploy/k8s: a check of their fields, and the
transform that turns them into what `podman kube play` (podman 4.3.1) runs.

  kube_manifests.py check FILE...
      Parse every YAML document of the files (deploy/k8s/*.yaml, the TFJob,
      make-secrets.sh's output) and check what Kubernetes would need and
      what ps-cluster relies on: apiVersion, kind and metadata.name; every
      container's image and command, its resources (requests and limits);
      the servers' liveness and readiness probes and the workers' readiness
      probe (`ps-k8s probe`, the protocol's ping); restart policies
      (OnFailure: a failed process is restarted, one that finished stays
      down); an Indexed Job's completions equal to the PS_NUM_PS or
      PS_NUM_WORKERS its pods read; a Job's subdomain naming a headless
      Service that selects its pods; every volume a container mounts
      defined in its pod, and every ConfigMap, Secret and claim a pod names
      defined in the files; the job file a valid job (schemas/
      job.schema.json). No offline `kubectl --dry-run` exists here
      (kubectl needs an API server), so this is the check. Prints each
      problem as FILE: KIND/NAME: what is wrong, and exits 1 when there is
      one.

  kube_manifests.py podman --prefix P --image IMAGE --addresses NET
                    --ip-file F [--coordinator-args A] FILE...
      Print, on stdout, the manifests as podman kube play 4.3.1 runs them,
      and on stderr every substitution made (INFRA.md lists what it
      accepts):
      - each Job becomes its pods, with the same pod template: pod I of an
        Indexed Job is a Pod P-ROLE-I with JOB_COMPLETION_INDEX=I (what
        the Job controller sets); the coordinator's Job is the Pod
        P-chief-0;
      - Services are dropped: the headless services' names JOB-I.SERVICE
        become the pod names P-ROLE-I (PS_JOB_NAME=P, PS_HOST_TEMPLATE=
        {job}-{role}-{index} for entrypoint.sh), each at a fixed address
        NET.10, NET.11, ... (one a line in F, in the pods' order, for
        kube play's --ip) that every pod's /etc/hosts names (hostAliases),
        as the compose demo does: podman's DNS server (aardvark-dns 1.4)
        was seen to leave a new pod's lookups of another unanswered for
        over a minute;
      - Secrets become ConfigMaps with the same (decoded) files, and secret
        volumes configMap volumes: podman 4.3.1 does not decode a secret
        volume's files;
      - emptyDir volumes are dropped (the image's own directories serve):
        podman 4.3.1 makes each a named volume that every pod shares;
      - an exec probe's command is joined into one word: podman 4.3.1 turns
        it into a healthcheck that runs sh -c with the first word only;
      - containers' ports are dropped: podman 4.3.1 publishes each
        containerPort on the host, and pods reach each other without it;
      - every ConfigMap, Secret and claim is renamed P-NAME, the image is
        IMAGE, and the coordinator's args get A appended (a short run).
"""

import argparse
import base64
import copy
import json
import os
import shlex
import sys

import yaml

ROLES = ("chief", "ps", "worker")


def load(paths):
    """Every document of the files, as (path, document)."""
    docs = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for doc in yaml.safe_load_all(f):
                if doc is not None:
                    docs.append((path, doc))
    return docs


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", []) if "name" in e}


class Checker:
    def __init__(self, docs, source_root):
        self.docs = docs
        self.source_root = source_root
        self.problems = []
        self.defined = {"ConfigMap": set(), "Secret": set(), "PersistentVolumeClaim": set(),
                        "Service": {}}
        for _, doc in docs:
            kind = doc.get("kind")
            name = (doc.get("metadata") or {}).get("name")
            if kind == "Service":
                self.defined["Service"][name] = doc
            elif kind in self.defined:
                self.defined[kind].add(name)

    def problem(self, path, doc, text):
        name = "%s/%s" % (doc.get("kind", "?"), (doc.get("metadata") or {}).get("name", "?"))
        self.problems.append("%s: %s: %s" % (path, name, text))

    def run(self):
        for path, doc in self.docs:
            if not isinstance(doc, dict):
                self.problems.append("%s: a document that is not a mapping" % path)
                continue
            for key in ("apiVersion", "kind"):
                if not isinstance(doc.get(key), str) or not doc.get(key):
                    self.problem(path, doc, "no %s" % key)
            if doc.get("kind") != "Kustomization" \
               and not (doc.get("metadata") or {}).get("name"):
                self.problem(path, doc, "no metadata.name")
            check = getattr(self, "kind_" + str(doc.get("kind")), None)
            if check is None:
                self.problem(path, doc, "a kind this check does not know")
            else:
                check(path, doc)
        return self.problems

    def kind_Kustomization(self, path, doc):
        for r in doc.get("resources", []):
            if not os.path.isfile(os.path.join(os.path.dirname(path), r)):
                self.problem(path, doc, "resource %s is not a file beside it" % r)

    def kind_Service(self, path, doc):
        spec = doc.get("spec") or {}
        if spec.get("clusterIP") != "None":
            self.problem(path, doc, "not headless (spec.clusterIP: None): a pod's stable name "
                         "comes from a headless service")
        if spec.get("publishNotReadyAddresses") is not True:
            self.problem(path, doc, "publishNotReadyAddresses is not true: a process resolves "
                         "its own name to bind it, before it is ready")
        if not spec.get("selector"):
            self.problem(path, doc, "no spec.selector")
        if not spec.get("ports"):
            self.problem(path, doc, "no spec.ports")

    def kind_PersistentVolumeClaim(self, path, doc):
        spec = doc.get("spec") or {}
        if "ReadWriteMany" not in spec.get("accessModes", []):
            self.problem(path, doc, "accessModes lacks ReadWriteMany: every server writes "
                         "its checkpoint files beside the coordinator's manifests")
        if not ((spec.get("resources") or {}).get("requests") or {}).get("storage"):
            self.problem(path, doc, "no spec.resources.requests.storage")

    def kind_ConfigMap(self, path, doc):
        data = doc.get("data")
        if not isinstance(data, dict) or not data:
            self.problem(path, doc, "no data")
            return
        if "job.json" in data:
            self.check_job(path, doc, data["job.json"])

    def check_job(self, path, doc, text):
        try:
            job = json.loads(text)
        except ValueError as e:
            self.problem(path, doc, "job.json is not JSON: %s" % e)
            return
        try:
            import jsonschema
        except ImportError:
            self.problem(path, doc, "python3-jsonschema is not installed, so job.json cannot "
                         "be checked (deploy/install-deps.sh)")
            return
        with open(os.path.join(self.source_root, "schemas", "job.schema.json"),
                  encoding="utf-8") as f:
            schema = json.load(f)
        for e in jsonschema.Draft202012Validator(schema).iter_errors(job):
            self.problem(path, doc, "job.json at /%s: %s"
                         % ("/".join(str(p) for p in e.absolute_path), e.message))

    def kind_Secret(self, path, doc):
        data = doc.get("data")
        if not isinstance(data, dict) or not data:
            self.problem(path, doc, "no data")
            return
        for key, value in data.items():
            try:
                base64.b64decode(value, validate=True)
            except (ValueError, TypeError):
                self.problem(path, doc, "data.%s is not base64" % key)

    def kind_Job(self, path, doc):
        spec = doc.get("spec") or {}
        template = spec.get("template") or {}
        pod = template.get("spec") or {}
        role = ((template.get("metadata") or {}).get("labels") or {}) \
            .get("app.kubernetes.io/component")
        if role not in ROLES:
            self.problem(path, doc, "the pod template's label app.kubernetes.io/component is "
                         "%r, expected one of %s" % (role, ", ".join(ROLES)))
            return
        if pod.get("restartPolicy") != "OnFailure":
            self.problem(path, doc, "restartPolicy is %r, expected OnFailure: a process that "
                         "fails is restarted, one that finished stays down"
                         % pod.get("restartPolicy"))
        if not isinstance(spec.get("backoffLimit"), int):
            self.problem(path, doc, "no spec.backoffLimit")
        if role != "chief":
            if spec.get("completionMode") != "Indexed":
                self.problem(path, doc, "not an Indexed Job: a pod's ordinal is its task index")
            for c in pod.get("containers", []):
                want = env_of(c).get("PS_NUM_PS" if role == "ps" else "PS_NUM_WORKERS")
                if str(spec.get("completions")) != str(want):
                    self.problem(path, doc, "completions %s, but its pods read %s of them"
                                 % (spec.get("completions"), want))
                if spec.get("parallelism") != spec.get("completions"):
                    self.problem(path, doc, "parallelism differs from completions: every "
                                 "task runs at once")
        service = self.defined["Service"].get(pod.get("subdomain"))
        if service is None:
            self.problem(path, doc, "its subdomain %r is no headless Service of the files"
                         % pod.get("subdomain"))
        else:
            labels = (template.get("metadata") or {}).get("labels") or {}
            for k, v in (service.get("spec") or {}).get("selector", {}).items():
                if labels.get(k) != v:
                    self.problem(path, doc, "Service %s does not select its pods (%s=%s)"
                                 % (pod.get("subdomain"), k, v))
        self.check_pod(path, doc, pod, role, require_readiness=True)

    def kind_TFJob(self, path, doc):
        specs = (doc.get("spec") or {}).get("tfReplicaSpecs") or {}
        for rtype, role in (("Chief", "chief"), ("PS", "ps"), ("Worker", "worker")):
            rs = specs.get(rtype)
            if rs is None:
                self.problem(path, doc, "no tfReplicaSpecs.%s" % rtype)
                continue
            if rs.get("restartPolicy") != "OnFailure":
                self.problem(path, doc, "%s's restartPolicy is %r, expected OnFailure"
                             % (rtype, rs.get("restartPolicy")))
            pod = (rs.get("template") or {}).get("spec") or {}
            names = [c.get("name") for c in pod.get("containers", [])]
            if "tensorflow" not in names:
                self.problem(path, doc, "%s has no container named tensorflow, into which the "
                             "operator writes TF_CONFIG" % rtype)
            for c in pod.get("containers", []):
                if "tfjob-port" not in [p.get("name") for p in c.get("ports", [])]:
                    self.problem(path, doc, "%s's container has no port named tfjob-port, the "
                                 "operator's port for TF_CONFIG" % rtype)
                if env_of(c).get("PS_ROLE") != role:
                    self.problem(path, doc, "%s's PS_ROLE is %r, expected %s"
                                 % (rtype, env_of(c).get("PS_ROLE"), role))
            self.check_pod(path, doc, pod, role, require_readiness=False)

    def check_pod(self, path, doc, pod, role, require_readiness):
        containers = pod.get("containers") or []
        if not containers:
            self.problem(path, doc, "no containers")
        volumes = {v.get("name"): v for v in pod.get("volumes", [])}
        for c in containers:
            where = "container %s" % c.get("name")
            if not c.get("image"):
                self.problem(path, doc, "%s has no image" % where)
            if not c.get("command"):
                self.problem(path, doc, "%s has no command" % where)
            res = c.get("resources") or {}
            for part in ("requests", "limits"):
                got = res.get(part) or {}
                if "cpu" not in got or "memory" not in got:
                    self.problem(path, doc, "%s: resources.%s needs cpu and memory"
                                 % (where, part))
            probes = []
            if role == "ps":
                probes = ["livenessProbe"] + (["readinessProbe"] if require_readiness else [])
            elif role == "worker" and require_readiness:
                probes = ["readinessProbe"]
            for probe in probes:
                command = ((c.get(probe) or {}).get("exec") or {}).get("command")
                if command != ["ps-k8s", "probe"]:
                    self.problem(path, doc, "%s: %s is %r, expected exec [ps-k8s, probe] (the "
                                 "protocol's ping)" % (where, probe, command))
            for m in c.get("volumeMounts", []):
                if m.get("name") not in volumes:
                    self.problem(path, doc, "%s mounts volume %r, which the pod does not define"
                                 % (where, m.get("name")))
        for v in volumes.values():
            for key, kind, field in (("configMap", "ConfigMap", "name"),
                                     ("secret", "Secret", "secretName"),
                                     ("persistentVolumeClaim", "PersistentVolumeClaim",
                                      "claimName")):
                if key in v and v[key].get(field) not in self.defined[kind]:
                    self.problem(path, doc, "volume %s names %s %r, which the files do not "
                                 "define" % (v.get("name"), kind, v[key].get(field)))
            if "secret" in v and v["secret"].get("optional") is not False:
                self.problem(path, doc, "secret volume %s without optional: false (a missing "
                             "key must stop the pod, not start it without one)" % v.get("name"))


def check(args):
    problems = Checker(load(args.files), args.source_root).run()
    for p in problems:
        print(p)
    if problems:
        print("%d problem(s) in %d file(s)" % (len(problems), len(args.files)))
        return 1
    print("checked %d document(s) in %d file(s): no problem"
          % (len(load(args.files)), len(args.files)))
    return 0


def podman(args):
    prefix = args.prefix
    said = []
    out = []

    def say(text):
        if text not in said:
            said.append(text)

    def rename(name):
        return "%s-%s" % (prefix, name)

    def pod_of(doc, role, index, pod_spec, labels):
        spec = copy.deepcopy(pod_spec)
        for key in ("hostname", "subdomain"):
            spec.pop(key, None)
        empty = [v["name"] for v in spec.get("volumes", []) if "emptyDir" in v]
        if empty:
            say("emptyDir volumes dropped (the image's own directories serve): podman 4.3.1 "
                "makes each a named volume shared by every pod")
            spec["volumes"] = [v for v in spec["volumes"] if v["name"] not in empty]
        for v in spec.get("volumes", []):
            if "configMap" in v:
                v["configMap"]["name"] = rename(v["configMap"]["name"])
            if "persistentVolumeClaim" in v:
                v["persistentVolumeClaim"]["claimName"] = \
                    rename(v["persistentVolumeClaim"]["claimName"])
            if "secret" in v:
                v["configMap"] = {"name": rename(v.pop("secret")["secretName"])}
                say("secret volume -> configMap volume of the same files (podman 4.3.1 "
                    "does not decode a secret volume's files)")
        for c in spec.get("containers", []):
            c["image"] = args.image
            c["volumeMounts"] = [m for m in c.get("volumeMounts", []) if m["name"] not in empty]
            for probe in ("livenessProbe", "readinessProbe"):
                command = ((c.get(probe) or {}).get("exec") or {}).get("command")
                if command:
                    c[probe]["exec"]["command"] = [" ".join(command)]
                    say("probe commands joined into one word: podman 4.3.1 runs an exec "
                        "probe as sh -c with its first word only")
            if c.pop("ports", None):
                say("containers' ports dropped: podman 4.3.1 publishes a containerPort on the "
                    "host, where every pod's 2222 would collide; pods reach each other on "
                    "podman's network without it")
            env = [e for e in c.get("env", [])
                   if e.get("name") not in ("PS_JOB_NAME", "PS_HOST_TEMPLATE")]
            env += [{"name": "PS_JOB_NAME", "value": prefix},
                    {"name": "PS_HOST_TEMPLATE", "value": "{job}-{role}-{index}"}]
            if role != "chief":
                env.append({"name": "JOB_COMPLETION_INDEX", "value": str(index)})
            c["env"] = env
            if role == "chief" and args.coordinator_args:
                c["args"] = list(c.get("args", [])) + shlex.split(args.coordinator_args)
        name = "%s-%s-%d" % (prefix, role, index)
        spec["hostAliases"] = aliases
        say("Job %s -> Pod %s (the same pod template)" % (doc["metadata"]["name"], name))
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": dict(labels)}, "spec": spec}

    # Every pod's name and address, in the order the pods are written.
    docs = load(args.files)
    names = []
    for _, doc in docs:
        if doc["kind"] == "Job":
            role = doc["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
            names += ["%s-%s-%d" % (prefix, role, i) for i in range(doc["spec"].get("completions", 1))]
    addresses = ["%s.%d" % (args.addresses, 10 + k) for k in range(len(names))]
    aliases = [{"ip": a, "hostnames": [n]} for n, a in zip(names, addresses)]
    with open(args.ip_file, "w", encoding="utf-8") as f:
        f.write("".join(a + "\n" for a in addresses))
    say("pod names resolved through /etc/hosts (hostAliases), at " + ", ".join(
        "%s %s" % (n, a) for n, a in zip(names, addresses)))

    for _, doc in docs:
        kind = doc["kind"]
        if kind == "Service":
            say("Service %s dropped: its DNS names JOB-I.%s become the pod names %s-ROLE-I"
                % (doc["metadata"]["name"], doc["metadata"]["name"], prefix))
        elif kind in ("ConfigMap", "PersistentVolumeClaim"):
            d = copy.deepcopy(doc)
            d["metadata"]["name"] = rename(doc["metadata"]["name"])
            out.append(d)
        elif kind == "Secret":
            data = {k: base64.b64decode(v).decode("utf-8") for k, v in doc["data"].items()}
            out.append({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": rename(doc["metadata"]["name"])}, "data": data})
            say("Secret %s -> ConfigMap %s with its files decoded"
                % (doc["metadata"]["name"], rename(doc["metadata"]["name"])))
        elif kind == "Job":
            template = doc["spec"]["template"]
            labels = template["metadata"]["labels"]
            role = labels["app.kubernetes.io/component"]
            for i in range(doc["spec"].get("completions", 1)):
                out.append(pod_of(doc, role, i, template["spec"], labels))
        else:
            print("kube_manifests: %s: kind %s has no podman form" %
                  (doc["metadata"].get("name"), kind), file=sys.stderr)
            return 2
    say("every ConfigMap, Secret and claim NAME -> %s-NAME; image -> %s" % (prefix, args.image))
    if args.coordinator_args:
        say("the coordinator's args + %s" % args.coordinator_args)
    for text in said:
        print("substituted: " + text, file=sys.stderr)
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--source-root",
                   default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    c.add_argument("files", nargs="+")
    p = sub.add_parser("podman")
    p.add_argument("--prefix", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--coordinator-args", default="")
    p.add_argument("--addresses", required=True, help="the first three numbers of a /24")
    p.add_argument("--ip-file", required=True)
    p.add_argument("files", nargs="+")
    args = parser.parse_args()
    return check(args) if args.cmd == "check" else podman(args)


if __name__ == "__main__":
    sys.exit(main())
