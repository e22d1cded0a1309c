//  coordinator: the chief of a ps-cluster. Reads the cluster (TF_CONFIG or
//  --cluster) and the job (--job and flags), checks them, and runs the
//  training (ps_coord.h). With --local it is the whole cluster: it starts
//  the servers and workers as supervised child processes on 127.0.0.1.

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_checkpoint.h"
#include "ps_cli.h"
#include "ps_coord.h"
#include "ps_cores.h"
#include "ps_cpus.h"
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

//  The command line of a run, read by argp (ps_cli.h) into this; the job
//  flags go to their own child parser (ps_jobflags.h).
typedef struct {
    bool local;
    const char *keys_dir;
    bool insecure;
    bool plain;                 //  --data-plane plain: the local cluster's keys say so
    int local_ps, local_workers;
    const char *ps_memory_limit;        //  each server's --memory-limit, or NULL
    bool local_evaluator;
    bool no_evaluator;          //  --no-evaluator: a worker evaluates
    int local_cores;            //  --cores: the cores to split; 0: detected
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
    ps_jobflags_t *jobflags;
    const char *local_only;     //  the first option given that only a local cluster reads
} s_options_t;

//  Option keys, of the main command and the subcommands: the letters are
//  the short forms.
enum {
    O_CLUSTER = 'c', O_KEYS = 'k', O_JOB = 'j', O_WORKERS = 'w', O_PS = 'p', O_LOCAL = 'l',
    O_RESUME = 'r', O_OUT = 'o', O_MODEL = 'm',
    O_PS_MEMORY_LIMIT = 256, O_EVALUATOR, O_NO_EVALUATOR, O_CORES, O_NO_RESTART, O_KEEP_RUN_DIR,
    O_DATA_PLANE, O_LOG_DIR,
    O_CLUSTER_RESOLVER, O_METRICS, O_INSECURE, O_AS, O_TIMEOUT_MS, O_CHECKPOINT, O_FORMAT,
    O_METRICS_PORT, O_METRICS_ADDR, O_WIDTH, O_HEIGHT,
};

static const struct argp_option s_options [] = {
    { NULL, 0, NULL, 0, "Cluster:", 1 },
    { "local", O_LOCAL, NULL, 0, "Start the servers and workers here, on 127.0.0.1", 1 },
    { "ps", O_PS, "N", 0,
      "Servers of a local cluster (default 2; none in mirrored mode, where every worker "
      "holds the variables)", 1 },
    { "ps-memory-limit", O_PS_MEMORY_LIMIT, "BYTES", 0,
      "Each local server's --memory-limit (K, M, G): the most its embedding tables may "
      "hold; a run whose rows do not fit fails at once, naming the server", 1 },
    { "workers", O_WORKERS, "N", 0, "Workers of a local cluster (default 2)", 1 },
    { "evaluator", O_EVALUATOR, NULL, 0,
      "A local cluster also runs an evaluator task (the default where the mode has one: on "
      "2 cores of its own where the cores allow, else in their idle time)", 1 },
    { "no-evaluator", O_NO_EVALUATOR, NULL, 0,
      "No evaluator task: a worker evaluates, and stops training meanwhile", 1 },
    { "cores", O_CORES, "N", 0,
      "The cores a local cluster shares among its processes' threads (default: those this "
      "process may use; README, Training on a cluster)", 1 },
    { "no-restart", O_NO_RESTART, NULL, 0, "Do not restart local children that die", 1 },
    { "log-dir", O_LOG_DIR, "DIR", 0,
      "Local children's logs (default a new /tmp/ps-cluster-PID[-XXXXXX], a run directory "
      "removed with its logs and default checkpoints when the run completes; kept when it "
      "does not)", 1 },
    { "keep-run-dir", O_KEEP_RUN_DIR, NULL, 0,
      "Keep the default run directory after a completed run", 1 },
    { "cluster", O_CLUSTER, "FILE", 0, "The cluster spec (TF_CONFIG's JSON); default: TF_CONFIG",
      1 },
    { "cluster-resolver", O_CLUSTER_RESOLVER, "slurm[:ps=N][,evaluator][,port=P]", 0,
      "The cluster from the Slurm job step this runs in, as its task 0; servers and workers "
      "that die are relaunched into the job with srun (README.md, Running on Slurm). Needs "
      "--checkpoint-dir on shared storage", 1 },
    { NULL, 0, NULL, 0, "Security:", 2 },
    { "keys", O_KEYS, "DIR", 0,
      "The cluster's CurveZMQ keys (public/ and chief-0's secret certificate; README.md, "
      "Security). --local makes a fresh set per run unless given one", 2 },
    { "insecure", O_INSECURE, NULL, 0,
      "No authentication, no encryption, for every process (warns at start)", 2 },
    { "data-plane", O_DATA_PLANE, "P", 0,
      "curve (default) or plain: a local cluster's servers' connections authenticated by "
      "passwords and not encrypted, for a network no one else reaches (faster; README "
      "Security)", 2 },
    { NULL, 0, NULL, 0, "Run:", 3 },
    { "job", O_JOB, "FILE", 0, "The job file (schemas/job.md); the job flags override it", 3 },
    { "resume", O_RESUME, NULL, 0,
      "Resume from the newest valid checkpoint (required to exist)", 3 },
    { "metrics", O_METRICS, "FILE", 0,
      "JSON lines: progress, evaluations, checkpoints, failures, done", 3 },
    { "metrics-port", O_METRICS_PORT, "PORT", 0,
      "Serve /metrics in the Prometheus text format on PORT (0: any free port, logged); off "
      "by default", 3 },
    { "metrics-addr", O_METRICS_ADDR, "ADDR", 0,
      "The address it listens on (default 127.0.0.1)", 3 },
    { NULL, 0, NULL, 0, "Output:", -1 },
    { 0 },
};

//  The long name of one of the main command's options.
static const char *
s_option_name (int key)
{
    for (int i = 0; s_options [i].name || s_options [i].doc; i++)
        if (s_options [i].name && s_options [i].key == key)
            return s_options [i].name;
    return "?";
}

//  Parse --data-plane: curve or plain. Returns 0, or an error code with
//  *err saying why.
static int
s_data_plane (const char *text, bool *plain, ps_error_t *err)
{
    if (strcmp (text, "curve") && strcmp (text, "plain"))
        return ps_error_set (err, PS_EINVAL, "--data-plane \"%s\": expected curve or plain",
                             text);
    *plain = strcmp (text, "plain") == 0;
    return 0;
}

static error_t
s_parse (int key, char *arg, struct argp_state *state)
{
    s_options_t *opt = state->input;
    ps_error_t err;
    uint64_t u;
    int rc = PS_OK;
    //  A cluster from TF_CONFIG or a file lists its own tasks: these
    //  options would mean nothing to it, and are refused after parsing.
    if (!opt->local_only
    &&  (key == O_PS || key == O_WORKERS || (key >= O_PS_MEMORY_LIMIT && key <= O_LOG_DIR)))
        opt->local_only = s_option_name (key);
    switch (key) {
        case ARGP_KEY_INIT: state->child_inputs [0] = opt->jobflags; break;
        case O_LOCAL: opt->local = true; break;
        case O_EVALUATOR: opt->local_evaluator = true; break;
        case O_NO_EVALUATOR: opt->no_evaluator = true; break;
        case O_CORES:
            if ((rc = ps_parse_uint ("--cores", arg, 1, 4096, &u, &err)) == PS_OK)
                opt->local_cores = (int) u;
            break;
        case O_NO_RESTART: opt->restart = false; break;
        case O_KEEP_RUN_DIR: opt->keep_run_dir = true; break;
        case O_LOG_DIR: opt->log_dir = arg; break;
        case O_CLUSTER: opt->cluster_file = arg; break;
        case O_CLUSTER_RESOLVER: opt->resolver = arg; break;
        case O_JOB: opt->job_file = arg; break;
        case O_RESUME: opt->resume = true; break;
        case O_METRICS: opt->metrics = arg; break;
        case O_METRICS_ADDR: opt->metrics_addr = arg; break;
        case O_KEYS: opt->keys_dir = arg; break;
        case O_INSECURE: opt->insecure = true; break;
        case O_DATA_PLANE: rc = s_data_plane (arg, &opt->plain, &err); break;
        case O_METRICS_PORT:
            if ((rc = ps_parse_uint ("--metrics-port", arg, 0, 65535, &u, &err)) == PS_OK)
                opt->metrics_port = (int) u;
            break;
        case O_PS_MEMORY_LIMIT:
            if ((rc = ps_parse_bytes ("--ps-memory-limit", arg, &u, &err)) == PS_OK)
                opt->ps_memory_limit = arg;
            break;
        case O_PS:
        case O_WORKERS:
            if ((rc = ps_parse_uint (key == O_PS ? "--ps" : "--workers", arg, 1, S_MAX_TASKS, &u,
                                     &err)) == PS_OK)
                *(key == O_PS ? &opt->local_ps : &opt->local_workers) = (int) u;
            break;
        default:
            return ARGP_ERR_UNKNOWN;
    }
    if (rc)
        argp_error (state, "%s", err.msg);
    return 0;
}

static const struct argp_child s_children [] = {
    { &ps_jobflags_argp, 0, NULL, 4 },
    { &ps_cli_common, 0, NULL, -1 },
    { 0 },
};

static const struct argp s_argp = {
    s_options, s_parse,
    "--local\n"
    "[--cluster FILE]\n"
    "keygen|ping|export|plot [OPTION...]",
    "Trains a model on a parameter-server cluster: registers the servers and workers, places "
    "the variables, hands out steps, survives failures, takes checkpoints and reports "
    "progress (schemas/job.md). The cluster comes from --local, --cluster FILE, "
    "--cluster-resolver or TF_CONFIG.\v"
    "Subcommands (each has its own --help):\n"
    "  keygen   a cluster's keys\n"
    "  ping     a probe: exit 0 when a server, or every one, answers a ping\n"
    "  export   a checkpoint's weights as one safetensors or npz file\n"
    "  plot     draw a metrics file with gnuplot\n"
    "\n"
    "A local cluster without --checkpoint-dir checkpoints into its log directory every 30 s, "
    "so that a failed server can be recovered; its servers get the checkpoint directory as "
    "their --checkpoint-root. Servers started by hand need --checkpoint-root set to the "
    "coordinator's --checkpoint-dir (shared storage), which the coordinator checks at start.\n"
    "Ctrl-C (SIGINT) or SIGTERM writes a final checkpoint, stops every process and exits 130 "
    "(143); a second signal stops at once. Exit status 0 means the training completed.",
    s_children, NULL, NULL,
};

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

//  A subcommand's argv for ps_cli_parse: argv [0] names the subcommand
//  ("coordinator keygen"), so that its messages and its help do.
static void
s_subcommand_name (char *argv [], char *name, size_t len)
{
    snprintf (name, len, "coordinator %s", argv [0]);
    argv [0] = name;
}

//  coordinator keygen's command line.
typedef struct {
    const char *out, *cluster;
    int nps, nworkers, nevaluators;
    bool plain;
} s_keygen_args_t;

static const struct argp_option s_keygen_options [] = {
    { "out", O_OUT, "DIR", 0, "The key directory to make (required; new or empty)", 1 },
    { "cluster", O_CLUSTER, "FILE", 0,
      "The tasks of this cluster spec (default: TF_CONFIG's, unless --ps and --workers give "
      "counts)", 1 },
    { "ps", O_PS, "N", 0, "Servers (0 or more)", 1 },
    { "workers", O_WORKERS, "N", 0, "Workers (1 or more)", 1 },
    { "evaluator", O_EVALUATOR, NULL, 0, "An evaluator task too", 1 },
    { "data-plane", O_DATA_PLANE, "P", 0,
      "curve (default) or plain: the servers' connections authenticated by passwords and "
      "not encrypted (README.md, Security)", 1 },
    { NULL, 0, NULL, 0, "Output:", -1 },
    { 0 },
};

static error_t
s_keygen_parse (int key, char *arg, struct argp_state *state)
{
    s_keygen_args_t *args = state->input;
    ps_error_t err;
    uint64_t u;
    int rc = PS_OK;
    switch (key) {
        case O_OUT: args->out = arg; break;
        case O_CLUSTER: args->cluster = arg; break;
        case O_DATA_PLANE: rc = s_data_plane (arg, &args->plain, &err); break;
        case O_EVALUATOR: args->nevaluators = 1; break;
        case O_PS:
        case O_WORKERS:
            if ((rc = ps_parse_uint (key == O_PS ? "--ps" : "--workers", arg, 0, S_MAX_TASKS,
                                     &u, &err)) == PS_OK)
                *(key == O_PS ? &args->nps : &args->nworkers) = (int) u;
            break;
        case ARGP_KEY_END:
            if (!args->out)
                argp_error (state, "--out DIR is required");
            break;
        default:
            return ARGP_ERR_UNKNOWN;
    }
    if (rc)
        argp_error (state, "%s", err.msg);
    return 0;
}

static const struct argp s_keygen_argp = {
    s_keygen_options, s_keygen_parse, NULL,
    "Makes a cluster's key directory: a CurveZMQ certificate for every task of the cluster "
    "spec, or of the counts given, with chief:0 first (README.md, Security).\v"
    "Hand each process DIR/public/, its own DIR/<role>-<index>.cert_secret and "
    "DIR/<role>-<index>.password, and each server DIR/passwords.",
    ps_cli_children, NULL, NULL,
};

//  coordinator keygen: make a cluster's key directory (ps_curve.h), for
//  the tasks of a cluster spec or of the counts given. Returns the exit
//  status.
static int
s_keygen (int argc, char *argv [])
{
    char name [64];
    s_subcommand_name (argv, name, sizeof name);
    s_keygen_args_t args = { .nps = -1, .nworkers = -1 };
    ps_cli_parse (&s_keygen_argp, argc, argv, &args);
    const char *out = args.out, *cluster = args.cluster;
    int nps = args.nps, nworkers = args.nworkers, nevaluators = args.nevaluators;
    ps_error_t err;
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
    int rc = ps_curve_keygen (out, (const char *const *) tasks, n, args.plain, &err);
    s_tasks_free (tasks, n);
    if (rc) {
        fprintf (stderr, "coordinator keygen: %s\n", err.msg);
        return 1;
    }
    printf ("keys for chief:0, %d ps, %d worker and %d evaluator tasks in %s: hand each process "
            "%s/public/ and its own %s/<role>-<index>.cert_secret and .password (a server: "
            "%s/passwords) (README.md, Security)\n", nps, nworkers, nevaluators, out, out, out,
            out);
    return 0;
}

//  coordinator ping's command line.
typedef struct {
    const char *cluster, *as, *keys_dir, *target;
    bool insecure;
    uint64_t timeout_ms;
} s_ping_args_t;

static const struct argp_option s_ping_options [] = {
    { "cluster", O_CLUSTER, "FILE", 0, "The cluster spec (default: TF_CONFIG)", 1 },
    { "as", O_AS, "TYPE:INDEX", 0,
      "The task to ping as, whose keys are used (default: the spec's task)", 1 },
    { "keys", O_KEYS, "DIR", 0, "The cluster's keys (README.md, Security)", 1 },
    { "insecure", O_INSECURE, NULL, 0, "No authentication, no encryption", 1 },
    { "timeout-ms", O_TIMEOUT_MS, "N", 0, "How long to wait for each answer (default 2000)",
      1 },
    { NULL, 0, NULL, 0, "Output:", -1 },
    { 0 },
};

static error_t
s_ping_parse (int key, char *arg, struct argp_state *state)
{
    s_ping_args_t *args = state->input;
    ps_error_t err;
    switch (key) {
        case O_CLUSTER: args->cluster = arg; break;
        case O_AS: args->as = arg; break;
        case O_KEYS: args->keys_dir = arg; break;
        case O_INSECURE: args->insecure = true; break;
        case O_TIMEOUT_MS:
            if (ps_parse_uint ("--timeout-ms", arg, 1, 600000, &args->timeout_ms, &err))
                argp_error (state, "%s", err.msg);
            break;
        case ARGP_KEY_ARG:
            if (args->target)
                argp_error (state, "unexpected argument '%s': expected one target, ps:INDEX "
                            "or ps (every server)", arg);
            args->target = arg;
            break;
        case ARGP_KEY_END:
            if (!args->target)
                argp_error (state, "expected one target, ps:INDEX or ps (every server)");
            break;
        default:
            return ARGP_ERR_UNKNOWN;
    }
    return 0;
}

static const struct argp s_ping_argp = {
    s_ping_options, s_ping_parse, "ps[:INDEX]",
    "Sends the protocol's ping to a ps task, or to every one (ps), from this process's task "
    "(TF_CONFIG's, or --as) with its keys: a probe for deploy/k8s.\v"
    "Exit status 0 when each server answered ping_ok in time, 1 when one did not, 2 on a "
    "usage mistake.",
    ps_cli_children, NULL, NULL,
};

//  coordinator ping: the protocol's ping to a ps task, or to every one,
//  from this process's task (TF_CONFIG's, or --as) with its keys
//  (ps_probe.h), for the probes of deploy/k8s. Exit status 0 when each
//  answered ping_ok in time, 1 when one did not, 2 on a usage mistake.
static int
s_ping (int argc, char *argv [])
{
    char name [64];
    s_subcommand_name (argv, name, sizeof name);
    s_ping_args_t args = { .timeout_ms = 2000 };
    ps_cli_parse (&s_ping_argp, argc, argv, &args);
    const char *cluster = args.cluster, *as = args.as, *keys_dir = args.keys_dir;
    bool insecure = args.insecure;
    uint64_t timeout_ms = args.timeout_ms;
    ps_error_t err;
    //  The target: "ps" alone, or "ps:INDEX" read as --task is.
    const char *target = args.target;
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

//  coordinator export's command line.
typedef struct {
    const char *checkpoint, *format, *out, *model;
} s_export_args_t;

static const struct argp_option s_export_options [] = {
    { "checkpoint", O_CHECKPOINT, "DIR", 0,
      "The checkpoint: a run's checkpoint directory (its newest valid checkpoint) or one "
      "checkpoint in it (required)", 1 },
    { "format", O_FORMAT, "safetensors|npz", 0, "The file's format (required)", 1 },
    { "out", O_OUT, "FILE", 0, "The file to write (required)", 1 },
    { "model", O_MODEL, "NAME|FILE", 0,
      "The model, when the checkpoint does not name it", 1 },
    { NULL, 0, NULL, 0, "Output:", -1 },
    { 0 },
};

static error_t
s_export_parse (int key, char *arg, struct argp_state *state)
{
    s_export_args_t *args = state->input;
    switch (key) {
        case O_CHECKPOINT: args->checkpoint = arg; break;
        case O_FORMAT: {
            ps_export_format_t format;
            ps_error_t err;
            if (ps_export_format_parse (arg, &format, &err))
                argp_error (state, "%s", err.msg);
            args->format = arg;
            break;
        }
        case O_OUT: args->out = arg; break;
        case O_MODEL: args->model = arg; break;
        case ARGP_KEY_END:
            if (!args->checkpoint || !args->format || !args->out)
                argp_error (state, "%s", !args->checkpoint ? "--checkpoint DIR is required"
                            : !args->format ? "--format safetensors|npz is required"
                            : "--out FILE is required");
            break;
        default:
            return ARGP_ERR_UNKNOWN;
    }
    return 0;
}

static const struct argp s_export_argp = {
    s_export_options, s_export_parse, NULL,
    "Writes a checkpoint's weights (the trained variables) as one safetensors or npz file.\v"
    "Every dense variable goes in under its model-spec name (conv2d/kernel), and every "
    "embedding table of a click-through-rate model as TABLE/ids (uint64, ascending) and "
    "TABLE/embeddings (float32, a row per id), with the model spec as metadata (README.md, "
    "Export and predict).",
    ps_cli_children, NULL, NULL,
};

//  coordinator export: a checkpoint's weights as one safetensors or npz
//  file (ps_export.h). Returns the exit status: 2 for bad usage, 1 when
//  the checkpoint cannot be read or the file written.
static int
s_export (int argc, char *argv [])
{
    char name [64];
    s_subcommand_name (argv, name, sizeof name);
    s_export_args_t args = { 0 };
    ps_cli_parse (&s_export_argp, argc, argv, &args);
    const char *checkpoint = args.checkpoint, *format_text = args.format, *out = args.out;
    const char *model = args.model;
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
    char tables [96] = "";
    if (result.tables > 0)
        snprintf (tables, sizeof tables, " and %d embedding table%s (%llu rows)", result.tables,
                  result.tables == 1 ? "" : "s", (unsigned long long) result.table_rows);
    printf ("exported %d variables%s of checkpoint %s (step %llu) to %s\n", result.variables,
            tables, result.dir, (unsigned long long) result.step, out);
    return 0;
}

//  Make a local cluster's default run directory, in dir (len bytes): one
//  that no earlier run has used, since a completed run removes it with
//  everything in it. /tmp/ps-cluster-PID, unless a directory of that name
//  is left from an earlier run (a run that did not complete keeps its
//  own, and process ids come round again); then /tmp/ps-cluster-PID-
//  and six random characters, opened to others' reading as the first
//  name is (mkdtemp makes it the owner's only). Returns 0, or -1 after
//  saying why not, with dir empty: the end of the run must remove
//  nothing, the name being another's or nobody's.
static int
s_new_run_dir (char *dir, size_t len)
{
    char name [64];
    snprintf (name, sizeof name, "/tmp/ps-cluster-%d", (int) getpid ());
    int rc = mkdir (name, 0755);
    if (rc != 0 && errno == EEXIST) {
        snprintf (name, sizeof name, "/tmp/ps-cluster-%d-XXXXXX", (int) getpid ());
        rc = mkdtemp (name) ? 0 : -1;
        if (rc == 0 && chmod (name, 0755) != 0) {
            int code = errno;
            if (rmdir (name) != 0)
                ps_warn ("cannot remove %s: %s", name, strerror (errno));
            errno = code;
            rc = -1;
        }
    }
    if (rc != 0) {
        fprintf (stderr, "coordinator: cannot create the run directory %s: %s\n", name,
                 strerror (errno));
        *dir = 0;
        return -1;
    }
    snprintf (dir, len, "%s", name);
    return 0;
}

//  The job: defaults (for nps servers), the file, then the flags; for a
//  local cluster also its log directory (made here) and default
//  checkpoints. Returns 0, or -1 after saying what is wrong.
static int
s_load_job (ps_job_t *job, int nps, const s_options_t *opt, char *log_dir, size_t log_len)
{
    ps_error_t err;
    ps_job_default (job, nps);
    if (opt->job_file && ps_job_load_file (job, opt->job_file, &err)) {
        fprintf (stderr, "coordinator: %s\n", err.msg);
        return -1;
    }
    if (ps_jobflags_apply (opt->jobflags, job, &err)) {
        fprintf (stderr, "coordinator: %s\n", err.msg);
        return -1;
    }
    if (opt->local) {
        //  The default directories are new for every run, so there would be
        //  nothing to resume from.
        if (opt->resume && !opt->log_dir && !*job->checkpoint_dir) {
            fprintf (stderr, "coordinator: --local --resume needs the --checkpoint-dir (or "
                     "--log-dir) of the run to resume\n");
            return -1;
        }
        if (opt->log_dir) {
            snprintf (log_dir, log_len, "%s", opt->log_dir);
            if (mkdir (log_dir, 0755) != 0 && errno != EEXIST) {
                fprintf (stderr, "coordinator: cannot create %s: %s\n", log_dir,
                         strerror (errno));
                return -1;
            }
        }
        else
        if (s_new_run_dir (log_dir, log_len) != 0)
            return -1;
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

//  coordinator plot's command line, into the plot's configuration.
static const struct argp_option s_plot_options [] = {
    { "out", O_OUT, "FILE.png", 0, "The picture to write (required)", 1 },
    { "width", O_WIDTH, "W", 0, "Its width in pixels, 100..10000 (default 1000)", 1 },
    { "height", O_HEIGHT, "H", 0, "Its height in pixels, 100..10000 (default 750)", 1 },
    { NULL, 0, NULL, 0, "Output:", -1 },
    { 0 },
};

static error_t
s_plot_parse (int key, char *arg, struct argp_state *state)
{
    ps_plot_config_t *cfg = state->input;
    ps_error_t err;
    uint64_t u;
    switch (key) {
        case O_OUT: cfg->out_path = arg; break;
        case O_WIDTH:
        case O_HEIGHT:
            if (ps_parse_uint (key == O_WIDTH ? "--width" : "--height", arg, 100, 10000, &u,
                               &err))
                argp_error (state, "%s", err.msg);
            *(key == O_WIDTH ? &cfg->width : &cfg->height) = (int) u;
            break;
        case ARGP_KEY_ARG:
            if (cfg->metrics_path)
                argp_error (state, "unexpected argument '%s': one metrics file only", arg);
            cfg->metrics_path = arg;
            break;
        case ARGP_KEY_END:
            if (!cfg->out_path || !cfg->metrics_path)
                argp_error (state, "%s", !cfg->out_path ? "--out FILE is required"
                                                        : "which metrics file?");
            break;
        default:
            return ARGP_ERR_UNKNOWN;
    }
    return 0;
}

static const struct argp s_plot_argp = {
    s_plot_options, s_plot_parse, "METRICS.jsonl",
    "Draws a metrics file (--metrics) with gnuplot: loss, accuracy and throughput over the "
    "steps, with the evaluations, failures and recoveries marked.",
    ps_cli_children, NULL, NULL,
};

//  coordinator plot METRICS --out PNG: draw a metrics file (ps_plot.h).
//  Returns the exit status.
static int
s_plot (int argc, char *argv [])
{
    char name [64];
    s_subcommand_name (argv, name, sizeof name);
    ps_plot_config_t cfg = { .width = 1000, .height = 750 };
    ps_cli_parse (&s_plot_argp, argc, argv, &cfg);
    ps_error_t err;
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

//  The main command: the run its options describe. Returns the exit
//  status.
static int
s_run (s_options_t opt)
{
    ps_error_t err;
    if (opt.local_only && !opt.local) {
        fprintf (stderr, "coordinator: --%s is for --local (a cluster from TF_CONFIG or "
                 "--cluster FILE lists its own tasks)\n", opt.local_only);
        return 2;
    }
    if (opt.plain && (opt.keys_dir || opt.insecure)) {
        fprintf (stderr, "coordinator: --data-plane plain chooses how a local cluster's own keys "
                 "are made; %s\n", opt.insecure ? "--insecure has none"
                 : "with --keys the keys decide (coordinator keygen --data-plane plain)");
        return 2;
    }
    if (opt.metrics_addr && opt.metrics_port < 0) {
        fprintf (stderr, "coordinator: --metrics-addr says where the Prometheus endpoint "
                 "listens; it needs --metrics-port\n");
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
    ps_cores_split_t split = { 0 };     //  a local cluster's threads

    ps_coord_config_t config;
    memset (&config, 0, sizeof config);
    //  The cluster: generated for a local run, else from TF_CONFIG or a file.
    //  A local cluster's servers depend on the job's mode, so its job is
    //  read first.
    if (opt.local) {
        //  TF_CONFIG may be in the environment for other programs.
        if (getenv ("TF_CONFIG"))
            ps_info ("--local: ignoring TF_CONFIG");
        if (s_load_job (&config.job, opt.local_ps < 0 ? 2 : opt.local_ps, &opt,
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
        if (opt.local_evaluator && opt.no_evaluator) {
            fprintf (stderr, "coordinator: --evaluator and --no-evaluator: give one\n");
            goto done;
        }
        //  The cluster's processes share this machine's cores: threads
        //  sized so that they do not oversubscribe them, unless the job
        //  sets the workers'; an evaluator where the mode has one, in the
        //  cores' idle time where none is left for it.
        char cores_source [32] = "--cores";
        int cores = opt.local_cores > 0 ? opt.local_cores
                    : ps_cpus_available (cores_source, sizeof cores_source);
        ps_cores_split (cores, nworkers, nps, !mode->no_evaluator && !opt.no_evaluator, &split);
        if (!config.job.worker_threads_given)
            config.job.worker_threads = split.worker_threads;
        nevaluators = split.evaluator ? 1 : 0;
        config.idle_evaluator = split.evaluator_idle;
        char evaluator [96] = ", no evaluator";
        if (nevaluators)
            snprintf (evaluator, sizeof evaluator, ", an evaluator of %d compute threads%s",
                      split.evaluator_threads,
                      split.evaluator_idle ? " in the cores' idle time" : "");
        ps_info ("local cluster on %d cores (%s): %d workers of %d compute threads%s, %d "
                 "servers of %d apply threads%s, %d ZeroMQ I/O thread per process", cores,
                 cores_source, nworkers, config.job.worker_threads,
                 config.job.worker_threads_given ? " (as the job says)" : "", nps,
                 split.server_threads, evaluator, split.io_threads);
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
    if (!opt.local && s_load_job (&config.job, nps, &opt, log_dir,
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
                                       opt.keys_dir, &split, opt.ps_memory_limit,
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
                                       NULL, NULL, NULL, &err)) {
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
    //  --quiet: no progress line either.
    config.progress_tty = isatty (STDERR_FILENO) && !ps_cli_quiet ();
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
    return exit_code;
}

int
main (int argc, char *argv [])
{
    ps_cli_init ("coordinator");
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
                        .metrics_port = -1, .jobflags = ps_jobflags_new () };
    ps_cli_parse (&s_argp, argc, argv, &opt);
    int exit_code = s_run (opt);
    ps_jobflags_destroy (&opt.jobflags);
    return exit_code;
}
