#!/usr/bin/env python3
"""Failure injection across hosts: a ps-cluster training run with every
process on its own host, and faults injected while it trains.

Each host is a network namespace with its own address on a bridge. The
bridge lives in a namespace of its own (the "switch"), so nothing is added
to the machine's own network, and every address is in 10.213.0.0/24 inside
those namespaces. Each process is started by this harness with its
TF_CONFIG naming the hosts' addresses; the harness is also the processes'
supervisor, and restarts what it killed.

Faults, each on a schedule (a fraction of the run's steps) or drawn at
random from a seed that is printed:

  kill      kill -9 of a worker, a server or the coordinator, then a
            restart (the coordinator with --resume)
  stop      SIGSTOP, then SIGCONT after a while: a hung process
  cut       the host's link down, then up again: a host cut off
  loss      packet loss on the host's link, both ways, with iptables'
            statistic match (the kernel has no netem, and no other way to
            delay packets without one, so delay is left out)
  diskfull  the checkpoint directory (a small tmpfs of its own) filled up
            while checkpoints are due, then freed
  corrupt   a byte of the newest checkpoint flipped, then a load forced
            (kill -9 of a server in async mode, of the coordinator in
            mirrored mode), which must fall back to the one before

A fault strikes when the coordinator's events show that it can: its step
reached, its target running, for corrupt the first checkpoint written
after that step (with one before it, and not the final one, of the job's
last step), and diskfull holds the disk full
until a checkpoint has failed for want of space. A fault that was not
injected (the job ended first, the machine lacks what it needs, or no
load met the corrupted checkpoint) fails the run in --short and
--scenario, and is counted as "not injected" in a soak's table and last
line.

After each run four invariants are checked (check_run.py): the job
completes; every batch is trained exactly once per epoch, judged from the
coordinator's metrics and the servers' ledgers (or the replicas' ledgers
in mirrored mode); no checkpoint that was loaded fails its checksum; the
final test accuracy is within 1 point of a fault-free run with the same
seed. A process that dies without being killed is a violation too.

The recovery time of a fault is measured from its end (the restart, the
SIGCONT, the link up, the rule removed, the space freed) to the first
progress record at full strength (every worker alive, and in mirrored mode
the ring whole) with the step past where it was; for diskfull, to the
next checkpoint written.

  netfault.py --short            the test suite's short version (groups
                                 net, loss, disk; --short loss runs one)
  netfault.py --runs 50 --seed S the soak: 50 runs of random faults
  netfault.py --scenario async:kill:worker,mirrored:cut:worker   chosen ones

Each invocation first trains a fault-free run of each mode it needs;
--baseline-cache FILE keeps their results for the next invocation with the
same programs and job (the test suite's groups share one such file).

Needs root (namespaces, mounts); without it, or without a kernel feature,
what cannot run prints "SKIP: <reason>" and the exit status is 77 (SKIP)
unless something failed.
"""

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_run  # noqa: E402

SUBNET = "10.213.0"
PORTS = {"chief": 2220, "ps": 2222, "worker": 2223}
SKIP = 77
CKPT_NAME = re.compile(r"ckpt-(\d+)")

# How long the harness waits for a run to finish, and for a process to
# start or stop, in seconds.
RUN_TIMEOUT = 240
STOP_TIMEOUT = 10


def log(msg):
    print("[%7.2f] %s" % (time.monotonic() - T0, msg), flush=True)


T0 = time.monotonic()


def sh(*argv, check=True):
    """Runs a command of the network setup; its failure is the harness's
    error, with the command and what it printed."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), r.stdout.strip()))
    return r


# ---------------------------------------------------------------------------
# Hosts


class Hosts:
    """Network namespaces on a bridge: one per host, named tag-name."""

    def __init__(self, tag, names):
        self.tag = tag
        self.switch = "%s-sw" % tag
        self.ns = {}
        self.addr = {}
        self.veth = {}
        # Namespaces of this tag left by a harness that was killed (its
        # pid was this one's, modulo 10000) would clash: remove them.
        for line in sh("ip", "netns", "list").stdout.splitlines():
            stale = line.split()[0] if line.split() else ""
            if stale.startswith(tag + "-"):
                sh("ip", "netns", "del", stale, check=False)
        sh("ip", "netns", "add", self.switch)
        try:
            sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            sh("ip", "-n", self.switch, "link", "set", "br0", "up")
            for i, name in enumerate(names):
                self._add(i, name)
        except Exception:
            self.close()
            raise

    def _add(self, i, name):
        ns = "%s-%s" % (self.tag, name)
        # Interface names have at most 15 bytes.
        inner, outer = "%sh%d" % (self.tag, i), "%sb%d" % (self.tag, i)
        sh("ip", "netns", "add", ns)
        self.ns[name] = ns
        sh("ip", "link", "add", inner, "type", "veth", "peer", "name", outer)
        sh("ip", "link", "set", inner, "netns", ns)
        sh("ip", "link", "set", outer, "netns", self.switch)
        sh("ip", "-n", self.switch, "link", "set", outer, "master", "br0")
        sh("ip", "-n", self.switch, "link", "set", outer, "up")
        addr = "%s.%d" % (SUBNET, 10 + i)
        sh("ip", "-n", ns, "addr", "add", addr + "/24", "dev", inner)
        sh("ip", "-n", ns, "link", "set", inner, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        self.addr[name] = addr
        self.veth[name] = outer

    def argv(self, name, argv):
        return ["ip", "netns", "exec", self.ns[name]] + argv

    def link(self, name, up):
        """The host's port on the switch, down or up: the host is cut off
        from every other host, and its own address stays."""
        sh("ip", "-n", self.switch, "link", "set", self.veth[name], "up" if up else "down")

    def loss(self, name, p):
        """Drops each packet in or out of the host with probability p;
        p = 0 removes the rules."""
        for chain, flag in (("INPUT", "-i"), ("OUTPUT", "-o")):
            sh("ip", "netns", "exec", self.ns[name], "iptables", "-F", chain)
            if p > 0:
                sh("ip", "netns", "exec", self.ns[name], "iptables", "-A", chain, "!", flag,
                   "lo", "-m", "statistic", "--mode", "random", "--probability", "%.4f" % p,
                   "-j", "DROP")

    def close(self):
        for ns in list(self.ns.values()) + [self.switch]:
            sh("ip", "netns", "del", ns, check=False)
        self.ns = {}


def probe():
    """Why this machine cannot run the harness at all (None: it can), and
    the features it lacks: {feature: reason}."""
    if os.geteuid() != 0:
        return "not root: network namespaces and mounts need root", {}
    if not shutil.which("ip"):
        return "no ip command (iproute2)", {}
    tag = "psp%d" % (os.getpid() % 10000)
    try:
        hosts = Hosts(tag, ["a"])
    except (RuntimeError, OSError) as e:
        return "cannot make network namespaces and veth pairs on a bridge: %s" % e, {}
    lacks = {}
    try:
        if not shutil.which("iptables"):
            lacks["loss"] = "no iptables command"
        else:
            try:
                hosts.loss("a", 0.5)
                hosts.loss("a", 0)
            except RuntimeError as e:
                lacks["loss"] = "iptables' statistic match does not work here: %s" % e
        d = tempfile.mkdtemp(prefix="psf-probe-")
        r = sh("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d, check=False)
        if r.returncode != 0:
            lacks["diskfull"] = "cannot mount a tmpfs: %s" % r.stdout.strip()
        else:
            sh("umount", d, check=False)
        os.rmdir(d)
    finally:
        hosts.close()
    return None, lacks


# ---------------------------------------------------------------------------
# Processes of a run


class Proc:
    """One process of the cluster on its host, started and restarted by
    the harness."""

    def __init__(self, run, role, index, argv, env):
        self.run, self.role, self.index = run, role, index
        self.argv, self.env = argv, env
        self.host = "coord" if role == "chief" else "%s%d" % (role, index)
        self.name = "coordinator" if role == "chief" else "%s:%d" % (role, index)
        self.popen = None
        self.starts = 0
        self.expected_exit = False     # killed by the harness
        self.stopped = False
        self.deaths = []               # (name, status) of unexpected exits

    def start(self, extra=()):
        logpath = os.path.join(self.run.dir, "%s-%d.log" % (self.host, self.starts))
        self.logfile = open(logpath, "w")
        self.popen = subprocess.Popen(self.run.hosts.argv(self.host, self.argv + list(extra)),
                                      env=self.env, stdout=self.logfile,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1
        self.started_at = time.monotonic()
        self.expected_exit = False
        self.stopped = False

    def alive(self):
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig):
        if self.alive():
            os.kill(self.popen.pid, sig)

    def kill(self):
        self.expected_exit = True
        if self.stopped:
            self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        self.popen.wait()
        self.logfile.close()

    def poll(self):
        """Notes an exit the harness did not cause; returns the status or
        None while running."""
        if self.popen is None:
            return None
        st = self.popen.poll()
        if st is not None and not self.expected_exit and st != 0:
            self.deaths.append(st)
            self.expected_exit = True
        return st

    def terminate(self, timeout=STOP_TIMEOUT):
        """SIGTERM, then SIGKILL after timeout; returns the exit status."""
        if not self.alive():
            return self.popen.poll() if self.popen else None
        if self.stopped:
            self.signal(signal.SIGCONT)
        self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.expected_exit = True
            self.popen.kill()
            return self.popen.wait()


class Run:
    """One training run: the hosts, the processes, the coordinator's
    metrics files (one per incarnation), and the faults' records."""

    def __init__(self, opts, bins, mode, seed, name, workdir, tag):
        self.opts, self.mode, self.name = opts, mode, name
        self.dir = workdir
        self.nps = 0 if mode == "mirrored" else opts.servers
        self.nworkers = opts.workers
        names = ["coord"] + ["ps%d" % i for i in range(self.nps)] + \
                ["worker%d" % i for i in range(self.nworkers)]
        self.hosts = Hosts(tag, names)
        self.ckpt = os.path.join(workdir, "checkpoints")
        os.makedirs(self.ckpt)
        self.tmpfs = False
        try:
            r = sh("mount", "-t", "tmpfs", "-o", "size=%dm" % opts.ckpt_mb, "tmpfs", self.ckpt,
                   check=False)
            self.tmpfs = r.returncode == 0
            cluster = {"chief": ["%s:%d" % (self.hosts.addr["coord"], PORTS["chief"])],
                       "ps": ["%s:%d" % (self.hosts.addr["ps%d" % i], PORTS["ps"])
                              for i in range(self.nps)],
                       "worker": ["%s:%d" % (self.hosts.addr["worker%d" % i], PORTS["worker"])
                                  for i in range(self.nworkers)]}
            if not cluster["ps"]:
                del cluster["ps"]
            per_epoch = -(-opts.limit // 64)
            self.total = per_epoch * opts.epochs
            self.job = {
                "model": "cnn", "mode": mode, "seed": seed, "batch_size": 64,
                "epochs": opts.epochs, "train_limit": opts.limit, "test_limit": opts.test_limit,
                "optimizer": {"kind": "adam", "lr": 0.001},
                # The learning rate anneals, so that the final accuracy of
                # runs whose updates interleave differently agrees to
                # within a tenth of a point (measured), and a point is a
                # fault's effect, not noise.
                "lr_schedule": {"kind": "cosine", "alpha": 0.05, "decay_steps": 0,
                                "warmup_steps": 0},
                # Nothing is pruned: every checkpoint a coordinator loads
                # is still there for check_run.py to verify after the run
                # (at most one checkpoint a step, the initial one besides).
                "checkpoint": {"dir": self.ckpt, "every_steps": opts.ckpt_steps,
                               "every_seconds": 0, "keep": self.total + 2},
                "eval": {"every_epochs": opts.epochs, "every_steps": 0},
                "heartbeat": {"interval_ms": 100, "timeout_ms": 1000},
                "register_timeout_ms": 30000, "worker_threads": 1, "device": "cpu",
                "log_seconds": 0.2,
            }
            self.jobfile = os.path.join(workdir, "job.json")
            with open(self.jobfile, "w") as f:
                json.dump(self.job, f, indent=1)
            self.procs = {}
            base = dict(os.environ)
            # The run is secured like any other: one set of keys per run,
            # named to every process by PS_KEYS (README.md, Security).
            keys = os.path.join(workdir, "keys")
            sh(bins["coordinator"], "keygen", "--out", keys, "--ps", str(self.nps),
               "--workers", str(self.nworkers))
            base["PS_KEYS"] = keys
            for role, n in (("ps", self.nps), ("worker", self.nworkers), ("chief", 1)):
                for i in range(n):
                    env = dict(base)
                    env["TF_CONFIG"] = json.dumps({"cluster": cluster,
                                                   "task": {"type": role, "index": i}})
                    if role == "ps":
                        # Snapshots go where the coordinator's manifests do.
                        argv = [bins["ps"], "--threads", "1", "--checkpoint-root", self.ckpt]
                    elif role == "worker":
                        argv = [bins["worker"]]
                    else:
                        argv = [bins["coordinator"], "--job", self.jobfile]
                    self.procs[(role, i)] = Proc(self, role, i, argv, env)
        except Exception:
            self.close()
            raise
        self.metrics = []              # (path, wall time of its start)
        self.events = []               # (absolute monotonic time, event) so far
        self._read = (None, 0)
        self.faults = []
        self.coord_status = None

    # -- the coordinator's metrics, read as they are written

    def coordinator(self):
        return self.procs[("chief", 0)]

    def start_coordinator(self, resume):
        path = os.path.join(self.dir, "metrics-%d.jsonl" % len(self.metrics))
        extra = ["--metrics", path] + (["--resume"] if resume else [])
        self.coordinator().start(extra)
        self.metrics.append((path, time.monotonic()))
        self._read = (path, 0)

    def poll_events(self):
        path, offset = self._read
        if not path or not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            f.seek(offset)
            data = f.read()
        end = data.rfind("\n")
        if end < 0:
            return
        t0 = self.metrics[-1][1]
        for line in data[:end].split("\n"):
            if line.strip():
                ev = json.loads(line)
                self.events.append((t0 + ev.get("time_s", 0), ev))
        self._read = (path, offset + len(data[:end + 1].encode()))

    def step(self):
        """Steps done, as the newest record says."""
        self.poll_events()
        for _, ev in reversed(self.events):
            if ev["event"] in ("progress", "recovered", "checkpoint", "done"):
                return ev.get("step", ev.get("steps", 0))
        return 0

    def done(self):
        return any(ev["event"] == "done" for _, ev in self.events)

    def supervise(self):
        for p in self.procs.values():
            p.poll()

    # -- the run

    def start(self):
        for (role, i), p in self.procs.items():
            if role != "chief":
                p.start()
        self.start_coordinator(resume=False)

    def wait(self, cond, deadline):
        """Waits until cond() holds while the job runs, and returns what it
        gave then. False when the job ended first (its coordinator exited,
        finished or failed, or wrote its done record) or the deadline
        passed: a fault strikes a running job, not one that is over."""
        while time.monotonic() < deadline:
            self.supervise()
            self.poll_events()
            if not self.coordinator().alive() or self.done():
                return False
            held = cond()
            if held:
                return held
            time.sleep(0.05)
        return False

    def wait_step(self, step, deadline):
        return self.wait(lambda: self.step() >= step, deadline)

    def seen(self, event, mark):
        """Whether an event of this kind was read after the first mark
        events (a mark is len(self.events) taken earlier)."""
        return any(e["event"] == event for _, e in self.events[mark:])

    def committed(self):
        """The committed checkpoints in the checkpoint directory, oldest
        first: not the .tmp ones being written, nor .old ones being
        replaced."""
        return sorted(n for n in os.listdir(self.ckpt) if CKPT_NAME.fullmatch(n))

    def finish(self, deadline):
        """Waits for the coordinator to exit; then for the others, which
        it tells to stop, and stops what is left. Returns the
        coordinator's exit status (None: it did not finish in time)."""
        c = self.coordinator()
        while time.monotonic() < deadline and c.alive():
            self.supervise()
            time.sleep(0.1)
        self.poll_events()
        if c.alive():
            c.expected_exit = True
            c.terminate(2)
            return None
        status = c.popen.poll()
        c.expected_exit = True
        # Workers are told to stop; servers are stopped here, as a
        # container's orchestrator would.
        end = time.monotonic() + STOP_TIMEOUT
        for (role, i), p in self.procs.items():
            if role == "worker":
                while p.alive() and time.monotonic() < end:
                    time.sleep(0.05)
                p.poll()
        for p in self.procs.values():
            if p.alive():
                st = p.terminate()
                if st not in (0, None):
                    p.deaths.append(st)
        return status

    def close(self):
        for p in getattr(self, "procs", {}).values():
            if p.alive():
                p.expected_exit = True
                p.popen.kill()
                p.popen.wait()
        if self.tmpfs:
            sh("umount", "-l", self.ckpt, check=False)
            self.tmpfs = False
        self.hosts.close()


# ---------------------------------------------------------------------------
# Faults


class Fault:
    """One fault: kind, target (role, index), when (a fraction of the
    steps), how long, and for loss the probability. After the run it holds
    what happened: when it was injected and healed, or why it was missed
    (not injected, or injected where it could not test anything)."""

    def __init__(self, kind, role, index, at, duration=0.0, p=0.0):
        self.kind, self.role, self.index = kind, role, index
        self.at, self.duration, self.p = at, duration, p
        self.injected = self.healed = None
        self.mark = 0                  # len(run.events) when it was injected
        self.step = 0
        self.missed = None
        self.evidence = None
        self.recovery = None
        self.corrupted = None

    def target(self):
        return "coordinator" if self.role == "chief" else "%s:%d" % (self.role, self.index)

    def label(self):
        if self.kind in ("diskfull",):
            return self.kind
        if self.kind == "corrupt":
            return "corrupt checkpoint"
        role = {"chief": "coordinator", "ps": "server"}.get(self.role, self.role)
        return "%s %s" % (self.kind, role)

    def describe(self):
        extra = ""
        if self.kind in ("stop", "cut", "loss"):
            extra = " for %.1f s" % self.duration
        if self.kind == "diskfull":
            extra = " for %.1f s and until a checkpoint fails" % self.duration
        if self.kind == "loss":
            extra += " at p=%.2f" % self.p
        if self.kind == "kill" and self.duration:
            extra = ", restart after %.1f s" % self.duration
        if self.kind == "corrupt":
            extra = " (the first checkpoint written after it)"
        return "%s of %s at %.0f%%%s" % (self.kind, self.target(), self.at * 100, extra)


# How long a diskfull fault holds the disk full at most, waiting for a
# checkpoint to fail. A checkpoint is due every --ckpt-steps steps and at
# the end, so one fails well within this; the coordinator gives up on the
# final checkpoint only after about a minute of failures.
DISKFULL_HOLD_MAX = 30


def _ckpt_step(path):
    m = CKPT_NAME.fullmatch(os.path.basename(os.path.normpath(path)))
    return int(m.group(1)) if m else None


def _fresh_checkpoint(run, mark):
    """The newest committed checkpoint once one was committed after the
    first mark events and an older one is there to fall back on; else
    None. The final checkpoint, of the job's last step, is never one, and
    none is once it is written: the job ends soon after it, so whether a
    load met it would depend on which of the harness and the coordinator
    is quicker."""
    names = run.committed()
    if not run.seen("checkpoint", mark) or len(names) < 2 or _ckpt_step(names[-1]) >= run.total:
        return None
    return os.path.join(run.ckpt, names[-1])


def _flip(ckpt):
    """Flips one byte in the middle of a snapshot file of checkpoint ckpt."""
    files = sorted(n for n in os.listdir(ckpt) if n != "MANIFEST.json")
    if not files:
        raise RuntimeError("checkpoint %s holds no snapshot file to corrupt" % ckpt)
    path = os.path.join(ckpt, files[len(files) // 2])
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(size // 2)
        b = f.read(1)
        f.seek(size // 2)
        f.write(bytes([b[0] ^ 0x40]))


def _fill(path):
    """Allocates path a mebibyte at a time until no space is left: the
    next checkpoint fails part-way (a snapshot file does not fit), however
    much a checkpoint being written takes meanwhile."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        offset = 0
        while True:
            try:
                os.posix_fallocate(fd, offset, 1 << 20)
            except OSError:
                break
            offset += 1 << 20
    finally:
        os.close(fd)


def inject(run, fault, deadline):
    """Waits for the fault's moment, does the fault and undoes it, and
    records when. Each fault waits for what it needs, observed in the
    coordinator's events rather than guessed from the clock: its step, a
    running target, for corrupt a checkpoint just written with one before
    it, for diskfull a checkpoint that fails while the disk is full. A
    fault whose moment never comes (the job ended first, the machine lacks
    what it needs) is recorded in fault.missed with the reason."""
    p = run.procs[(fault.role, fault.index)]
    at = int(fault.at * run.total)
    if fault.kind == "diskfull" and not run.tmpfs:
        fault.missed = "the checkpoint directory is not a tmpfs of its own"
        return
    if not run.wait_step(at, deadline):
        fault.missed = "the job ended before step %d" % at
        return
    if fault.kind == "corrupt":
        # A load must meet the corrupted checkpoint and find the one before
        # it: the newest is corrupted right after it is written (no newer
        # one is near), and the load is forced at once.
        mark = len(run.events)
        ckpt = run.wait(lambda: _fresh_checkpoint(run, mark), deadline)
        if not ckpt:
            fault.missed = ("no checkpoint was written after step %d, with one before it, "
                            "before the job's last step" % at)
            return
        fault.corrupted = ckpt
    if fault.kind in ("kill", "stop", "corrupt") and not p.alive():
        fault.missed = "%s was not running" % fault.target()
        return
    fault.step = run.step()
    fault.mark = len(run.events)
    fault.injected = time.monotonic()
    if fault.kind == "kill":
        p.kill()
        time.sleep(fault.duration)
        if fault.role == "chief":
            run.start_coordinator(resume=True)
        else:
            p.start()
    elif fault.kind == "stop":
        p.signal(signal.SIGSTOP)
        p.stopped = True
        time.sleep(fault.duration)
        p.signal(signal.SIGCONT)
        p.stopped = False
    elif fault.kind == "cut":
        run.hosts.link(p.host, False)
        time.sleep(fault.duration)
        run.hosts.link(p.host, True)
    elif fault.kind == "loss":
        run.hosts.loss(p.host, fault.p)
        time.sleep(fault.duration)
        run.hosts.loss(p.host, 0)
    elif fault.kind == "diskfull":
        # Full for the fault's duration and until a checkpoint has failed
        # for want of space: a checkpoint comes due every --ckpt-steps
        # steps, and the job cannot finish before its final one is written.
        filler = os.path.join(run.ckpt, "filler")
        _fill(filler)
        try:
            end = time.monotonic() + fault.duration
            if not run.wait(lambda: run.seen("checkpoint_failed", fault.mark)
                            and time.monotonic() >= end,
                            min(deadline, time.monotonic() + DISKFULL_HOLD_MAX)):
                run.poll_events()
                if not run.seen("checkpoint_failed", fault.mark):
                    fault.missed = ("no checkpoint failed in %d s with the disk full"
                                    % (time.monotonic() - fault.injected))
        finally:
            os.unlink(filler)
    elif fault.kind == "corrupt":
        _flip(fault.corrupted)
        # Force a load: a server's restore in async mode, a resume in
        # mirrored mode.
        p.kill()
        if fault.role == "chief":
            run.start_coordinator(resume=True)
        else:
            p.start()
    fault.healed = time.monotonic()


def assess(run, fault):
    """The fault's evidence (what the coordinator saw of it) and its
    recovery time, from the events. A corruption that no load met is
    recorded as missed: it tested nothing."""
    evs = run.events
    after = evs[fault.mark:]

    def saw(event, **want):
        return any(e["event"] == event and all(e.get(k) == v for k, v in want.items())
                   for _, e in after)

    if fault.kind == "diskfull":
        fault.evidence = "checkpoint failed" if saw("checkpoint_failed") else "no checkpoint due"
    elif fault.kind == "corrupt":
        loaded = [e for _, e in after if e["event"] == "recovered"]
        step = _ckpt_step(loaded[0].get("checkpoint", "")) if loaded else None
        if not loaded:
            fault.missed = "nothing was loaded after %s was corrupted" % fault.corrupted
        elif step == _ckpt_step(fault.corrupted):
            fault.evidence = "LOADED THE CORRUPTED ONE"
        elif step is not None and step < _ckpt_step(fault.corrupted):
            fault.evidence = "fell back to the one before"
        else:
            fault.missed = "%s was loaded, not the corrupted %s or one before it" % (
                loaded[0].get("checkpoint"), fault.corrupted)
    elif fault.kind == "kill" and fault.role == "chief":
        fault.evidence = "resumed" if saw("recovered", reason="resuming") else "no resume"
    else:
        # What the coordinator made of it while it lasted (and a moment
        # after, the heartbeat timeout's worth).
        window = [e for t, e in after if t <= fault.healed + 1.5]
        if fault.role == "worker":
            hit = any(e["event"] == "worker_failed" and e.get("task") == fault.index
                      for e in window)
            fault.evidence = "declared failed" if hit else "ridden out"
        elif fault.role == "ps":
            hit = any(e["event"] == "server_failed" and e.get("task") == fault.index
                      for e in window)
            fault.evidence = "restored from a checkpoint" if hit else "ridden out"
        else:
            n = sum(1 for e in window if e["event"] in ("worker_failed", "server_failed"))
            fault.evidence = "%d declared failed" % n if n else "ridden out"

    # Recovery: from the heal to full strength again.
    if fault.kind == "diskfull":
        for t, e in evs:
            if t >= fault.healed and e["event"] == "checkpoint":
                fault.recovery = t - fault.healed
                break
        return
    ring_whole = run.mode != "mirrored"
    for t, e in evs:
        if e["event"] == "ring" and run.mode == "mirrored":
            ring_whole = len(e.get("workers", [])) == run.nworkers
        if t < fault.healed:
            continue
        if e["event"] == "done":
            fault.recovery = t - fault.healed
            break
        if e["event"] == "progress" and e.get("workers_alive") == run.nworkers \
                and ring_whole and e.get("step", 0) > fault.step:
            fault.recovery = t - fault.healed
            break


# ---------------------------------------------------------------------------
# Running runs


def run_once(opts, bins, mode, faults, name, tag, baseline, required):
    """One run with its faults; returns a result dict. When the faults
    are required (the short version, chosen scenarios), a fault that was
    not injected is a violation: the run did not test what it claims."""
    workdir = tempfile.mkdtemp(prefix="psf-%s-" % name.replace(" ", "_").replace(":", "-"),
                               dir=opts.workdir)
    res = {"name": name, "mode": mode, "faults": faults, "violations": [], "dir": workdir}
    run = Run(opts, bins, mode, opts.job_seed, name, workdir, tag)
    t_start = time.monotonic()
    try:
        run.start()
        deadline = time.monotonic() + RUN_TIMEOUT
        for f in sorted(faults, key=lambda f: f.at):
            inject(run, f, deadline)
            if f.missed:
                log("  %s: %s NOT INJECTED: %s" % (name, f.describe(), f.missed))
            else:
                log("  %s: %s (step %d)" % (name, f.describe(), f.step))
        status = run.finish(deadline)
        res["wall"] = time.monotonic() - t_start
        res["completed"] = status == 0 and run.done()
        if status is None:
            res["violations"].append("did not complete in %d s" % RUN_TIMEOUT)
        elif status != 0:
            res["violations"].append("the coordinator exited with status %d" % status)
        paths = [p for p, _ in run.metrics if os.path.exists(p)]
        if res["completed"]:
            res["violations"] += check_run.check_run(
                paths, total=run.total, nservers=run.nps or None, mode=mode)
            done = [e for _, e in run.events if e["event"] == "done"][-1]
            res["accuracy"] = done.get("test_accuracy")
            if baseline is not None and res["accuracy"] is not None \
                    and abs(res["accuracy"] - baseline) > 0.01:
                res["violations"].append("test accuracy %.4f, the fault-free run's %.4f: "
                                         "more than 1 point apart" % (res["accuracy"],
                                                                      baseline))
        for p in run.procs.values():
            for st in p.deaths:
                res["violations"].append("%s died on its own (status %s)" % (p.name, st))
        for f in faults:
            if f.injected is not None:
                assess(run, f)
                if f.evidence == "LOADED THE CORRUPTED ONE":
                    res["violations"].append("a corrupted checkpoint was loaded")
            if f.missed and required:
                res["violations"].append("%s was not injected: %s" % (f.describe(), f.missed))
    except Exception as e:  # the harness's own failure is the run's
        res["violations"].append("harness: %s: %s" % (type(e).__name__, e))
        res.setdefault("completed", False)
        res.setdefault("wall", time.monotonic() - t_start)
    finally:
        run.close()
    if not res["violations"] and not opts.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return res


KINDS = ["kill", "stop", "cut", "loss", "diskfull", "corrupt"]


def random_faults(rng, mode, lacks, nps, nworkers):
    kinds = [k for k in KINDS if k not in lacks]
    faults = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(kinds)
        roles = ["worker", "chief"] + (["ps"] if nps else [])
        role = rng.choice(roles)
        index = rng.randrange(nps) if role == "ps" else \
            rng.randrange(nworkers) if role == "worker" else 0
        at = rng.uniform(0.1, 0.8)
        if kind == "kill":
            faults.append(Fault(kind, role, index, at, duration=rng.choice([0, 0.5, 2.0])))
        elif kind == "stop":
            faults.append(Fault(kind, role, index, at, duration=rng.uniform(0.3, 3.0)))
        elif kind == "cut":
            faults.append(Fault(kind, role, index, at, duration=rng.uniform(0.3, 4.0)))
        elif kind == "loss":
            faults.append(Fault(kind, role, index, at, duration=rng.uniform(1.0, 4.0),
                                p=rng.uniform(0.02, 0.3)))
        elif kind == "diskfull":
            faults.append(Fault(kind, "chief", 0, at, duration=rng.uniform(1.0, 4.0)))
        else:
            role = "ps" if mode == "async" else "chief"
            index = rng.randrange(nps) if role == "ps" else 0
            faults.append(Fault(kind, role, index, at))
    faults.sort(key=lambda f: f.at)
    return faults


def parse_scenario(text, opts):
    """mode:FAULT[+FAULT...], FAULT = kind:role[:index[:duration[:p]]][@at]
    -> (mode, [Fault])"""
    mode, _, rest = text.partition(":")
    if mode not in ("async", "mirrored") or not rest:
        raise SystemExit("scenario %r: expected async|mirrored:kind:role[:index...]" % text)
    faults = []
    for part in rest.split("+"):
        spec, _, at = part.partition("@")
        fields = spec.split(":")
        if len(fields) < 2 or fields[0] not in KINDS:
            raise SystemExit("scenario %r: %r is not kind:role (kinds: %s)"
                             % (text, part, ", ".join(KINDS)))
        kind = fields[0]
        role = {"coordinator": "chief", "server": "ps"}.get(fields[1], fields[1])
        if role not in ("chief", "ps", "worker"):
            raise SystemExit("scenario %r: role %r is not worker, server or coordinator"
                             % (text, fields[1]))
        try:
            index = int(fields[2]) if len(fields) > 2 else 0
            duration = float(fields[3]) if len(fields) > 3 else \
                {"stop": 2.0, "cut": 2.0, "loss": 3.0, "diskfull": 2.0}.get(kind, 0.5)
            p = float(fields[4]) if len(fields) > 4 else 0.2
            when = float(at) if at else opts.at
        except ValueError:
            raise SystemExit("scenario %r: bad number in %r" % (text, part))
        faults.append(Fault(kind, role, index, when, duration, p))
    return mode, faults


# The short version that the test suite runs, on a small slice of data, in
# groups by what the machine needs to inject them, so that the suite counts
# a group this machine cannot inject as skipped and the others as passed.
# Every fault must be injected, or the group fails. Each group runs a
# fault-free run of each of its modes first.
SHORT = {
    # Network namespaces alone: kill, stop, cut, corrupt, in both modes.
    "net": [
        ("async", [Fault("kill", "worker", 1, 0.2, 0.5), Fault("stop", "ps", 0, 0.4, 3.0),
                   Fault("kill", "ps", 0, 0.75, 0.5)]),
        ("async", [Fault("cut", "worker", 0, 0.15, 2.0), Fault("kill", "chief", 0, 0.4, 0.5),
                   Fault("corrupt", "ps", 1, 0.65)]),
        ("mirrored", [Fault("kill", "worker", 0, 0.15, 0.5), Fault("cut", "worker", 1, 0.35, 2.0),
                      Fault("stop", "chief", 0, 0.55, 2.0), Fault("corrupt", "chief", 0, 0.75)]),
    ],
    # iptables' statistic match.
    "loss": [
        ("async", [Fault("loss", "ps", 1, 0.3, 3.0, 0.2),
                   Fault("loss", "worker", 0, 0.6, 3.0, 0.2)]),
        ("mirrored", [Fault("loss", "worker", 1, 0.3, 3.0, 0.2)]),
    ],
    # A tmpfs for the checkpoints. The second fault fills the disk near the
    # end: the checkpoint that fails may be the final one, which is retried
    # until there is room.
    "disk": [
        ("async", [Fault("diskfull", "chief", 0, 0.3, 2.0),
                   Fault("diskfull", "chief", 0, 0.85, 3.0)]),
    ],
}


class BaselineCache:
    """The accuracy of fault-free runs that passed, kept in a JSON file
    between invocations (--baseline-cache), so that the test suite's
    groups, which run the same fault-free runs, train each mode's once per
    build. An entry's key is a digest of everything a fault-free run's
    result depends on: the three programs' and the harness's files, the
    mode and the options that make the job; anything rebuilt or changed
    makes a new key. Without a file nothing is kept."""

    def __init__(self, path, bins, opts):
        self.path = path
        self.entries = {}
        if not path:
            return
        h = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(__file__))
        for f in [bins["coordinator"], bins["ps"], bins["worker"],
                  os.path.join(here, "netfault.py"), os.path.join(here, "check_run.py")]:
            with open(f, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
        h.update(json.dumps([opts.job_seed, opts.servers, opts.workers, opts.limit,
                             opts.test_limit, opts.epochs, opts.ckpt_steps,
                             opts.ckpt_mb]).encode())
        self.digest = h.hexdigest()
        try:
            with open(path, encoding="utf-8") as f:
                self.entries = json.load(f)
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as e:
            # A damaged cache costs a fault-free run, nothing else.
            log("baseline cache %s unreadable (%s): not used" % (path, e))
        if not isinstance(self.entries, dict):
            self.entries = {}

    def get(self, mode):
        if not self.path:
            return None
        acc = self.entries.get("%s %s" % (mode, self.digest))
        return acc if isinstance(acc, float) else None

    def put(self, mode, accuracy):
        if not self.path or not isinstance(accuracy, float):
            return
        self.entries["%s %s" % (mode, self.digest)] = accuracy
        # Written whole and renamed, so a reader never sees half a file.
        tmp = "%s.%d.tmp" % (self.path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.entries, f, indent=1)
        os.replace(tmp, self.path)


def table(results, baselines):
    rows = {}
    for r in results:
        for f in r["faults"]:
            key = (r["mode"], f.label())
            row = rows.setdefault(key, {"runs": 0, "completed": 0, "violations": 0,
                                        "recovery": [], "missed": 0, "evidence": {}})
            row["runs"] += 1
            row["completed"] += 1 if r["completed"] else 0
            row["violations"] += 1 if r["violations"] else 0
            if f.missed:
                row["missed"] += 1
            if f.recovery is not None:
                row["recovery"].append(f.recovery)
            if f.evidence:
                row["evidence"][f.evidence] = row["evidence"].get(f.evidence, 0) + 1
    lines = []
    lines.append("| mode | scenario | runs | completed | runs with invariant violations | "
                 "recovery s (median / max) | what the cluster saw |")
    lines.append("|---|---|---|---|---|---|---|")
    for (mode, label), row in sorted(rows.items()):
        rec = row["recovery"]
        rec_text = "%.2f / %.2f" % (statistics.median(rec), max(rec)) if rec else "-"
        seen = ", ".join("%s %d" % (k, v) for k, v in sorted(row["evidence"].items()))
        if row["missed"]:
            seen += (", " if seen else "") + "not injected %d" % row["missed"]
        lines.append("| %s | %s | %d | %d | %d | %s | %s |" % (
            mode, label, row["runs"], row["completed"], row["violations"], rec_text, seen))
    for mode, acc in sorted(baselines.items()):
        lines.append("fault-free %s run: test accuracy %.4f" % (mode, acc))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description="failure injection across network namespaces",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__)
    ap.add_argument("--short", nargs="?", const=",".join(SHORT), metavar="GROUPS",
                    help="the test suite's short version: every group, or those named "
                    "(%s, joined by commas)" % ", ".join(SHORT))
    ap.add_argument("--runs", type=int, default=0, help="random runs (a soak)")
    ap.add_argument("--seed", type=int, help="the random faults' seed (default: the clock)")
    ap.add_argument("--scenario", action="append", default=[],
                    help="mode:kind:role[:index[:duration[:p]]][@at], several joined by +, "
                    "e.g. async:kill:ps:1 or mirrored:cut:worker:1:3@0.3+kill:coordinator@0.6")
    ap.add_argument("--at", type=float, default=0.4, help="when a --scenario fault strikes")
    ap.add_argument("--modes", default="async,mirrored", help="modes of the random runs")
    ap.add_argument("--job-seed", type=int, default=1, help="the training's seed")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=19200, help="training examples")
    ap.add_argument("--test-limit", type=int, default=5000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--ckpt-steps", type=int, default=60)
    ap.add_argument("--ckpt-mb", type=int, default=128, help="the checkpoint tmpfs's size")
    ap.add_argument("--build", default=None, help="the build directory (default: the "
                    "PS_COORDINATOR... variables, else ./build)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep every run's directory")
    ap.add_argument("--baseline-cache", metavar="FILE", default=None,
                    help="reuse the accuracy of a fault-free run that passed, kept in FILE, "
                    "for the same programs and job (the test suite's groups share one)")
    opts = ap.parse_args()

    build = opts.build or "build"
    bins = {"coordinator": os.environ.get("PS_COORDINATOR") if not opts.build else None,
            "ps": os.environ.get("PS_SERVER") if not opts.build else None,
            "worker": os.environ.get("PS_WORKER") if not opts.build else None}
    bins["coordinator"] = bins["coordinator"] or os.path.join(build, "coordinator/coordinator")
    bins["ps"] = bins["ps"] or os.path.join(build, "ps/ps-server")
    bins["worker"] = bins["worker"] or os.path.join(build, "worker/ps-worker")
    for k, v in bins.items():
        if not os.access(v, os.X_OK):
            print("netfault: %s is not an executable (build first, or --build DIR)" % v)
            return 2
        bins[k] = os.path.abspath(v)

    why, lacks = probe()
    if why:
        print("SKIP: netfault: %s" % why)
        return SKIP
    seed = opts.seed if opts.seed is not None else int(time.time()) % 100000
    rng = random.Random(seed)
    # The plan: (mode, faults, whether each fault must be injected). What
    # this machine cannot inject is left out with a SKIP line, and the exit
    # status is then SKIP unless something failed: never a silent pass.
    plan = []
    skips = []
    for group in (opts.short.split(",") if opts.short else []):
        if group not in SHORT:
            ap.error("--short %s: no group %r (groups: %s)" % (opts.short, group,
                                                                ", ".join(SHORT)))
        kinds = sorted({f.kind for _, fs in SHORT[group] for f in fs} & set(lacks))
        if kinds:
            skips.append("short group %s: %s" % (group, "; ".join(
                "%s faults: %s" % (k, lacks[k]) for k in kinds)))
            continue
        plan += [(m, fs, True) for m, fs in SHORT[group]]
    for s in opts.scenario:
        mode, faults = parse_scenario(s, opts)
        kinds = sorted({f.kind for f in faults} & set(lacks))
        if kinds:
            skips.append("scenario %s: %s" % (s, "; ".join(
                "%s faults: %s" % (k, lacks[k]) for k in kinds)))
            continue
        plan.append((mode, faults, True))
    if opts.runs:
        skips += ["random runs without %s faults: %s" % (k, why)
                  for k, why in sorted(lacks.items())]
    modes = opts.modes.split(",")
    for k in range(opts.runs):
        mode = modes[k % len(modes)]
        plan.append((mode, random_faults(rng, mode, lacks, opts.servers if mode == "async"
                                         else 0, opts.workers), False))
    for why in skips:
        print("SKIP: %s" % why)
    if not plan and skips:
        return SKIP
    if not plan:
        ap.error("nothing to run: --short, --runs N or --scenario")

    print("netfault: seed %d (rerun with --seed %d); %d runs; data %d examples x %d epochs"
          % (seed, seed, len(plan), opts.limit, opts.epochs), flush=True)
    tag = "psf%d" % (os.getpid() % 10000)
    opts.workdir = opts.workdir or tempfile.mkdtemp(prefix="netfault-")
    os.makedirs(opts.workdir, exist_ok=True)

    # Fault-free runs of each mode, the accuracy the others are held to;
    # one that passed is reused from the cache for the same programs and
    # job.
    baselines = {}
    results = []
    cache = BaselineCache(opts.baseline_cache, bins, opts)
    for mode in sorted({m for m, _, _ in plan}):
        cached = cache.get(mode)
        if cached is not None:
            log("%s fault-free: accuracy %.4f, from a run of the same programs and job "
                "in %s" % (mode, cached, opts.baseline_cache))
            baselines[mode] = cached
            continue
        r = run_once(opts, bins, mode, [], "%s fault-free" % mode, tag, None, True)
        log("%s fault-free: %s in %.1f s, accuracy %s" % (
            mode, "completed" if r["completed"] else "FAILED", r["wall"], r.get("accuracy")))
        for v in r["violations"]:
            log("  violation: %s" % v)
        if not r["completed"] or r["violations"]:
            print(table(results, baselines))
            print("netfault: the fault-free %s run failed; see %s" % (mode, r["dir"]))
            return 1
        baselines[mode] = r["accuracy"]
        cache.put(mode, r["accuracy"])

    for k, (mode, faults, required) in enumerate(plan):
        name = "run %d %s" % (k + 1, mode)
        log("%s: %s" % (name, "; ".join(f.describe() for f in faults) or "no fault"))
        r = run_once(opts, bins, mode, faults, name, tag, baselines[mode], required)
        results.append(r)
        log("%s: %s in %.1f s, accuracy %s; %s" % (
            name, "completed" if r["completed"] else "NOT COMPLETED", r["wall"],
            "%.4f" % r["accuracy"] if r.get("accuracy") is not None else "-",
            "; ".join("%s: %s, recovery %s" % (f.label(), f.evidence or
                                               "not injected (%s)" % f.missed,
                                               "%.2f s" % f.recovery if f.recovery is not None
                                               else "-") for f in faults)))
        for v in r["violations"]:
            log("  violation: %s (kept %s)" % (v, r["dir"]))

    print(table(results, baselines))
    for k, r in enumerate(results):
        for v in r["violations"]:
            print("violation in %s: %s (kept %s)" % (r["name"], v, r["dir"]))
    bad = sum(1 for r in results if r["violations"])
    faults = [f for r in results for f in r["faults"]]
    missed = [f for f in faults if f.missed]
    print("netfault: %d runs, %d completed, %d with invariant violations; %d of %d faults "
          "injected, %d not; seed %d"
          % (len(results), sum(1 for r in results if r["completed"]), bad,
             len(faults) - len(missed), len(faults), len(missed), seed))
    if not bad and not opts.keep:
        shutil.rmtree(opts.workdir, ignore_errors=True)
    if bad:
        return 1
    for why in skips:
        print("SKIP: %s" % why)
    return SKIP if skips else 0


def _on_signal(sig, frame):
    raise SystemExit(128 + sig)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _on_signal)
    sys.exit(main())
