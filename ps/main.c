//  ps-server: the parameter server process. Parses its options (or the
//  TF_CONFIG environment variable), then serves until SIGTERM, SIGINT or a
//  shutdown request.

#include "ps_address.h"
#include "ps_cli.h"
#include "ps_curve.h"
#include "ps_cpus.h"
#include "ps_floats.h"
#include "ps_heap.h"
#include "ps_host.h"
#include "ps_link.h"
#include "ps_log.h"
#include "ps_parse.h"
#include "ps_server.h"
#include "ps_signal.h"
#include "ps_slurm.h"
#include "ps_tfconfig.h"

#include <errno.h>
#include <float.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

//  The command line, read by argp (ps_cli.h) into this.
typedef struct {
    const char *bind;
    const char *cluster_file;
    const char *resolver;
    const char *task_text;
    const char *endpoint_file;
    const char *keys_dir;
    bool insecure;
    const char *checkpoint_root;
    const char *opt_kind;
    double lr;
    long threads;
    double max_mb;
    double pending_mb;
    double peer_pending_mb;
    uint64_t memory_limit;
    uint64_t stop_grace;
} s_args_t;

//  Keys of the options without a short form.
enum {
    O_RESOLVER = 256, O_MAX_MESSAGE, O_MAX_PENDING, O_MAX_PEER_PENDING, O_MEMORY_LIMIT,
    O_OPTIMIZER, O_LR, O_ENDPOINT_FILE, O_INSECURE, O_STOP_GRACE,
};

static const struct argp_option s_options [] = {
    { NULL, 0, NULL, 0, "Where it serves, and its cluster:", 1 },
    { "bind", 'b', "ENDPOINT", 0,
      "ZeroMQ endpoint to serve on, tcp://HOST:PORT or ipc://PATH; HOST is an IP address, "
      "a name (bound at the address it resolves to) or * for every interface; PORT is "
      "1..65535, or 0 or * for a free port. Without --bind the address comes from "
      "TF_CONFIG (task.type \"ps\"), bound the same way.", 1 },
    { "cluster", 'c', "FILE", 0,
      "Read the cluster spec from FILE instead of TF_CONFIG (same JSON). When the spec "
      "has a chief, the server registers with it and heartbeats (the coordinator).", 1 },
    { "cluster-resolver", O_RESOLVER, "slurm[:ps=N][,evaluator][,port=P]", 0,
      "The cluster spec and this task from the Slurm job step it runs in (README.md, "
      "Running on Slurm)", 1 },
    { "task", 't', "ps:N", 0,
      "This server's task, when the spec names none (a file shared by every process), or "
      "when it serves alone", 1 },
    { "endpoint-file", O_ENDPOINT_FILE, "FILE", 0,
      "Write the bound endpoint to FILE (for scripts)", 1 },
    { "stop-grace", O_STOP_GRACE, "SECONDS", 0,
      "After a stop signal, a server registered with a coordinator serves on until the "
      "coordinator's final checkpoint is written and it says stop, or it falls silent, or "
      "SECONDS pass (default 30; 0 stops at once): docker compose stop, scancel and "
      "Kubernetes signal every process at once. A second signal stops at once.", 1 },
    { NULL, 0, NULL, 0, "Security:", 2 },
    { "keys", 'k', "DIR", 0,
      "The cluster's CurveZMQ keys: DIR/public/ and this task's secret certificate "
      "(README.md, Security)", 2 },
    { "insecure", O_INSECURE, NULL, 0, "No authentication, no encryption (warns at start)", 2 },
    { NULL, 0, NULL, 0, "Resources:", 3 },
    { "threads", 'T', "N", 0,
      "Apply pool threads (default: the cores it may use, the fewest of the CPUs online, "
      "its CPU affinity and the cgroup v2 quota; 0 applies every update on the serving "
      "thread)", 3 },
    { "max-message", O_MAX_MESSAGE, "MB", 0,
      "Largest frame accepted, in MiB (default 2048); a peer sending more is disconnected "
      "by ZeroMQ", 3 },
    { "max-peer-pending", O_MAX_PEER_PENDING, "MB", 0,
      "Bytes one peer may have the server hold for it (its requests in progress and "
      "replies not yet sent), in MiB (default: half of --max-pending); above it the peer's "
      "requests are refused (error too_big), and once those refusals go unread too, "
      "dropped. Other peers are served as usual. Must exceed what one client has in "
      "flight: its share of the model on this server, twice with overlapping pushes.", 3 },
    { "max-pending", O_MAX_PENDING, "MB", 0,
      "The same for all peers together, in MiB (default 1024); above it a peer holding "
      "more than an equal share is refused", 3 },
    { "memory-limit", O_MEMORY_LIMIT, "BYTES", 0,
      "The most memory the embedding tables may hold (K, M, G: times 1024, 1024^2, "
      "1024^3; default: no limit). A sparse push that could take them past it (each of "
      "its ids without a row creating one) is refused whole, error too_big naming the "
      "limit and the table; the server keeps serving. Rlimits are left to the caller "
      "(prlimit --data).", 3 },
    { NULL, 0, NULL, 0, "Checkpoints and training:", 4 },
    { "checkpoint-root", 'r', "DIR", 0,
      "The directory snapshots are written in and restored from (created when missing): "
      "snapshot and restore requests name a directory relative to it, and nothing outside "
      "it is read or written. Without it both are refused. A coordinator's "
      "--checkpoint-dir (the same shared directory) is what its servers need here.", 4 },
    { "optimizer", O_OPTIMIZER, "KIND", 0,
      "sgd, momentum, adagrad or adam (default sgd) until a client sets one", 4 },
    { "lr", O_LR, "RATE", 0, "Learning rate for --optimizer (default: Keras default)", 4 },
    { NULL, 0, NULL, 0, "Output:", -1 },
    { 0 },
};

static error_t
s_parse (int key, char *arg, struct argp_state *state)
{
    s_args_t *args = state->input;
    ps_error_t err;
    uint64_t n;
    int rc = PS_OK;
    switch (key) {
        case 'b': args->bind = arg; break;
        case 'c': args->cluster_file = arg; break;
        case O_RESOLVER: args->resolver = arg; break;
        case 't': args->task_text = arg; break;
        case O_ENDPOINT_FILE: args->endpoint_file = arg; break;
        case 'r': args->checkpoint_root = arg; break;
        case O_OPTIMIZER: args->opt_kind = arg; break;
        case 'k': args->keys_dir = arg; break;
        case O_INSECURE: args->insecure = true; break;
        case 'T':
            if ((rc = ps_parse_uint ("--threads", arg, 0, 256, &n, &err)) == PS_OK)
                args->threads = (long) n;
            break;
        case O_MAX_MESSAGE:
            rc = ps_parse_double ("--max-message", arg, 0, true, 1e7, &args->max_mb, &err);
            break;
        case O_MAX_PENDING:
            rc = ps_parse_double ("--max-pending", arg, 0, true, 1e7, &args->pending_mb, &err);
            break;
        case O_MAX_PEER_PENDING:
            rc = ps_parse_double ("--max-peer-pending", arg, 0, true, 1e7,
                                  &args->peer_pending_mb, &err);
            break;
        case O_STOP_GRACE:
            rc = ps_parse_uint ("--stop-grace", arg, 0, 86400, &args->stop_grace, &err);
            break;
        case O_MEMORY_LIMIT:
            rc = ps_parse_bytes ("--memory-limit", arg, &args->memory_limit, &err);
            break;
        case O_LR:
            rc = ps_parse_double ("--lr", arg, 0, true, DBL_MAX, &args->lr, &err);
            break;
        default:
            return ARGP_ERR_UNKNOWN;
    }
    if (rc)
        argp_error (state, "%s", err.msg);
    return 0;
}

static const struct argp s_argp = {
    s_options, s_parse, NULL,
    "Holds partitions of model variables, serves pulls and applies pushed gradients "
    "asynchronously (protocol: schemas/protocol.json).\v"
    "Prints the bound endpoint on stdout as \"ps-server listening on ENDPOINT\". SIGTERM or "
    "SIGINT finishes the updates in progress and exits 0. With --verbose it logs every "
    "request (type, id, tensor bytes).",
    ps_cli_children, NULL, NULL,
};

int
main (int argc, char *argv [])
{
    ps_cli_init ("ps-server");
    ps_floats_flush_subnormals ();
    s_args_t args = {
        .opt_kind = "sgd", .threads = ps_cpus_available (NULL, 0), .max_mb = 2048,
        .pending_mb = 1024, .stop_grace = 30,
    };
    ps_cli_parse (&s_argp, argc, argv, &args);
    ps_error_t err;
    if (ps_heap_tune (&err))
        ps_warn ("%s; large messages will be slower", err.msg);
    if (ps_heap_one_arena (&err))
        ps_warn ("%s; the server's peak memory will be higher", err.msg);
    //  The endpoint to bind: --bind, checked and with a host name resolved,
    //  or else the task's address in the cluster spec.
    char endpoint [256];
    if (args.bind && ps_address_bind_option (args.bind, endpoint, sizeof endpoint, &err)) {
        fprintf (stderr, "ps-server: --bind \"%s\": %s\n", args.bind, err.msg);
        return 2;
    }
    //  The cluster spec gives the address to bind (unless --bind says
    //  otherwise) and, when it has a chief, the coordinator to register with.
    //  A TF_CONFIG that is set is read even with --bind, and a mistake in it
    //  is refused rather than ignored: the server would not register.
    char coordinator [256] = "";
    char name [64] = "ps";
    int task_index = 0;
    bool tf_task = false;       //  the spec named this server's task
    ps_tfconfig_t *tf = NULL;
    if (args.cluster_file && args.resolver) {
        fprintf (stderr, "ps-server: --cluster FILE and --cluster-resolver: give one or the "
                 "other\n");
        return 2;
    }
    const char *source = args.resolver ? "--cluster-resolver"
                       : args.cluster_file ? args.cluster_file : "TF_CONFIG";
    if (args.resolver)
        tf = ps_slurm_tfconfig (args.resolver, NULL, &err);
    else
    if (args.cluster_file)
        tf = ps_tfconfig_from_file (args.cluster_file, &err);
    else
        tf = ps_tfconfig_from_env (&err);
    if (!tf && (args.cluster_file || args.resolver || !args.bind || err.code != PS_ENOTFOUND)) {
        fprintf (stderr, "ps-server: %s%s\n",
                 args.bind || args.cluster_file || args.resolver ? "" : "no --bind given and ",
                 err.msg);
        return 2;
    }
    if (tf) {
        int rc = PS_OK;
        char type [16];
        int index;
        if (args.task_text
        &&  (rc = ps_tfconfig_parse_task (args.task_text, type, sizeof type, &index,
                                          &err)) == PS_OK)
            rc = ps_tfconfig_set_task (tf, type, index, &err);
        if (rc == PS_OK && !args.bind)
            rc = ps_tfconfig_bind_endpoint (tf, "ps", endpoint, sizeof endpoint, &err);
        else
        if (rc == PS_OK
        &&  (!ps_tfconfig_task_type (tf) || strcmp (ps_tfconfig_task_type (tf), "ps") != 0))
            rc = ps_error_set (&err, PS_EINVAL, "task: expected type \"ps\"");
        task_index = ps_tfconfig_task_index (tf);
        tf_task = true;
        //  Without a chief the server serves alone, as with --bind.
        if (rc == PS_OK
        &&  (rc = ps_tfconfig_coordinator_endpoint (tf, coordinator, sizeof coordinator,
                                                    &err)) == PS_ENOTFOUND)
            rc = PS_OK;
        ps_tfconfig_destroy (&tf);
        if (rc) {
            fprintf (stderr, "ps-server: %s: %s\n", source, err.msg);
            return 2;
        }
    }
    //  A server alone (--bind, no spec) is task ps:0 unless --task says:
    //  its task names its key (--keys), since it registers with no one.
    if (!tf_task && args.task_text) {
        char type [16] = "";
        if (ps_tfconfig_parse_task (args.task_text, type, sizeof type, &task_index,
                                    &err) != PS_OK
        ||  (strcmp (type, "ps") != 0
             && ps_error_set (&err, PS_EINVAL, "--task %s: expected ps:N", args.task_text))) {
            fprintf (stderr, "ps-server: %s\n", err.msg);
            return 2;
        }
    }
    snprintf (name, sizeof name, "ps:%d", task_index);
    ps_server_config_t config = {
        .bind = endpoint, .name = name, .threads = (int) args.threads,
        .max_message = (int64_t) (args.max_mb * 1024 * 1024),
        .max_pending = (size_t) (args.pending_mb * 1024 * 1024),
        .max_peer_pending = (size_t) ((args.peer_pending_mb > 0 ? args.peer_pending_mb
                                                                : args.pending_mb / 2)
                                      * 1024 * 1024),
        .checkpoint_root = args.checkpoint_root, .memory_limit = args.memory_limit,
        //  Only a cluster's server is told of to its peers, through the
        //  coordinator, so only it serves same-host peers over ipc://.
        .same_host = *coordinator && ps_host_same_host (),
    };
    ps_opt_kind_t kind;
    if (ps_opt_kind_parse (args.opt_kind, &kind, &err)) {
        fprintf (stderr, "ps-server: --optimizer: %s\n", err.msg);
        return 2;
    }
    ps_opt_config_default (&config.opt, kind);
    if (args.lr > 0)
        config.opt.lr = args.lr;
    if (ps_curve_open (args.keys_dir, args.insecure, name, &config.curve, &err)) {
        fprintf (stderr, "ps-server: %s\n", err.msg);
        return 2;
    }
    //  Signals are blocked before any thread starts (ZeroMQ's included) and
    //  read through a signalfd in the serving loop, so shutdown happens
    //  between requests, never inside one.
    int rc = PS_EIO;
    ps_server_t *server = NULL;
    ps_link_t *link = NULL;
    int stop_fd = ps_signal_stop_fd (&err);
    if (stop_fd < 0) {
        fprintf (stderr, "ps-server: %s\n", err.msg);
        goto done;
    }
    server = ps_server_new (&config, &err);
    if (!server) {
        fprintf (stderr, "ps-server: %s\n", err.msg);
        goto done;
    }
    printf ("ps-server listening on %s\n", ps_server_endpoint (server));
    fflush (stdout);
    ps_info ("serving %s with %d apply threads%s", ps_server_advert (server),
             (int) args.threads,
             !config.curve ? ", UNSECURED" : ps_curve_plain (config.curve)
             ? ", a PLAIN data plane (not encrypted)" : ", CurveZMQ");
    //  The endpoint file comes last: whoever waits for it may read every
    //  line above at once.
    if (args.endpoint_file) {
        FILE *file = fopen (args.endpoint_file, "w");
        int code = file && fprintf (file, "%s\n", ps_server_endpoint (server)) >= 0 ? 0
                   : errno ? errno : EIO;
        if (file && fclose (file) != 0 && code == 0)
            code = errno ? errno : EIO;
        if (code) {
            fprintf (stderr, "ps-server: cannot write %s: %s\n", args.endpoint_file,
                     strerror (code));
            goto done;
        }
    }
    //  The link registers and heartbeats on its own thread, so the
    //  coordinator sees this server alive however busy the serving loop is,
    //  and sees a restarted server as a new incarnation.
    if (*coordinator) {
        ps_link_config_t link_config = {
            .coordinator = coordinator, .role = "ps", .index = task_index,
            .endpoint = ps_server_advert (server), .deliver = false, .curve = config.curve,
        };
        link = ps_link_new (&link_config, &err);
        if (!link) {
            fprintf (stderr, "ps-server: coordinator %s: %s\n", coordinator, err.msg);
            goto done;
        }
        ps_info ("registering with the coordinator at %s", coordinator);
        ps_server_set_stop_grace (server, (int) args.stop_grace * 1000, link);
    }
    rc = ps_server_run (server, stop_fd);
    ps_info ("stopped");
done:
    ps_link_destroy (&link);
    ps_server_destroy (&server);
    ps_curve_destroy (&config.curve);
    if (stop_fd >= 0)
        close (stop_fd);
    return rc == PS_OK ? 0 : 1;
}
