//  ps-server: the parameter server process. Parses its options (or the
//  TF_CONFIG environment variable), then serves until SIGTERM, SIGINT or a
//  shutdown request.

#include "ps_address.h"
#include "ps_curve.h"
#include "ps_floats.h"
#include "ps_heap.h"
#include "ps_link.h"
#include "ps_log.h"
#include "ps_parse.h"
#include "ps_server.h"
#include "ps_signal.h"
#include "ps_slurm.h"
#include "ps_tfconfig.h"

#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: ps-server [--bind ENDPOINT] [options]\n"
        "\n"
        "Holds partitions of model variables, serves pulls and applies pushed\n"
        "gradients asynchronously (protocol: schemas/protocol.json).\n"
        "\n"
        "  --bind ENDPOINT     ZeroMQ endpoint to serve on, tcp://HOST:PORT or\n"
        "                      ipc://PATH; HOST is an IP address, a name (bound at\n"
        "                      the address it resolves to) or * for every\n"
        "                      interface; PORT is 1..65535, or 0 or * for a free\n"
        "                      port. Without --bind the address comes from\n"
        "                      TF_CONFIG (task.type \"ps\"), bound the same way.\n"
        "  --cluster FILE      read the cluster spec from FILE instead of TF_CONFIG\n"
        "                      (same JSON). When the spec has a chief, the server\n"
        "                      registers with it and heartbeats (the coordinator).\n"
        "  --cluster-resolver slurm[:ps=N][,evaluator][,port=P]\n"
        "                      the cluster spec and this task from the Slurm job\n"
        "                      step it runs in (README.md, Running on Slurm)\n"
        "  --task ps:N         this server's task, when the spec names none (a file\n"
        "                      shared by every process), or when it serves alone\n"
        "  --keys DIR          the cluster's CurveZMQ keys: DIR/public/ and this\n"
        "                      task's secret certificate (see README.md, Security)\n"
        "  --insecure          no authentication, no encryption (warns at start)\n"
        "  --threads N         apply pool threads (default: number of cores;\n"
        "                      0 applies every update on the serving thread)\n"
        "  --max-message MB    largest frame accepted, in MiB (default 2048); a peer\n"
        "                      sending more is disconnected by ZeroMQ\n"
        "  --max-peer-pending MB  bytes one peer may have the server hold for it\n"
        "                      (its requests in progress and replies not yet sent),\n"
        "                      in MiB (default: half of --max-pending); above it the\n"
        "                      peer's requests are refused (error too_big), and\n"
        "                      once those refusals go unread too, dropped. Other\n"
        "                      peers are served as usual. Must exceed what one\n"
        "                      client has in flight: its share of the model on\n"
        "                      this server, twice with overlapping pushes.\n"
        "  --max-pending MB    the same for all peers together, in MiB (default\n"
        "                      1024); above it a peer holding more than an equal\n"
        "                      share is refused\n"
        "  --checkpoint-root DIR  the directory snapshots are written in and restored\n"
        "                      from (created when missing): snapshot and restore\n"
        "                      requests name a directory relative to it, and nothing\n"
        "                      outside it is read or written. Without it both are\n"
        "                      refused. A coordinator's --checkpoint-dir (the same\n"
        "                      shared directory) is what its servers need here.\n"
        "  --memory-limit BYTES  the most memory the embedding tables may hold\n"
        "                      (K, M, G: times 1024, 1024^2, 1024^3; default: no\n"
        "                      limit). A sparse push that could take them past it\n"
        "                      (each of its ids without a row creating one) is\n"
        "                      refused whole, error too_big naming the limit and\n"
        "                      the table; the server keeps serving. Rlimits are\n"
        "                      left to the caller (prlimit --data).\n"
        "  --optimizer KIND    sgd, momentum, adagrad or adam (default sgd) until a\n"
        "                      client sets one\n"
        "  --lr RATE           learning rate for --optimizer (default: Keras default)\n"
        "  --endpoint-file F   write the bound endpoint to F (for scripts)\n"
        "  --verbose           log every request (type, id, tensor bytes)\n"
        "  --help              this text\n"
        "\n"
        "Prints the bound endpoint on stdout as \"ps-server listening on ENDPOINT\".\n"
        "SIGTERM or SIGINT finishes the updates in progress and exits 0.\n");
}

int
main (int argc, char *argv [])
{
    ps_log_init ("ps-server", PS_LOG_INFO);
    ps_floats_flush_subnormals ();
    const char *bind = NULL;
    const char *cluster_file = NULL;
    const char *resolver = NULL;
    const char *task_text = NULL;
    const char *endpoint_file = NULL;
    const char *keys_dir = NULL;
    bool insecure = false;
    const char *checkpoint_root = NULL;
    const char *opt_kind = "sgd";
    double lr = 0;
    long threads = sysconf (_SC_NPROCESSORS_ONLN);
    double max_mb = 2048;
    double pending_mb = 1024;
    double peer_pending_mb = 0;
    uint64_t memory_limit = 0;
    static const struct option options [] = {
        { "bind", required_argument, NULL, 'b' },
        { "cluster", required_argument, NULL, 'c' },
        { "cluster-resolver", required_argument, NULL, 'R' },
        { "task", required_argument, NULL, 'k' },
        { "threads", required_argument, NULL, 't' },
        { "max-message", required_argument, NULL, 'm' },
        { "max-pending", required_argument, NULL, 'p' },
        { "max-peer-pending", required_argument, NULL, 'P' },
        { "checkpoint-root", required_argument, NULL, 'r' },
        { "memory-limit", required_argument, NULL, 'M' },
        { "optimizer", required_argument, NULL, 'o' },
        { "lr", required_argument, NULL, 'l' },
        { "endpoint-file", required_argument, NULL, 'e' },
        { "verbose", no_argument, NULL, 'v' },
        { "keys", required_argument, NULL, 'Y' },
        { "insecure", no_argument, NULL, 'N' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    uint64_t n;
    ps_error_t err;
    while ((c = getopt_long (argc, argv, "", options, NULL)) != -1) {
        int rc = PS_OK;
        switch (c) {
            case 'b': bind = optarg; break;
            case 'c': cluster_file = optarg; break;
            case 'R': resolver = optarg; break;
            case 'k': task_text = optarg; break;
            case 'e': endpoint_file = optarg; break;
            case 'r': checkpoint_root = optarg; break;
            case 'o': opt_kind = optarg; break;
            case 'v': ps_log_init ("ps-server", PS_LOG_DEBUG); break;
            case 'Y': keys_dir = optarg; break;
            case 'N': insecure = true; break;
            case 'h': s_usage (stdout); return 0;
            case 't':
                if ((rc = ps_parse_uint ("--threads", optarg, 0, 256, &n, &err)) == PS_OK)
                    threads = (long) n;
                break;
            case 'm':
                rc = ps_parse_double ("--max-message", optarg, 0, true, 1e7, &max_mb, &err);
                break;
            case 'p':
            case 'P':
                rc = ps_parse_double (c == 'p' ? "--max-pending" : "--max-peer-pending", optarg,
                                      0, true, 1e7, c == 'p' ? &pending_mb : &peer_pending_mb,
                                      &err);
                break;
            case 'M':
                rc = ps_parse_bytes ("--memory-limit", optarg, &memory_limit, &err);
                break;
            case 'l':
                rc = ps_parse_double ("--lr", optarg, 0, true, DBL_MAX, &lr, &err);
                break;
            default:
                s_usage (stderr);
                return 2;
        }
        if (rc) {
            fprintf (stderr, "ps-server: %s\n", err.msg);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "ps-server: unexpected argument '%s' (see --help)\n", argv [optind]);
        return 2;
    }
    if (ps_heap_tune (&err))
        ps_warn ("%s; large messages will be slower", err.msg);
    //  The endpoint to bind: --bind, checked and with a host name resolved,
    //  or else the task's address in the cluster spec.
    char endpoint [256];
    if (bind && ps_address_bind_option (bind, endpoint, sizeof endpoint, &err)) {
        fprintf (stderr, "ps-server: --bind \"%s\": %s\n", bind, err.msg);
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
    if (cluster_file && resolver) {
        fprintf (stderr, "ps-server: --cluster FILE and --cluster-resolver: give one or the "
                 "other\n");
        return 2;
    }
    const char *source = resolver ? "--cluster-resolver" : cluster_file ? cluster_file
                                  : "TF_CONFIG";
    if (resolver)
        tf = ps_slurm_tfconfig (resolver, NULL, &err);
    else
    if (cluster_file)
        tf = ps_tfconfig_from_file (cluster_file, &err);
    else
        tf = ps_tfconfig_from_env (&err);
    if (!tf && (cluster_file || resolver || !bind || err.code != PS_ENOTFOUND)) {
        fprintf (stderr, "ps-server: %s%s\n",
                 bind || cluster_file || resolver ? "" : "no --bind given and ", err.msg);
        return 2;
    }
    if (tf) {
        int rc = PS_OK;
        char type [16];
        int index;
        if (task_text
        &&  (rc = ps_tfconfig_parse_task (task_text, type, sizeof type, &index, &err)) == PS_OK)
            rc = ps_tfconfig_set_task (tf, type, index, &err);
        if (rc == PS_OK && !bind)
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
    if (!tf_task && task_text) {
        char type [16] = "";
        if (ps_tfconfig_parse_task (task_text, type, sizeof type, &task_index, &err) != PS_OK
        ||  (strcmp (type, "ps") != 0
             && ps_error_set (&err, PS_EINVAL, "--task %s: expected ps:N", task_text))) {
            fprintf (stderr, "ps-server: %s\n", err.msg);
            return 2;
        }
    }
    snprintf (name, sizeof name, "ps:%d", task_index);
    ps_server_config_t config = {
        .bind = endpoint, .name = name, .threads = (int) threads,
        .max_message = (int64_t) (max_mb * 1024 * 1024),
        .max_pending = (size_t) (pending_mb * 1024 * 1024),
        .max_peer_pending = (size_t) ((peer_pending_mb > 0 ? peer_pending_mb : pending_mb / 2)
                                      * 1024 * 1024),
        .checkpoint_root = checkpoint_root, .memory_limit = memory_limit,
    };
    ps_opt_kind_t kind;
    if (ps_opt_kind_parse (opt_kind, &kind, &err)) {
        fprintf (stderr, "ps-server: --optimizer: %s\n", err.msg);
        return 2;
    }
    ps_opt_config_default (&config.opt, kind);
    if (lr > 0)
        config.opt.lr = lr;
    if (ps_curve_open (keys_dir, insecure, name, &config.curve, &err)) {
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
    if (endpoint_file) {
        FILE *file = fopen (endpoint_file, "w");
        if (!file || fprintf (file, "%s\n", ps_server_endpoint (server)) < 0 || fclose (file) != 0) {
            fprintf (stderr, "ps-server: cannot write %s: %s\n", endpoint_file, strerror (errno));
            goto done;
        }
    }
    ps_info ("serving %s with %d apply threads%s", ps_server_endpoint (server), (int) threads,
             !config.curve ? ", UNSECURED" : ps_curve_plain (config.curve)
             ? ", a PLAIN data plane (not encrypted)" : ", CurveZMQ");
    //  The link registers and heartbeats on its own thread, so the
    //  coordinator sees this server alive however busy the serving loop is,
    //  and sees a restarted server as a new incarnation.
    if (*coordinator) {
        ps_link_config_t link_config = {
            .coordinator = coordinator, .role = "ps", .index = task_index,
            .endpoint = ps_server_endpoint (server), .deliver = false, .curve = config.curve,
        };
        link = ps_link_new (&link_config, &err);
        if (!link) {
            fprintf (stderr, "ps-server: coordinator %s: %s\n", coordinator, err.msg);
            goto done;
        }
        ps_info ("registering with the coordinator at %s", coordinator);
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
