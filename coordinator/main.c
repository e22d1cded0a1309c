//  coordinator: the chief of a ps-cluster. Reads the cluster (TF_CONFIG or
//  --cluster) and the job (--job and flags), checks them, and runs the
//  training (ps_coord.h). With --local it is the whole cluster: it starts
//  the servers and workers as supervised child processes on 127.0.0.1.

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_checkpoint.h"
#include "ps_coord.h"
#include "ps_ctrmodel.h"
#include "ps_curve.h"
#include "ps_dataset.h"
#include "ps_export.h"
#include "ps_exporter.h"
#include "ps_jobdata.h"
#include "ps_file.h"
#include "ps_job.h"
#include "ps_jobflags.h"
#include "ps_launcher_local.h"
#include "ps_launcher_slurm.h"
#include "ps_log.h"
#include "ps_mode.h"
#include "ps_model.h"
#include "ps_parse.h"
#include "ps_plot.h"
#include "ps_probe.h"
#include "ps_signal.h"
#include "ps_slurm.h"
#include "ps_tfconfig.h"

#define S_MAX_TASKS 256

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: coordinator --local [options]\n"
        "       coordinator [--cluster FILE] [options]     (cluster from TF_CONFIG or FILE)\n"
        "       coordinator plot METRICS.jsonl --out FILE.png [--width W] [--height H]\n"
        "                          (draw a metrics file with gnuplot)\n"
        "       coordinator --cluster-resolver slurm[:ps=N][,evaluator][,port=P] [options]\n"
        "                                                     (task 0 of a Slurm job step)\n"
        "       coordinator keygen --out DIR [--cluster FILE | --ps N --workers N\n"
        "                          [--evaluator]] [--data-plane curve|plain]\n"
        "                                                     (a cluster's keys)\n"
        "       coordinator ping ps[:INDEX] [--cluster FILE] [--as TYPE:INDEX]\n"
        "                        [--keys DIR | --insecure] [--timeout-ms N]\n"
        "                                                     (a probe: exit 0 when the server,\n"
        "                                                     or every one, answers a ping)\n"
        "       coordinator export --checkpoint DIR --format safetensors|npz --out FILE\n"
        "                          [--model NAME|FILE]        (the trained weights)\n"
        "\n"
        "Trains a model on a parameter-server cluster: registers the servers and\n"
        "workers, places the variables, hands out steps, survives failures, takes\n"
        "checkpoints and reports progress (schemas/job.md).\n"
        "\n"
        "Cluster:\n"
        "  --local             start the servers and workers here, on 127.0.0.1\n"
        "  --ps N              servers of a local cluster (default 2; none in mirrored\n"
        "                      mode, where every worker holds the variables)\n"
        "  --ps-memory-limit BYTES  each local server's --memory-limit (K, M, G):\n"
        "                      the most its embedding tables may hold; a run whose\n"
        "                      rows do not fit fails at once, naming the server\n"
        "  --workers N         workers of a local cluster (default 2)\n"
        "  --evaluator         a local cluster also runs an evaluator task\n"
        "  --no-restart        do not restart local children that die\n"
        "  --log-dir DIR       local children's logs (default /tmp/ps-cluster-PID, a run\n"
        "                      directory removed with its logs and default checkpoints\n"
        "                      when the run completes; kept when it does not)\n"
        "  --keep-run-dir      keep the default run directory after a completed run\n"
        "  --cluster FILE      the cluster spec (TF_CONFIG's JSON); default: TF_CONFIG\n"
        "  --cluster-resolver slurm[:ps=N][,evaluator][,port=P]\n"
        "                      the cluster from the Slurm job step this runs in, as\n"
        "                      its task 0; servers and workers that die are\n"
        "                      relaunched into the job with srun (README.md, Running\n"
        "                      on Slurm). Needs --checkpoint-dir on shared storage\n"
        "  --keys DIR          the cluster's CurveZMQ keys (public/ and chief-0's secret\n"
        "                      certificate; README.md, Security). --local makes a fresh\n"
        "                      set per run unless given one\n"
        "  --insecure          no authentication, no encryption, for every process\n"
        "                      (warns at start)\n"
        "  --data-plane P      curve (default) or plain: the servers' connections\n"
        "                      authenticated by passwords and not encrypted, for a\n"
        "                      network no one else reaches (faster; README Security)\n"
        "Job (flags override the job file):\n"
        "  --job FILE          job file (schemas/job.md)\n"
        "  --model NAME|FILE   cnn, cnn2, mlp or a spec file (default cnn)\n"
        "  --epochs N          (default 3)        --steps N   train N steps instead\n"
        "  --batch N           per worker (default 64)\n"
        "  --optimizer KIND    sgd, momentum, adagrad, adam (default adam)\n"
        "  --lr RATE           (default 0.001)\n"
        "  --mode MODE         async (default); mirrored: synchronous, every worker a\n"
        "                      replica, gradients summed by ring all-reduce; ssp:\n"
        "                      async with no worker more than S steps ahead of the\n"
        "                      slowest live one (bounded staleness); or sync:\n"
        "                      synchronous on the servers, which apply each round's\n"
        "                      mean gradient once\n"
        "  --staleness S       ssp's bound, a whole number (default 3; 0 = lockstep)\n"
        "                      or unbounded (as async)\n"
        "  --seed N            (default 1)\n"
        "  --data DIR          (default " PS_DATASET_DEFAULT_DIR ")\n"
        "  --limit N           first N training examples   --test-limit N\n"
        "  --data-format F     idx (default: IDX files in --data), or criteo or libsvm\n"
        "                      text for a click-through-rate model (lr, dlrm)\n"
        "  --train-data FILE   --test-data FILE   its text files (absolute paths)\n"
        "  --train-images FILE --train-labels FILE  an image model's IDX or .npy files,\n"
        "  --test-images FILE  --test-labels FILE   in place of those in --data\n"
        "  --data-format csv   a classifier's CSV files, --train-data and --test-data\n"
        "  --label-column NAME  their column of labels (default label)\n"
        "  --classes N         the data's classes, 2 to 256, checked against the labels\n"
        "                      and the model's last layer (default: from the labels)\n"
        "  --checkpoint-dir D  --checkpoint-steps N   --checkpoint-seconds S   --keep K\n"
        "  --full-every K      every K-th checkpoint writes the tables whole, the\n"
        "                      others incremental (default 1: always whole)\n"
        "  --eval-epochs N     evaluate every N epochs (default 1; 0 = never)\n"
        "  --eval-steps N      also evaluate every N steps\n"
        "  --heartbeat-ms N    (default 500)   --heartbeat-timeout-ms N (default 3000)\n"
        "  --register-timeout-ms N   wait this long for the servers (default 60000)\n"
        "  --threads N         compute threads per worker (default 1)\n"
        "  --device D          cpu, gpu or auto for the workers (default cpu)\n"
        "  --overlap           workers push a step while computing the next (faster,\n"
        "                      one step staler)\n"
        "  --nonfinite-retries N   retries of a step whose gradient is NaN or infinite\n"
        "                      before the run fails (default 2)\n"
        "  --step-retries N    retries in a row of a step that fails otherwise (a\n"
        "                      server's error) before the run fails (default 100)\n"
        "  --stop-on-divergence    fail a run whose training loss diverges (default: warn)\n"
        "Run:\n"
        "  --resume            resume from the newest valid checkpoint (required to exist)\n"
        "  --metrics FILE      JSON lines: progress, evaluations, checkpoints, failures, done\n"
        "  --metrics-port PORT serve /metrics in the Prometheus text format on PORT\n"
        "                      (0: any free port, logged); off by default\n"
        "  --metrics-addr ADDR the address it listens on (default 127.0.0.1)\n"
        "  --help              this text\n"
        "\n"
        "A local cluster without --checkpoint-dir checkpoints into its log directory\n"
        "every 30 s, so that a failed server can be recovered; its servers get the\n"
        "checkpoint directory as their --checkpoint-root. Servers started by hand need\n"
        "--checkpoint-root set to the coordinator's --checkpoint-dir (shared storage),\n"
        "which the coordinator checks at start.\n"
        "Ctrl-C (SIGINT) or SIGTERM writes a final checkpoint, stops every process and\n"
        "exits 130 (143); a second signal stops at once. Exit status 0 means the\n"
        "training completed.\n");
}

typedef struct {
    bool local;
    const char *keys_dir;
    bool insecure;
    bool plain;                 //  --data-plane plain: the local cluster's keys say so
    int local_ps, local_workers;
    const char *ps_memory_limit;        //  each server's --memory-limit, or NULL
    bool local_evaluator;
    bool restart;
    bool keep_run_dir;          //  keep the default run directory of a completed run
    const char *log_dir;
    const char *cluster_file;
    const char *resolver;       //  --cluster-resolver, or NULL
    const char *job_file;
    const char *metrics;
    int metrics_port;           //  -1: no Prometheus endpoint
    const char *metrics_addr;
    bool resume;
} s_options_t;

//  The job flags, collected in order while the command line is read.
typedef struct {
    int option;
    const char *value;
} s_flag_t;

//  The options of a local cluster run from O_PS to O_LOG_DIR.
enum {
    O_LOCAL = 256, O_PS, O_PS_MEMORY_LIMIT, O_WORKERS, O_EVALUATOR, O_NO_RESTART, O_KEEP_RUN_DIR,
    O_DATA_PLANE, O_LOG_DIR,
    O_CLUSTER, O_CLUSTER_RESOLVER, O_JOB,
    O_RESUME, O_METRICS, O_HELP, O_KEYS, O_INSECURE, O_OUT, O_AS, O_TIMEOUT_MS,
    O_CHECKPOINT, O_FORMAT, O_MODEL, O_METRICS_PORT, O_METRICS_ADDR, O_WIDTH, O_HEIGHT,
};

//  The program's own options; the job flags (ps_jobflags.h) join them in
//  s_long_options.
static const struct option s_own_options [] = {
    { "local", no_argument, NULL, O_LOCAL },
    { "ps", required_argument, NULL, O_PS },
    { "ps-memory-limit", required_argument, NULL, O_PS_MEMORY_LIMIT },
    { "workers", required_argument, NULL, O_WORKERS },
    { "evaluator", no_argument, NULL, O_EVALUATOR },
    { "no-restart", no_argument, NULL, O_NO_RESTART },
    { "keep-run-dir", no_argument, NULL, O_KEEP_RUN_DIR },
    { "log-dir", required_argument, NULL, O_LOG_DIR },
    { "cluster", required_argument, NULL, O_CLUSTER },
    { "cluster-resolver", required_argument, NULL, O_CLUSTER_RESOLVER },
    { "job", required_argument, NULL, O_JOB },
    { "resume", no_argument, NULL, O_RESUME },
    { "metrics", required_argument, NULL, O_METRICS },
    { "metrics-port", required_argument, NULL, O_METRICS_PORT },
    { "metrics-addr", required_argument, NULL, O_METRICS_ADDR },
    { "help", no_argument, NULL, O_HELP },
    { "keys", required_argument, NULL, O_KEYS },
    { "insecure", no_argument, NULL, O_INSECURE },
    { "data-plane", required_argument, NULL, O_DATA_PLANE },
    { NULL, 0, NULL, 0 },
};

//  The program's options and the job flags, for getopt_long.
static const struct option *
s_long_options (void)
{
    static struct option all [64];
    size_t own = 0, job = 0;
    while (s_own_options [own].name)
        own++;
    while (ps_jobflags_options [job].name)
        job++;
    assert (own + job < sizeof all / sizeof all [0]);
    memcpy (all, s_own_options, own * sizeof all [0]);
    memcpy (all + own, ps_jobflags_options, (job + 1) * sizeof all [0]);
    return all;
}

//  The name of one of the program's own options.
static const char *
s_flag_name (int option)
{
    for (int i = 0; s_own_options [i].name; i++)
        if (s_own_options [i].val == option)
            return s_own_options [i].name;
    return "?";
}

//  Load the model, give the job its optimizer unless the job set one,
//  and check the model against the job's data (ps_jobdata.h). Returns the
//  model (which the run uses) and the training examples, or NULL after
//  printing what is wrong.
static ps_model_t *
s_load_model (ps_job_t *job, size_t *train_count)
{
    ps_error_t err;
    ps_model_t *model = ps_model_load (job->model, &err);
    if (!model) {
        fprintf (stderr, "coordinator: model: %s\n", err.msg);
        return NULL;
    }
    const ps_ctrmodel_t *ctr = ps_model_ctr (model);
    ps_job_model_optimizer (job, ctr ? &ctr->optimizer : NULL);
    if (ps_jobdata_check (job, model, train_count, &err)) {
        fprintf (stderr, "coordinator: %s\n", err.msg);
        ps_model_destroy (&model);
    }
    return model;
}

//  Parse --data-plane: curve or plain. Returns 0, or -1 after saying why.
static int
s_data_plane (const char *text, bool *plain)
{
    if (strcmp (text, "curve") && strcmp (text, "plain")) {
        fprintf (stderr, "coordinator: --data-plane \"%s\": expected curve or plain\n", text);
        return -1;
    }
    *plain = strcmp (text, "plain") == 0;
    return 0;
}

//  The tasks of a cluster of nps servers, nworkers workers and
//  nevaluators evaluators, chief:0 first, as new strings in *tasks (free
//  each and the array). Returns how many.
static size_t
s_tasks (int nps, int nworkers, int nevaluators, char ***tasks)
{
    size_t n = 1 + (size_t) nps + (size_t) nworkers + (size_t) nevaluators;
    *tasks = calloc (n, sizeof (char *));
    if (!*tasks)
        abort ();
    const char *roles [] = { "chief", "ps", "worker", "evaluator" };
    int counts [] = { 1, nps, nworkers, nevaluators };
    size_t at = 0;
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < counts [r]; i++) {
            char task [48];
            snprintf (task, sizeof task, "%s:%d", roles [r], i);
            if (!((*tasks) [at++] = strdup (task)))
                abort ();
        }
    return n;
}

static void
s_tasks_free (char **tasks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free (tasks [i]);
    free (tasks);
}

//  coordinator keygen: make a cluster's key directory (ps_curve.h), for
//  the tasks of a cluster spec or of the counts given. Returns the exit
//  status.
static int
s_keygen (int argc, char *argv [])
{
    static const struct option options [] = {
        { "out", required_argument, NULL, O_OUT },
        { "cluster", required_argument, NULL, O_CLUSTER },
        { "ps", required_argument, NULL, O_PS },
    { "ps-memory-limit", required_argument, NULL, O_PS_MEMORY_LIMIT },
        { "workers", required_argument, NULL, O_WORKERS },
        { "evaluator", no_argument, NULL, O_EVALUATOR },
        { "data-plane", required_argument, NULL, O_DATA_PLANE },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    const char *out = NULL, *cluster = NULL;
    int nps = -1, nworkers = -1, nevaluators = 0;
    bool plain = false;
    int c;
    uint64_t u;
    ps_error_t err;
    while ((c = getopt_long (argc, argv, "", options, NULL)) != -1) {
        switch (c) {
            case O_OUT: out = optarg; break;
            case O_CLUSTER: cluster = optarg; break;
            case O_DATA_PLANE:
                if (s_data_plane (optarg, &plain))
                    return 2;
                break;
            case O_EVALUATOR: nevaluators = 1; break;
            case O_PS:
            case O_WORKERS:
                if (ps_parse_uint (c == O_PS ? "--ps" : "--workers", optarg, 0, S_MAX_TASKS, &u,
                                   &err)) {
                    fprintf (stderr, "coordinator keygen: %s\n", err.msg);
                    return 2;
                }
                *(c == O_PS ? &nps : &nworkers) = (int) u;
                break;
            case O_HELP: s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
        }
    }
    if (optind < argc || !out) {
        fprintf (stderr, "coordinator keygen: %s (see --help)\n", optind < argc
                 ? "unexpected argument" : "--out DIR is required");
        return 2;
    }
    bool counts = nps >= 0 || nworkers >= 0 || nevaluators > 0;
    if (!counts) {
        ps_tfconfig_t *tf = cluster ? ps_tfconfig_from_file (cluster, &err)
                                    : ps_tfconfig_from_env (&err);
        if (!tf) {
            fprintf (stderr, "coordinator keygen: %s (give --cluster FILE, TF_CONFIG, or --ps N "
                     "--workers N)\n", err.msg);
            return 2;
        }
        nps = ps_tfconfig_count (tf, "ps");
        nworkers = ps_tfconfig_count (tf, "worker");
        nevaluators = ps_tfconfig_count (tf, "evaluator");
        ps_tfconfig_destroy (&tf);
    }
    else
    if (cluster || nps < 0 || nworkers < 1) {
        fprintf (stderr, "coordinator keygen: give either a cluster spec or --ps N (0 or more) "
                 "and --workers N (1 or more)\n");
        return 2;
    }
    char **tasks;
    size_t n = s_tasks (nps, nworkers, nevaluators, &tasks);
    int rc = ps_curve_keygen (out, (const char *const *) tasks, n, plain, &err);
    s_tasks_free (tasks, n);
    if (rc) {
        fprintf (stderr, "coordinator keygen: %s\n", err.msg);
        return 1;
    }
    printf ("keys for chief:0, %d ps, %d worker and %d evaluator tasks in %s: hand each process "
            "%s/public/ and its own %s/<role>-<index>.cert_secret (README.md, Security)\n", nps,
            nworkers, nevaluators, out, out, out);
    return 0;
}

//  coordinator ping: the protocol's ping to a ps task, or to every one,
//  from this process's task (TF_CONFIG's, or --as) with its keys
//  (ps_probe.h), for the probes of deploy/k8s. Exit status 0 when each
//  answered ping_ok in time, 1 when one did not, 2 on a usage mistake.
static int
s_ping (int argc, char *argv [])
{
    static const struct option options [] = {
        { "cluster", required_argument, NULL, O_CLUSTER },
        { "as", required_argument, NULL, O_AS },
        { "keys", required_argument, NULL, O_KEYS },
        { "insecure", no_argument, NULL, O_INSECURE },
        { "timeout-ms", required_argument, NULL, O_TIMEOUT_MS },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    const char *cluster = NULL, *as = NULL, *keys_dir = NULL;
    bool insecure = false;
    uint64_t timeout_ms = 2000;
    int c;
    ps_error_t err;
    while ((c = getopt_long (argc, argv, "", options, NULL)) != -1) {
        switch (c) {
            case O_CLUSTER: cluster = optarg; break;
            case O_AS: as = optarg; break;
            case O_KEYS: keys_dir = optarg; break;
            case O_INSECURE: insecure = true; break;
            case O_TIMEOUT_MS:
                if (ps_parse_uint ("--timeout-ms", optarg, 1, 600000, &timeout_ms, &err)) {
                    fprintf (stderr, "coordinator ping: %s\n", err.msg);
                    return 2;
                }
                break;
            case O_HELP: s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf (stderr, "coordinator ping: expected one target, ps:INDEX or ps (every "
                 "server), got %d (see --help)\n", argc - optind);
        return 2;
    }
    //  The target: "ps" alone, or "ps:INDEX" read as --task is.
    const char *target = argv [optind];
    char type [16];
    int server = -1;
    if (strcmp (target, "ps") != 0
    &&  (ps_tfconfig_parse_task (target, type, sizeof type, &server, &err)
         || strcmp (type, "ps") != 0)) {
        fprintf (stderr, "coordinator ping: target \"%s\": expected ps:INDEX or ps (only the "
                 "servers answer a ping)\n", target);
        return 2;
    }
    ps_tfconfig_t *tf = cluster ? ps_tfconfig_from_file (cluster, &err)
                                : ps_tfconfig_from_env (&err);
    if (!tf) {
        fprintf (stderr, "coordinator ping: %s (give --cluster FILE or TF_CONFIG)\n", err.msg);
        return 2;
    }
    int status = 2;
    int index;
    if (as
    &&  (ps_tfconfig_parse_task (as, type, sizeof type, &index, &err)
         || ps_tfconfig_set_task (tf, type, index, &err)))
        fprintf (stderr, "coordinator ping: --as: %s\n", err.msg);
    else
    if (!ps_tfconfig_task_type (tf))
        fprintf (stderr, "coordinator ping: the cluster spec names no task, and no --as "
                 "TYPE:INDEX was given (the identity whose keys to ping with)\n");
    else {
        char task [48];
        snprintf (task, sizeof task, "%s:%d", ps_tfconfig_task_type (tf),
                  ps_tfconfig_task_index (tf));
        ps_curve_t *curve = NULL;
        if (ps_curve_open (keys_dir, insecure, task, &curve, &err))
            fprintf (stderr, "coordinator ping: %s\n", err.msg);
        else
        if (ps_probe_ping (tf, server, curve, (int) timeout_ms, &err)) {
            fprintf (stderr, "coordinator ping: %s\n", err.msg);
            status = err.code == PS_EINVAL ? 2 : 1;
        }
        else {
            printf ("%s: ping_ok\n", target);
            status = 0;
        }
        ps_curve_destroy (&curve);
    }
    ps_tfconfig_destroy (&tf);
    return status;
}

//  coordinator export: a checkpoint's weights as one safetensors or npz
//  file (ps_export.h). Returns the exit status: 2 for bad usage, 1 when
//  the checkpoint cannot be read or the file written.
static int
s_export (int argc, char *argv [])
{
    static const struct option options [] = {
        { "checkpoint", required_argument, NULL, O_CHECKPOINT },
        { "format", required_argument, NULL, O_FORMAT },
        { "out", required_argument, NULL, O_OUT },
        { "model", required_argument, NULL, O_MODEL },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    const char *checkpoint = NULL, *format_text = NULL, *out = NULL, *model = NULL;
    int c;
    while ((c = getopt_long (argc, argv, "", options, NULL)) != -1) {
        switch (c) {
            case O_CHECKPOINT: checkpoint = optarg; break;
            case O_FORMAT: format_text = optarg; break;
            case O_OUT: out = optarg; break;
            case O_MODEL: model = optarg; break;
            case O_HELP: s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
        }
    }
    if (optind < argc || !checkpoint || !format_text || !out) {
        fprintf (stderr, "coordinator export: %s (see --help)\n", optind < argc
                 ? "unexpected argument" : !checkpoint ? "--checkpoint DIR is required"
                 : !format_text ? "--format safetensors|npz is required"
                 : "--out FILE is required");
        return 2;
    }
    ps_export_format_t format;
    ps_error_t err;
    if (ps_export_format_parse (format_text, &format, &err)) {
        fprintf (stderr, "coordinator export: %s\n", err.msg);
        return 2;
    }
    ps_export_result_t result;
    if (ps_export_run (checkpoint, format, out, model, &result, &err)) {
        fprintf (stderr, "coordinator export: %s\n", err.msg);
        return 1;
    }
    printf ("exported %d variables of checkpoint %s (step %llu) to %s\n", result.variables,
            result.dir, (unsigned long long) result.step, out);
    return 0;
}

//  The job: defaults (for nps servers), the file, then the flags; for a
//  local cluster also its log directory (made here) and default
//  checkpoints. Returns 0, or -1 after saying what is wrong.
static int
s_load_job (ps_job_t *job, int nps, const s_options_t *opt, const s_flag_t *flags, int nflags,
            char *log_dir, size_t log_len)
{
    ps_error_t err;
    ps_job_default (job, nps);
    if (opt->job_file && ps_job_load_file (job, opt->job_file, &err)) {
        fprintf (stderr, "coordinator: %s\n", err.msg);
        return -1;
    }
    for (int f = 0; f < nflags; f++)
        if (ps_jobflags_apply (job, flags [f].option, flags [f].value))
            return -1;
    if (opt->local) {
        //  The default directories are new for every run, so there would be
        //  nothing to resume from.
        if (opt->resume && !opt->log_dir && !*job->checkpoint_dir) {
            fprintf (stderr, "coordinator: --local --resume needs the --checkpoint-dir (or "
                     "--log-dir) of the run to resume\n");
            return -1;
        }
        if (opt->log_dir)
            snprintf (log_dir, log_len, "%s", opt->log_dir);
        else
            snprintf (log_dir, log_len, "/tmp/ps-cluster-%d", (int) getpid ());
        if (mkdir (log_dir, 0755) != 0 && errno != EEXIST) {
            fprintf (stderr, "coordinator: cannot create %s: %s\n", log_dir, strerror (errno));
            return -1;
        }
        //  Recovering a failed server, or a mirrored ring that lost every
        //  worker, needs a checkpoint; a local cluster has one by default.
        if (!*job->checkpoint_dir) {
            snprintf (job->checkpoint_dir, sizeof job->checkpoint_dir, "%s/checkpoints", log_dir);
            if (!job->checkpoint_steps && job->checkpoint_seconds <= 0)
                job->checkpoint_seconds = 30;
        }
    }
    if (ps_job_validate (job, &err)) {
        fprintf (stderr, "coordinator: %s: %s\n", opt->job_file ? opt->job_file : "job", err.msg);
        return -1;
    }
    //  The checkpoint directory, and what a resume needs of it, are checked
    //  now: the run would otherwise find out once every process has
    //  registered, or at its first checkpoint.
    if (opt->resume && !*job->checkpoint_dir) {
        fprintf (stderr, "coordinator: --resume needs a checkpoint directory (--checkpoint-dir, "
                 "or checkpoint.dir in the job)\n");
        return -1;
    }
    if (*job->checkpoint_dir && ps_checkpoint_check_root (job->checkpoint_dir, opt->resume, &err)) {
        fprintf (stderr, "coordinator: %s\n", err.msg);
        return -1;
    }
    return 0;
}

//  coordinator plot METRICS --out PNG: draw a metrics file (ps_plot.h).
//  Returns the exit status.
static int
s_plot (int argc, char *argv [])
{
    static const struct option options [] = {
        { "out", required_argument, NULL, O_OUT },
        { "width", required_argument, NULL, O_WIDTH },
        { "height", required_argument, NULL, O_HEIGHT },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    ps_plot_config_t cfg = { .width = 1000, .height = 750 };
    int c;
    uint64_t u;
    ps_error_t err;
    while ((c = getopt_long (argc, argv, "", options, NULL)) != -1) {
        switch (c) {
            case O_OUT: cfg.out_path = optarg; break;
            case O_WIDTH:
            case O_HEIGHT:
                if (ps_parse_uint (c == O_WIDTH ? "--width" : "--height", optarg, 100, 10000,
                                   &u, &err)) {
                    fprintf (stderr, "coordinator plot: %s\n", err.msg);
                    return 2;
                }
                *(c == O_WIDTH ? &cfg.width : &cfg.height) = (int) u;
                break;
            case O_HELP: s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
        }
    }
    if (optind + 1 != argc || !cfg.out_path) {
        fprintf (stderr, "coordinator plot: %s (usage: coordinator plot METRICS.jsonl --out "
                 "FILE.png [--width W] [--height H])\n", !cfg.out_path ? "--out FILE is required"
                 : optind == argc ? "which metrics file?" : "one metrics file only");
        return 2;
    }
    cfg.metrics_path = argv [optind];
    ps_plot_summary_t summary;
    if (ps_plot_run (&cfg, &summary, &err)) {
        fprintf (stderr, "coordinator plot: %s\n", err.msg);
        return err.code == PS_EINVAL || err.code == PS_ENOTFOUND ? 2 : 1;
    }
    printf ("%s: %dx%d, %zu progress records to step %.0f, %zu evaluations, %zu failures and "
            "%zu recoveries marked\n", cfg.out_path, cfg.width, cfg.height, summary.progress,
            summary.last_step, summary.evaluations, summary.failures, summary.recoveries);
    return 0;
}

//  The end of a local run in the default run directory run_dir (made for
//  this run, as no --log-dir was given): a completed run (status 0)
//  removes it unless --keep-run-dir asked to keep it, since its logs and
//  default checkpoints are of no more use than the user said; a run that
//  did not complete keeps it, for its logs and for a checkpoint to resume
//  from. The last line says which, and where the checkpoints are. One
//  whose cluster never started holds nothing and goes without a word.
static void
s_end_run_dir (const s_options_t *opt, const char *run_dir, const char *checkpoint_dir,
               bool started, int status)
{
    size_t len = strlen (run_dir);
    bool inside = strncmp (checkpoint_dir, run_dir, len) == 0 && checkpoint_dir [len] == '/';
    if (started && (status != 0 || opt->keep_run_dir)) {
        ps_info ("run directory %s kept: logs%s%s", run_dir, *checkpoint_dir ? ", checkpoints in "
                 : "", checkpoint_dir);
        return;
    }
    ps_error_t err;
    if (ps_file_remove_tree (run_dir, &err)) {
        ps_warn ("removing the run directory: %s", err.msg);
        return;
    }
    if (!started)
        return;
    if (inside)
        ps_info ("removed the run directory %s with its logs and checkpoints (--keep-run-dir or "
                 "--checkpoint-dir keeps them)", run_dir);
    else
        ps_info ("removed the run directory %s with its logs%s%s", run_dir,
                 *checkpoint_dir ? "; checkpoints in " : "", checkpoint_dir);
}

int
main (int argc, char *argv [])
{
    ps_log_init ("coordinator", PS_LOG_INFO);
    if (argc > 1 && strcmp (argv [1], "keygen") == 0)
        return s_keygen (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "plot") == 0)
        return s_plot (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "export") == 0)
        return s_export (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "ping") == 0)
        return s_ping (argc - 1, argv + 1);
    //  local_ps -1: the mode's default for a local cluster.
    s_options_t opt = { .local_ps = -1, .local_workers = 2, .restart = true,
                        .metrics_port = -1 };
    s_flag_t *flags = calloc ((size_t) argc + 1, sizeof (s_flag_t));
    if (!flags)
        abort ();
    int nflags = 0;
    int c;
    uint64_t u = 0;
    ps_error_t err;
    //  The first option given that only a local cluster reads.
    const char *local_only = NULL;
    const struct option *options = s_long_options ();
    while ((c = getopt_long (argc, argv, "", options, NULL)) != -1) {
        if (!local_only && c >= O_PS && c <= O_LOG_DIR)
            local_only = s_flag_name (c);
        switch (c) {
            case O_LOCAL: opt.local = true; break;
            case O_EVALUATOR: opt.local_evaluator = true; break;
            case O_NO_RESTART: opt.restart = false; break;
            case O_KEEP_RUN_DIR: opt.keep_run_dir = true; break;
            case O_LOG_DIR: opt.log_dir = optarg; break;
            case O_CLUSTER: opt.cluster_file = optarg; break;
            case O_CLUSTER_RESOLVER: opt.resolver = optarg; break;
            case O_JOB: opt.job_file = optarg; break;
            case O_RESUME: opt.resume = true; break;
            case O_METRICS: opt.metrics = optarg; break;
            case O_METRICS_ADDR: opt.metrics_addr = optarg; break;
            case O_METRICS_PORT:
                if (ps_parse_uint ("--metrics-port", optarg, 0, 65535, &u, &err)) {
                    fprintf (stderr, "coordinator: %s\n", err.msg);
                    free (flags);
                    return 2;
                }
                opt.metrics_port = (int) u;
                break;
            case O_KEYS: opt.keys_dir = optarg; break;
            case O_INSECURE: opt.insecure = true; break;
            case O_DATA_PLANE:
                if (s_data_plane (optarg, &opt.plain)) {
                    free (flags);
                    return 2;
                }
                break;
            case O_HELP: s_usage (stdout); free (flags); return 0;
            case O_PS_MEMORY_LIMIT:
                if (ps_parse_bytes ("--ps-memory-limit", optarg, &u, &err)) {
                    fprintf (stderr, "coordinator: %s\n", err.msg);
                    free (flags);
                    return 2;
                }
                opt.ps_memory_limit = optarg;
                break;
            case O_PS:
            case O_WORKERS:
                if (ps_parse_uint (c == O_PS ? "--ps" : "--workers", optarg, 1, S_MAX_TASKS, &u,
                                   &err)) {
                    fprintf (stderr, "coordinator: %s\n", err.msg);
                    free (flags);
                    return 2;
                }
                *(c == O_PS ? &opt.local_ps : &opt.local_workers) = (int) u;
                break;
            default:
                if (ps_jobflags_is (c)) {
                    flags [nflags].option = c;
                    flags [nflags++].value = optarg;
                    break;
                }
                s_usage (stderr);
                free (flags);
                return 2;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "coordinator: unexpected argument \"%s\" (see --help)\n", argv [optind]);
        free (flags);
        return 2;
    }
    if (local_only && !opt.local) {
        fprintf (stderr, "coordinator: --%s is for --local (a cluster from TF_CONFIG or "
                 "--cluster FILE lists its own tasks)\n", local_only);
        free (flags);
        return 2;
    }
    if (opt.plain && (opt.keys_dir || opt.insecure)) {
        fprintf (stderr, "coordinator: --data-plane plain chooses how a local cluster's own keys "
                 "are made; %s\n", opt.insecure ? "--insecure has none"
                 : "with --keys the keys decide (coordinator keygen --data-plane plain)");
        free (flags);
        return 2;
    }
    if (opt.metrics_addr && opt.metrics_port < 0) {
        fprintf (stderr, "coordinator: --metrics-addr says where the Prometheus endpoint "
                 "listens; it needs --metrics-port\n");
        free (flags);
        return 2;
    }
    //  Each of these says where the cluster comes from.
    const char *sources [3];
    int nsources = 0;
    if (opt.local)
        sources [nsources++] = "--local";
    if (opt.cluster_file)
        sources [nsources++] = "--cluster FILE";
    if (opt.resolver)
        sources [nsources++] = "--cluster-resolver";
    if (nsources > 1) {
        fprintf (stderr, "coordinator: %s and %s%s%s: each says where the cluster comes from "
                 "(a local cluster makes its own spec); give one\n", sources [0], sources [1],
                 nsources > 2 ? " and " : "", nsources > 2 ? sources [2] : "");
        free (flags);
        return 2;
    }
    int exit_code = 2;
    ps_tfconfig_t *tf = NULL;
    ps_launcher_t *launcher = NULL;
    ps_model_t *model = NULL;
    char *tf_cluster = NULL;
    char **servers = NULL, **workers = NULL;
    char log_dir [PS_JOB_PATH_MAX - 32] = "";
    char bind [300];
    int nps, nworkers, nevaluators;
    int stop_fd = -1;
    char local_keys [PATH_MAX] = "";
    ps_exporter_t *exporter = NULL;
    bool launcher_started;              //  set at the end: whether tasks ran

    ps_coord_config_t config;
    memset (&config, 0, sizeof config);
    //  The cluster: generated for a local run, else from TF_CONFIG or a file.
    //  A local cluster's servers depend on the job's mode, so its job is
    //  read first.
    if (opt.local) {
        //  TF_CONFIG may be in the environment for other programs.
        if (getenv ("TF_CONFIG"))
            ps_info ("--local: ignoring TF_CONFIG");
        if (s_load_job (&config.job, opt.local_ps < 0 ? 2 : opt.local_ps, &opt, flags, nflags,
                        log_dir, sizeof log_dir))
            goto done;
        const ps_mode_ops_t *mode = ps_mode_lookup (config.job.mode);
        if (mode->no_servers && opt.local_ps > 0) {
            fprintf (stderr, "coordinator: --ps: %s\n", mode->no_servers);
            goto done;
        }
        if (mode->no_evaluator && opt.local_evaluator) {
            fprintf (stderr, "coordinator: --evaluator: %s\n", mode->no_evaluator);
            goto done;
        }
        nps = opt.local_ps < 0 ? mode->local_servers : opt.local_ps;
        nworkers = opt.local_workers;
        nevaluators = opt.local_evaluator ? 1 : 0;
        int counts [PS_ROLES] = { nps, nworkers, nevaluators };
        if (ps_launcher_local_spec (counts, &tf_cluster, &err)) {
            fprintf (stderr, "coordinator: %s\n", err.msg);
            goto done;
        }
        size_t tlen = strlen (tf_cluster) + 64;
        char *text = malloc (tlen);
        if (!text)
            abort ();
        snprintf (text, tlen, "{\"cluster\": %s, \"task\": {\"type\": \"chief\", \"index\": 0}}",
                  tf_cluster);
        tf = ps_tfconfig_parse (text, "the local cluster", &err);
        free (text);
    }
    else
    if (opt.resolver)
        tf = ps_slurm_tfconfig (opt.resolver, &tf_cluster, &err);
    else
    if (opt.cluster_file)
        tf = ps_tfconfig_from_file (opt.cluster_file, &err);
    else
        tf = ps_tfconfig_from_env (&err);
    if (!tf) {
        fprintf (stderr, "coordinator: %s%s\n", err.msg,
                 opt.local || opt.cluster_file || opt.resolver ? ""
                 : " (set TF_CONFIG, or use --cluster FILE, --cluster-resolver or --local)");
        goto done;
    }
    const char *source = opt.local ? "the local cluster"
                       : opt.resolver ? "--cluster-resolver"
                       : opt.cluster_file ? opt.cluster_file : "TF_CONFIG";
    //  A cluster file shared by every process names no task: this one is
    //  the chief.
    if (!ps_tfconfig_task_type (tf) && ps_tfconfig_set_task (tf, "chief", 0, &err)) {
        fprintf (stderr, "coordinator: %s: no chief address: %s\n", source, err.msg);
        goto done;
    }
    if (ps_tfconfig_bind_endpoint (tf, "chief", bind, sizeof bind, &err)) {
        fprintf (stderr, "coordinator: %s: %s\n", source, err.msg);
        goto done;
    }
    nps = ps_tfconfig_count (tf, "ps");
    nworkers = ps_tfconfig_count (tf, "worker");
    nevaluators = ps_tfconfig_count (tf, "evaluator");
    //  A cluster without servers defaults to mirrored mode (ps_job.h); a
    //  job that asks for a mode that needs servers is refused below.
    if (!opt.local && s_load_job (&config.job, nps, &opt, flags, nflags, log_dir,
                                  sizeof log_dir))
        goto done;
    //  A server relaunched into a Slurm job is restored from the run's
    //  checkpoints: without any, it would come back empty.
    if (opt.resolver && !*config.job.checkpoint_dir) {
        fprintf (stderr, "coordinator: --cluster-resolver: give --checkpoint-dir (a directory "
                 "every node shares), from which a relaunched server is restored\n");
        goto done;
    }
    //  Said once, at the start, rather than discovered after the run.
    if (!opt.local && !*config.job.checkpoint_dir)
        ps_warn ("no checkpoint directory (--checkpoint-dir, or checkpoint.dir in the job): "
                 "nothing of this run will be kept, and a failed server cannot be recovered");
    int min_servers = ps_mode_lookup (config.job.mode)->min_servers;
    if (nps == 0 && min_servers > 0) {
        fprintf (stderr, "coordinator: %s: the cluster lists no ps task, and mode \"%s\" keeps "
                 "the variables on ps-servers: list ps tasks, or train in mode \"mirrored\" "
                 "(the default for a cluster of workers only)\n", source,
                 ps_mode_name (config.job.mode));
        goto done;
    }
    if (nps < min_servers || nworkers < 1 || nps > S_MAX_TASKS || nworkers > S_MAX_TASKS
    ||  nevaluators > 1) {
        fprintf (stderr, "coordinator: %s: the cluster has %d ps, %d worker and %d evaluator "
                 "tasks; expected %d..%d ps, 1..%d workers and at most 1 evaluator\n", source,
                 nps, nworkers, nevaluators, min_servers, S_MAX_TASKS, S_MAX_TASKS);
        goto done;
    }
    servers = calloc ((size_t) nps + 1, sizeof (char *));
    workers = calloc ((size_t) nworkers, sizeof (char *));
    if (!servers || !workers)
        abort ();
    //  A mirrored ring's members reach each other on their cluster
    //  addresses.
    for (int w = 0; w < nworkers; w++) {
        char endpoint [300];
        if (ps_tfconfig_connect_endpoint (tf, "worker", w, endpoint, sizeof endpoint, &err)) {
            fprintf (stderr, "coordinator: %s: %s\n", source, err.msg);
            goto done;
        }
        if (!(workers [w] = strdup (endpoint)))
            abort ();
    }
    for (int s = 0; s < nps; s++) {
        char endpoint [300];
        if (ps_tfconfig_connect_endpoint (tf, "ps", s, endpoint, sizeof endpoint, &err)) {
            fprintf (stderr, "coordinator: %s: %s\n", source, err.msg);
            goto done;
        }
        if (!(servers [s] = strdup (endpoint)))
            abort ();
    }

    if (!(model = s_load_model (&config.job, &config.train_count)))
        goto done;
    config.model = model;

    //  Signals are read through a signalfd by the event loop; they are
    //  blocked before any thread or child starts (children unblock them).
    if ((stop_fd = ps_signal_stop_fd (&err)) < 0) {
        fprintf (stderr, "coordinator: %s\n", err.msg);
        exit_code = 1;
        goto done;
    }
    //  The Prometheus endpoint, after the signals are blocked (its thread
    //  must not take them) and before any task starts, so that a port in
    //  use stops the run before it begins.
    if (opt.metrics_port >= 0) {
        const char *addr = opt.metrics_addr ? opt.metrics_addr : "127.0.0.1";
        if (!(exporter = ps_exporter_new (addr, opt.metrics_port, &err))) {
            fprintf (stderr, "coordinator: %s\n", err.msg);
            goto done;
        }
        ps_info ("Prometheus metrics on http://%s%s%s:%d/metrics", strchr (addr, ':') ? "[" : "",
                 addr, strchr (addr, ':') ? "]" : "", ps_exporter_port (exporter));
    }
    //  A local cluster is secured by a fresh set of keys, unless it was
    //  given one: made in a private directory, removed when the run ends.
    if (opt.local && !opt.keys_dir && !opt.insecure) {
        const char *tmp = getenv ("TMPDIR");
        snprintf (local_keys, sizeof local_keys, "%s/ps-keys-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        char **tasks;
        size_t n = s_tasks (nps, nworkers, nevaluators, &tasks);
        int rc = mkdtemp (local_keys) ? ps_curve_keygen (local_keys, (const char *const *) tasks,
                                                         n, opt.plain, &err)
                                      : ps_error_set (&err, PS_EIO, "mkdtemp %s: %s", local_keys,
                                                      strerror (errno));
        s_tasks_free (tasks, n);
        if (rc) {
            fprintf (stderr, "coordinator: making the local cluster's keys: %s\n", err.msg);
            if (rc != PS_EIO || *local_keys)
                ps_file_remove_tree (local_keys, NULL);
            *local_keys = 0;
            exit_code = 1;
            goto done;
        }
        opt.keys_dir = local_keys;
    }
    if (ps_curve_open (opt.keys_dir, opt.insecure, "chief:0", &config.curve, &err)) {
        fprintf (stderr, "coordinator: %s\n", err.msg);
        goto done;
    }
    if (opt.local) {
        int counts [PS_ROLES] = { nps, nworkers, nevaluators };
        launcher = ps_launcher_local_new (opt.restart, log_dir, &err);
        if (!launcher
        ||  ps_launcher_start_cluster (launcher, tf_cluster, counts, config.job.checkpoint_dir,
                                       opt.keys_dir, opt.ps_memory_limit,
                                       strcmp (config.job.device, "gpu") == 0 ? "gpu" : NULL,
                                       &err)) {
            fprintf (stderr, "coordinator: %s\n", err.msg);
            exit_code = 1;
            goto done;
        }
        ps_info ("local cluster: %d servers, %d workers%s; logs and checkpoints in %s", nps,
                 nworkers, nevaluators ? ", an evaluator" : "", log_dir);
    }
    else
    if (opt.resolver) {
        //  Slurm started every task; the launcher learns how to run each
        //  again, for when one falls silent.
        int counts [PS_ROLES] = { nps, nworkers, nevaluators };
        launcher = ps_launcher_slurm_new (getenv ("SLURM_JOB_ID"), &err);
        if (!launcher
        ||  ps_launcher_start_cluster (launcher, tf_cluster, counts, config.job.checkpoint_dir,
                                       opt.insecure ? NULL
                                       : opt.keys_dir ? opt.keys_dir : getenv ("PS_KEYS"),
                                       NULL, NULL, &err)) {
            fprintf (stderr, "coordinator: %s\n", err.msg);
            exit_code = 1;
            goto done;
        }
        ps_info ("Slurm job %s: %d servers, %d workers%s; a task that falls silent is "
                 "relaunched with srun", getenv ("SLURM_JOB_ID"), nps, nworkers,
                 nevaluators ? ", an evaluator" : "");
    }
    config.bind = bind;
    config.nservers = nps;
    config.nworkers = nworkers;
    config.nevaluators = nevaluators;
    config.servers = (const char *const *) servers;
    config.workers = (const char *const *) workers;
    config.metrics_path = opt.metrics;
    config.exporter = exporter;
    config.resume = opt.resume;
    config.progress_tty = isatty (STDERR_FILENO);
    config.stop_fd = stop_fd;
    config.launcher = launcher;
    int stopped_by = 0;
    config.stopped_by = &stopped_by;
    if (ps_coord_run (&config, &err) == 0)
        exit_code = 0;
    else {
        ps_error ("%s", err.msg);
        //  As a shell reports a command a signal ended: 128 + its number.
        exit_code = stopped_by ? 128 + stopped_by : 1;
    }
done:
    launcher_started = opt.local && launcher;
    ps_launcher_destroy (&launcher);
    ps_exporter_destroy (&exporter);
    ps_curve_destroy (&config.curve);
    if (*local_keys && ps_file_remove_tree (local_keys, &err))
        ps_warn ("removing the local cluster's keys: %s", err.msg);
    if (opt.local && !opt.log_dir && *log_dir)
        s_end_run_dir (&opt, log_dir, config.job.checkpoint_dir, launcher_started, exit_code);
    ps_model_destroy (&model);
    if (stop_fd >= 0)
        close (stop_fd);
    if (servers)
        for (int s = 0; s < nps; s++)
            free (servers [s]);
    free (servers);
    if (workers)
        for (int w = 0; w < nworkers; w++)
            free (workers [w]);
    free (workers);
    free (tf_cluster);
    ps_tfconfig_destroy (&tf);
    free (flags);
    return exit_code;
}
