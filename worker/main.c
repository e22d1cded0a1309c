//  ps-worker: the process that does the arithmetic of training. In a
//  cluster (the default) it registers with the coordinator named in the
//  cluster spec (TF_CONFIG or --cluster), takes its steps from it and its
//  parameters from the ps-servers (ps_trainer.h), as a worker or an
//  evaluator. With --standalone it trains the whole model alone, the
//  single-process baseline: an image classifier on Fashion-MNIST
//  (ps_standalone.h) or a click-through-rate model on Criteo or LIBSVM
//  files (ps_ctrstandalone.h).

#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_chief_child.h"
#include "ps_ctrstandalone.h"
#include "ps_dataset.h"
#include "ps_floats.h"
#include "ps_heap.h"
#include "ps_log.h"
#include "ps_model.h"
#include "ps_parse.h"
#include "ps_predict.h"
#include "ps_standalone.h"
#include "ps_tfconfig.h"
#include "ps_signal.h"
#include "ps_slurm.h"
#include "ps_trainer.h"

//  In a cluster the stop signals must reach the signalfd the trainer
//  watches, so every thread has to block them, and OpenBLAS starts its
//  thread pool in a library constructor, before main: a pool thread that
//  did not block SIGTERM would take it and the process would die of it.
//  Functions in .preinit_array run before any library's constructor, so
//  the signals are blocked here, for every thread to inherit; main
//  unblocks them again on its own thread, and cluster mode blocks them
//  there once more before it starts any thread of its own.
static void
s_block_stop_signals (int argc, char **argv, char **envp)
{
    (void) argc;
    (void) argv;
    (void) envp;
    sigset_t mask;
    ps_signal_stop_set (&mask);
    //  sigprocmask fails only for an invalid `how`; there is nobody to
    //  tell this early in any case.
    sigprocmask (SIG_BLOCK, &mask, NULL);
}

__attribute__ ((section (".preinit_array"), used))
static void (*const s_preinit) (int, char **, char **) = s_block_stop_signals;

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: ps-worker [--cluster FILE] [--task TYPE:INDEX] [--job FILE] [--threads N]\n"
        "                 [--device D]\n"
        "       ps-worker --standalone [options]\n"
        "       ps-worker --summary [--model NAME|FILE]\n"
        "       ps-worker predict --weights FILE|DIR --data FILE [--model NAME|FILE]\n"
        "                 [--out FILE.csv|FILE.jsonl] [--batch N] [--device D] [--threads N]\n"
        "\n"
        "In a cluster (the default), registers with the coordinator (the cluster's\n"
        "chief), receives the job plan (model, data, batch, servers), and trains the\n"
        "steps the coordinator hands out: pulls the parameters from the ps-servers,\n"
        "computes the gradient of the step's batch, pushes it, reports. An evaluator\n"
        "evaluates the servers' parameters on the test set when asked. Exits 0 when\n"
        "the coordinator says training is over, or on SIGTERM or SIGINT.\n"
        "\n"
        "  --cluster FILE      the cluster spec (TF_CONFIG's JSON) from FILE instead\n"
        "                      of the TF_CONFIG environment variable\n"
        "  --cluster-resolver slurm[:ps=N][,evaluator][,port=P]\n"
        "                      the cluster spec and this task from the Slurm job\n"
        "                      step it runs in (README.md, Running on Slurm)\n"
        "  --task TYPE:INDEX   this process's task, worker:N or evaluator:N (default:\n"
        "                      TF_CONFIG's or the file's \"task\")\n"
        "  --keys DIR          the cluster's CurveZMQ keys: DIR/public/ and this\n"
        "                      task's secret certificate (see README.md, Security)\n"
        "  --insecure          no authentication, no encryption (warns at start)\n"
        "  --job FILE          for a cluster of workers only (no chief): worker 0 runs\n"
        "                      the coordinator with this job (schemas/job.md) and exits\n"
        "                      with its status; the other workers ignore it (README.md,\n"
        "                      TF_CONFIG from TensorFlow)\n"
        "  --threads N         CPU threads (default: the plan's)\n"
        "  --device D          cpu, gpu or auto (default: the plan's)\n"
        "\n"
        "With --standalone, trains a model on Fashion-MNIST in one process (forward\n"
        "and backward on the CPU with OpenBLAS or on a GPU with CUDA + cuBLAS, the\n"
        "optimizer of ps-server applied locally) and prints, per epoch, the training\n"
        "loss, test loss, test accuracy and training samples per second.\n"
        "\n"
        "  --standalone        train in this process, without a cluster\n"
        "  --model NAME|FILE   cnn, cnn2, mlp, lr, dlrm or a JSON spec (schemas/model.md);\n"
        "                      default cnn\n"
        "  --epochs N          default 3\n"
        "  --batch N           default 64\n"
        "  --optimizer KIND    sgd, momentum, adagrad or adam (default adam)\n"
        "  --lr RATE           learning rate (default 0.001 for adam)\n"
        "  --device D          cpu, gpu or auto (default auto: the GPU when present)\n"
        "  --threads N         CPU threads, OpenBLAS's included (default: all cores)\n"
        "  --data DIR          IDX files (default " PS_DATASET_DEFAULT_DIR ")\n"
        "  --train-images FILE --train-labels FILE   IDX or .npy files by name, in\n"
        "  --test-images FILE  --test-labels FILE    place of those in --data: images\n"
        "                      [N, H, W] or [N, H, W, C], labels [N] (README.md,\n"
        "                      Bring your own data)\n"
        "  --seed N            weights, shuffle and dropout (default 1)\n"
        "  --limit N           use only the first N training examples\n"
        "  --test-limit N      use only the first N test examples\n"
        "  --metrics FILE      append JSON lines to FILE: progress, evaluations, epochs,\n"
        "                      done (the coordinator's format, schemas/metrics.md)\n"
        "  --eval-steps N      also evaluate every N steps, and write an \"eval\" object\n"
        "                      for it and for each epoch's end (test loss and accuracy,\n"
        "                      params_at_s, train_s, eval_ms); default 0: once per epoch\n"
        "  --progress S        seconds between progress lines and records (default 5,\n"
        "                      0 = none)\n"
        "  --checkpoint-dir D  write checkpoints there, in the cluster's format, at each\n"
        "                      epoch's end (coordinator export and predict read them)\n"
        "  --checkpoint-every N    also every N steps\n"
        "  --resume            continue from the newest checkpoint in --checkpoint-dir\n"
        "Ctrl-C (SIGINT) or SIGTERM stops between two steps after a checkpoint of the\n"
        "steps done (with --checkpoint-dir) and exits 130 (143); a second one at once.\n"
        "--device gpu without a usable GPU exits 69 at once, saying why.\n"
        "\n"
        "With --standalone and a click-through-rate model (lr, dlrm or a spec with\n"
        "\"inputs\"), trains on a Criteo or LIBSVM text file (plain or gzip, streamed)\n"
        "with the tables in process, and prints per epoch the training loss, the\n"
        "test log loss and AUC, and training examples per second:\n"
        "\n"
        "  --data FILE         the training file\n"
        "  --test-data FILE    the test file\n"
        "  --format F          criteo or libsvm (default criteo)\n"
        "  --limit N, --test-limit N   only the first N lines\n"
        "  (also --epochs (default 1), --batch (default 512), --optimizer and --lr\n"
        "  for the dense variables (default: the spec's), --threads (default 1),\n"
        "  --seed, --metrics, --progress)\n"
        "\n"
        "With --standalone --format csv, a classifier trains on CSV files with a\n"
        "header row (plain or gzip): --data FILE and --test-data FILE, whose column\n"
        "--label-column NAME (default label) holds the classes and every other\n"
        "column is a feature.\n"
        "\n"
        "predict runs a trained image classifier on the images of an IDX file (gzip\n"
        "or raw, [N, rows, cols] or [N, rows, cols, channels]) and writes, one row\n"
        "per image, the predicted class and every class's probability (softmax):\n"
        "\n"
        "  --weights FILE|DIR  a safetensors file (coordinator export) or a checkpoint\n"
        "                      directory or root (its newest valid checkpoint)\n"
        "  --data FILE         the images\n"
        "  --model NAME|FILE   default: the model the weights name\n"
        "  --out FILE          FILE.csv or FILE.jsonl (default: CSV to stdout)\n"
        "  --batch N           images per forward pass (default 256)\n"
        "  --device D          cpu (default), gpu or auto   --threads N  (default 1)\n"
        "\n"
        "  --summary           print the model's layers and exit\n"
        "  --help              this text\n"
        "\n"
        "Exit status: 0 done or stopped, 1 training failed, 2 bad usage or cluster spec.\n");
}

//  Run in a cluster: find the coordinator and this task in the cluster
//  spec, then train under the coordinator until it says stop or a signal
//  comes. Returns the exit status.
static int
s_cluster (const char *cluster_path, const char *resolver, const char *task_text, int threads,
           const char *device, const char *keys_dir, bool insecure, const char *job_file)
{
    ps_error_t err;
    if (cluster_path && resolver) {
        ps_error ("--cluster FILE and --cluster-resolver: give one or the other");
        return 2;
    }
    //  A device this machine lacks is said before registering, and with
    //  the status a supervisor does not restart: a restart would not help.
    ps_device_t wanted;
    if (device && ps_device_parse (device, &wanted, &err) == 0 && ps_device_check (wanted, &err)) {
        ps_error ("%s", err.msg);
        return PS_EXIT_UNUSABLE;
    }
    ps_tfconfig_t *tf = resolver ? ps_slurm_tfconfig (resolver, NULL, &err)
                      : cluster_path ? ps_tfconfig_from_file (cluster_path, &err)
                      : ps_tfconfig_from_env (&err);
    if (!tf) {
        if (err.code == PS_ENOTFOUND && !cluster_path && !resolver)
            ps_error ("no cluster spec: TF_CONFIG is not set and no --cluster FILE was given "
                      "(or train alone with --standalone)");
        else
            ps_error ("%s", err.msg);
        return 2;
    }
    const char *source = resolver ? "--cluster-resolver" : cluster_path ? cluster_path
                                  : "TF_CONFIG";
    int status = 2;
    char type [16];
    int index;
    if (task_text
    &&  (ps_tfconfig_parse_task (task_text, type, sizeof type, &index, &err)
         || ps_tfconfig_set_task (tf, type, index, &err))) {
        ps_error ("%s: %s", source, err.msg);
        goto done;
    }
    if (!ps_tfconfig_task_type (tf)) {
        ps_error ("%s has no 'task', and no --task TYPE:INDEX was given", source);
        goto done;
    }
    snprintf (type, sizeof type, "%s", ps_tfconfig_task_type (tf));
    index = ps_tfconfig_task_index (tf);
    if (strcmp (type, "worker") != 0 && strcmp (type, "evaluator") != 0) {
        ps_error ("task type \"%s\": ps-worker runs as a worker or an evaluator (ps-server "
                  "runs the ps tasks, the coordinator the chief)", type);
        goto done;
    }
    char coordinator [512];
    if (ps_tfconfig_coordinator_endpoint (tf, coordinator, sizeof coordinator, &err)) {
        ps_error ("%s: %s", source, err.msg);
        goto done;
    }
    char task [48];
    snprintf (task, sizeof task, "%s:%d", type, index);
    ps_curve_t *curve = NULL;
    if (ps_curve_open (keys_dir, insecure, task, &curve, &err)) {
        ps_error ("%s", err.msg);
        goto done;
    }
    //  The stop signals are blocked before any thread of ours starts (the
    //  link's, ZeroMQ's, the backend's; OpenBLAS's were started with them
    //  blocked, see s_block_stop_signals), so the signals reach only the
    //  signalfd, which the trainer checks between steps: a step in hand is
    //  finished, never cut.
    int stop_fd = ps_signal_stop_fd (&err);
    if (stop_fd < 0) {
        ps_error ("%s", err.msg);
        ps_curve_destroy (&curve);
        status = 1;
        goto done;
    }
    char name [64];
    snprintf (name, sizeof name, "ps-worker %s:%d", type, index);
    ps_log_init (name, PS_LOG_INFO);
    //  Every step receives the parameters in messages of up to megabytes:
    //  keep their buffers in the heap rather than in fresh pages.
    if (ps_heap_tune (&err))
        ps_warn ("%s; large messages will be slower", err.msg);
    //  In mirrored mode a worker receives its ring peers' data on its own
    //  address from the cluster spec; async mode leaves it unused.
    //  Its host name must resolve here for that (ps_address.h); an async job
    //  does not need it, so that is said now and refused only in mirrored
    //  mode.
    char ring_bind [512];
    bool have_ring = strcmp (type, "worker") == 0
                  && ps_tfconfig_bind_endpoint (tf, "worker", ring_bind, sizeof ring_bind,
                                                &err) == 0;
    if (strcmp (type, "worker") == 0 && !have_ring)
        ps_warn ("%s: %s; a mirrored job cannot run on this worker", source, err.msg);
    ps_trainer_config_t config = {
        .coordinator = coordinator, .role = type, .index = index, .threads = threads,
        .device = device, .stop_fd = stop_fd, .ring_bind = have_ring ? ring_bind : NULL,
        .curve = curve,
    };
    status = ps_chief_child_train (tf, job_file, keys_dir, insecure, &config);
    close (stop_fd);
    ps_curve_destroy (&curve);
done:
    ps_tfconfig_destroy (&tf);
    return status;
}

//  ps-worker predict (ps_predict.h). Returns the exit status: 2 for bad
//  usage, 1 when the prediction failed.
static int
s_predict (int argc, char *argv [])
{
    static const struct option options [] = {
        { "model", required_argument, NULL, 'M' },
        { "weights", required_argument, NULL, 'W' },
        { "data", required_argument, NULL, 'D' },
        { "out", required_argument, NULL, 'O' },
        { "batch", required_argument, NULL, 'b' },
        { "device", required_argument, NULL, 'd' },
        { "threads", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    ps_predict_config_t cfg;
    ps_predict_config_default (&cfg);
    ps_error_t err = { 0 };
    uint64_t n;
    int c;
    while ((c = getopt_long (argc, argv, "", options, NULL)) != -1) {
        int rc = PS_OK;
        switch (c) {
            case 'M': cfg.model = optarg; break;
            case 'W': cfg.weights = optarg; break;
            case 'D': cfg.data = optarg; break;
            case 'O': cfg.out = optarg; break;
            case 'b':
                if ((rc = ps_parse_uint ("--batch", optarg, 1, 65536, &n, &err)) == PS_OK)
                    cfg.batch = (int) n;
                break;
            case 't':
                if ((rc = ps_parse_uint ("--threads", optarg, 1, 256, &n, &err)) == PS_OK)
                    cfg.threads = (int) n;
                break;
            case 'd':
                if ((rc = ps_device_parse (optarg, &cfg.device, &err)) != PS_OK)
                    ps_error_prefix (&err, rc, "--device");
                break;
            case 'h': s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
        }
        if (rc) {
            ps_error ("predict: %s", err.msg);
            return 2;
        }
    }
    if (optind < argc || !cfg.weights || !cfg.data) {
        ps_error ("predict: %s (see --help)", optind < argc ? "unexpected argument"
                  : !cfg.weights ? "--weights FILE|DIR is required" : "--data FILE is required");
        return 2;
    }
    if (ps_device_check (cfg.device, &err)) {
        ps_error ("predict: %s", err.msg);
        return PS_EXIT_UNUSABLE;
    }
    size_t examples = 0;
    if (ps_predict_run (&cfg, &examples, &err)) {
        ps_error ("predict: %s", err.msg);
        return 1;
    }
    if (cfg.out)
        ps_info ("predict: %zu predictions written to %s", examples, cfg.out);
    return 0;
}

static void
s_print_line (const char *line, void *arg)
{
    (void) arg;
    puts (line);
}

int
main (int argc, char *argv [])
{
    //  Until cluster mode or standalone training asks otherwise, the stop
    //  signals act as they always do on this thread (and the threads a
    //  click-through-rate model's training starts): they end the process.
    sigset_t stop_mask;
    ps_signal_stop_set (&stop_mask);
    if (sigprocmask (SIG_UNBLOCK, &stop_mask, NULL) != 0) {
        fprintf (stderr, "ps-worker: sigprocmask: %s\n", strerror (errno));
        return 1;
    }
    ps_log_init ("ps-worker", PS_LOG_INFO);
    ps_floats_flush_subnormals ();
    if (argc > 1 && strcmp (argv [1], "predict") == 0)
        return s_predict (argc - 1, argv + 1);
    ps_standalone_config_t cfg;
    ps_standalone_config_default (&cfg);
    bool standalone = false, summary = false;
    const char *opt_kind = NULL;
    //  Cluster mode: the spec file, the task, and the overrides of the plan.
    const char *cluster_path = NULL, *resolver = NULL, *task_text = NULL, *device_name = NULL;
    const char *keys_dir = NULL, *job_file = NULL;
    bool insecure = false;
    int threads = 0;
    //  The first option given that only standalone training reads.
    const char *standalone_only = NULL;
    double lr = 0;
    //  What a click-through-rate model's training reads besides cfg, and
    //  which of cfg's fields the command line set (their defaults differ).
    const char *test_data = NULL, *data_arg = NULL;
    ps_ctrformat_t format = PS_CTR_CRITEO;
    bool epochs_given = false, batch_given = false;
    bool csv = false;
    static const struct option options [] = {
        { "standalone", no_argument, NULL, 'S' },
        { "model", required_argument, NULL, 'M' },
        { "epochs", required_argument, NULL, 'e' },
        { "batch", required_argument, NULL, 'b' },
        { "optimizer", required_argument, NULL, 'o' },
        { "lr", required_argument, NULL, 'l' },
        { "device", required_argument, NULL, 'd' },
        { "threads", required_argument, NULL, 't' },
        { "data", required_argument, NULL, 'D' },
        { "seed", required_argument, NULL, 's' },
        { "limit", required_argument, NULL, 'L' },
        { "test-limit", required_argument, NULL, 'T' },
        { "metrics", required_argument, NULL, 'm' },
        { "progress", required_argument, NULL, 'p' },
        { "eval-steps", required_argument, NULL, 'E' },
        { "test-data", required_argument, NULL, 'F' },
        { "format", required_argument, NULL, 'R' },
        { "checkpoint-dir", required_argument, NULL, 'c' },
        { "checkpoint-every", required_argument, NULL, 'k' },
        { "resume", no_argument, NULL, 'r' },
        { "train-images", required_argument, NULL, 'I' },
        { "train-labels", required_argument, NULL, 'J' },
        { "test-images", required_argument, NULL, 'X' },
        { "test-labels", required_argument, NULL, 'Z' },
        { "label-column", required_argument, NULL, 'j' },
        { "cluster", required_argument, NULL, 'C' },
        { "cluster-resolver", required_argument, NULL, 'Q' },
        { "task", required_argument, NULL, 'K' },
        { "keys", required_argument, NULL, 'Y' },
        { "insecure", no_argument, NULL, 'N' },
        { "job", required_argument, NULL, 'B' },
        { "summary", no_argument, NULL, 'u' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    uint64_t n;
    ps_error_t err = { 0 };
    while ((c = getopt_long (argc, argv, "", options, NULL)) != -1) {
        const char *name = "?";
        for (int i = 0; options [i].name; i++)
            if (options [i].val == c)
                name = options [i].name;
        char flag [32];
        snprintf (flag, sizeof flag, "--%s", name);
        if (!standalone_only && c && strchr ("MebolDsLTmpEFRckrIJXZj", c))
            standalone_only = name;
        int rc = PS_OK;
        switch (c) {
            case 'S': standalone = true; break;
            case 'C': cluster_path = optarg; break;
            case 'Q': resolver = optarg; break;
            case 'K': task_text = optarg; break;
            case 'Y': keys_dir = optarg; break;
            case 'N': insecure = true; break;
            case 'B': job_file = optarg; break;
            case 'u': summary = true; break;
            case 'F': test_data = optarg; break;
            case 'R':
                csv = strcmp (optarg, "csv") == 0;
                if (!csv && (rc = ps_ctrformat_parse (optarg, &format, &err)) != PS_OK)
                    ps_error_prefix (&err, rc, "--format (or csv, for a classifier's CSV files)");
                break;
            case 'M': cfg.model = optarg; break;
            case 'D': cfg.data_dir = data_arg = optarg; break;
            case 'I': cfg.train_images = optarg; break;
            case 'J': cfg.train_labels = optarg; break;
            case 'X': cfg.test_images = optarg; break;
            case 'Z': cfg.test_labels = optarg; break;
            case 'j': cfg.label_column = optarg; break;
            case 'm': cfg.metrics_path = optarg; break;
            case 'o': opt_kind = optarg; break;
            case 'd':
                if ((rc = ps_device_parse (optarg, &cfg.device, &err)) != PS_OK)
                    ps_error_prefix (&err, rc, "--device");
                device_name = optarg;
                break;
            case 'e':
                if ((rc = ps_parse_uint (flag, optarg, 1, 1000000, &n, &err)) == PS_OK)
                    cfg.epochs = (int) n;
                epochs_given = true;
                break;
            case 'b':
                if ((rc = ps_parse_uint (flag, optarg, 1, 65536, &n, &err)) == PS_OK)
                    cfg.batch = (int) n;
                batch_given = true;
                break;
            case 't':
                if ((rc = ps_parse_uint (flag, optarg, 1, 256, &n, &err)) == PS_OK)
                    cfg.threads = threads = (int) n;
                break;
            case 's':
                //  Digits only, so that a seed above 2^53 keeps every bit.
                rc = ps_parse_uint (flag, optarg, 0, UINT64_MAX, &cfg.seed, &err);
                break;
            case 'L':
                if ((rc = ps_parse_uint (flag, optarg, 1, 1000000000, &n, &err)) == PS_OK)
                    cfg.train_limit = (size_t) n;
                break;
            case 'T':
                if ((rc = ps_parse_uint (flag, optarg, 1, 1000000000, &n, &err)) == PS_OK)
                    cfg.test_limit = (size_t) n;
                break;
            case 'p':
                rc = ps_parse_double (flag, optarg, 0, false, 1e6, &cfg.progress_s, &err);
                break;
            case 'E':
                rc = ps_parse_uint (flag, optarg, 0, 1000000000, &cfg.eval_steps, &err);
                break;
            case 'c': cfg.checkpoint_dir = optarg; break;
            case 'k':
                rc = ps_parse_uint (flag, optarg, 1, 1000000000, &cfg.checkpoint_every, &err);
                break;
            case 'r': cfg.resume = true; break;
            case 'l':
                rc = ps_parse_double (flag, optarg, 1e-12, false, 1e6, &lr, &err);
                break;
            case 'h': s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
        }
        if (rc) {
            ps_error ("%s", err.msg);
            return 2;
        }
    }
    if (optind < argc) {
        ps_error ("unexpected argument \"%s\" (see --help)", argv [optind]);
        return 2;
    }
    if (opt_kind) {
        ps_opt_kind_t kind;
        if (ps_opt_kind_parse (opt_kind, &kind, &err)) {
            ps_error ("--optimizer: %s", err.msg);
            return 2;
        }
        ps_opt_config_default (&cfg.optimizer, kind);
    }
    if (lr > 0)
        cfg.optimizer.lr = lr;
    if (summary) {
        ps_model_t *model = ps_model_load (cfg.model, &err);
        if (!model) {
            ps_error ("%s", err.msg);
            return 1;
        }
        ps_model_summary (model, s_print_line, NULL);
        ps_model_destroy (&model);
        return 0;
    }
    if (!standalone) {
        if (standalone_only) {
            ps_error ("--%s is for --standalone; in a cluster the coordinator's job sets it",
                      standalone_only);
            return 2;
        }
        return s_cluster (cluster_path, resolver, task_text, threads, device_name, keys_dir,
                          insecure, job_file);
    }
    if (cluster_path || resolver || task_text || keys_dir || insecure || job_file) {
        ps_error ("--cluster, --cluster-resolver, --task, --keys, --insecure and --job are for "
                  "cluster mode, not --standalone");
        return 2;
    }
    //  A click-through-rate model trains on its own path; the model is
    //  loaded here only to tell which (an unknown one is reported below).
    ps_model_t *model = ps_model_load (cfg.model, NULL);
    const ps_ctrmodel_t *ctr = model ? ps_model_ctr (model) : NULL;
    if (ctr && (cfg.train_images || cfg.train_labels || cfg.test_images || cfg.test_labels
                || csv || cfg.label_column)) {
        ps_error ("--train-images, --train-labels, --test-images, --test-labels, --format csv "
                  "and --label-column are for classifiers; a click-through-rate model reads "
                  "--data and --test-data in criteo or libsvm format");
        ps_model_destroy (&model);
        return 2;
    }
    if (ctr && (cfg.eval_steps || cfg.device == PS_DEVICE_GPU || cfg.checkpoint_dir)) {
        ps_error ("%s is for image classifiers; a click-through-rate model trains on the CPU, "
                  "evaluates after each epoch and keeps no checkpoints",
                  cfg.eval_steps ? "--eval-steps" : cfg.checkpoint_dir ? "--checkpoint-dir"
                                                                      : "--device gpu");
        ps_model_destroy (&model);
        return 2;
    }
    //  A device this machine lacks is said before the data are read.
    if (ps_device_check (cfg.device, &err)) {
        ps_error ("%s", err.msg);
        ps_model_destroy (&model);
        return PS_EXIT_UNUSABLE;
    }
    if (ctr) {
        ps_ctrstandalone_config_t ctr_cfg;
        ps_ctrstandalone_config_default (&ctr_cfg);
        ctr_cfg.model = cfg.model;
        ctr_cfg.train_path = data_arg;
        ctr_cfg.test_path = test_data;
        ctr_cfg.format = format;
        ctr_cfg.threads = threads ? threads : ctr_cfg.threads;
        ctr_cfg.epochs = epochs_given ? cfg.epochs : ctr_cfg.epochs;
        ctr_cfg.batch = batch_given ? cfg.batch : ctr_cfg.batch;
        ctr_cfg.seed = cfg.seed;
        //  --optimizer and --lr override the spec's dense optimizer, each
        //  on its own.
        ctr_cfg.optimizer_given = opt_kind || lr > 0;
        ctr_cfg.optimizer = opt_kind ? cfg.optimizer : ctr->optimizer;
        if (lr > 0)
            ctr_cfg.optimizer.lr = lr;
        ps_model_destroy (&model);
        ctr_cfg.train_limit = cfg.train_limit;
        ctr_cfg.test_limit = cfg.test_limit;
        ctr_cfg.metrics_path = cfg.metrics_path;
        ctr_cfg.progress_s = cfg.progress_s;
        ps_ctrstandalone_result_t ctr_result;
        if (ps_ctrstandalone_run (&ctr_cfg, &ctr_result, &err)) {
            ps_error ("%s", err.msg);
            return 1;
        }
        return 0;
    }
    ps_model_destroy (&model);
    if (csv && (!data_arg || !test_data)) {
        ps_error ("--format csv needs the training file (--data FILE) and the test file "
                  "(--test-data FILE)");
        return 2;
    }
    if (csv) {
        cfg.train_csv = data_arg;
        cfg.test_csv = test_data;
        cfg.label_column = cfg.label_column ? cfg.label_column : "label";
    }
    else
    if (test_data || cfg.label_column) {
        ps_error ("--test-data and --format are for click-through-rate models (lr, dlrm or a "
                  "spec with \"inputs\") and CSV data (--format csv, with --label-column), "
                  "not model \"%s\" on IDX data", cfg.model);
        return 2;
    }
    if ((cfg.resume || cfg.checkpoint_every) && !cfg.checkpoint_dir) {
        ps_error ("%s needs --checkpoint-dir DIR", cfg.resume ? "--resume"
                                                             : "--checkpoint-every");
        return 2;
    }
    //  A stop signal is read between two steps, so that a checkpoint of
    //  the steps done can be written; the threads training starts inherit
    //  the mask and leave the signals to the signalfd.
    if ((cfg.stop_fd = ps_signal_stop_fd (&err)) < 0) {
        ps_error ("%s", err.msg);
        return 1;
    }
    ps_standalone_result_t result;
    int rc = ps_standalone_run (&cfg, &result, &err);
    close (cfg.stop_fd);
    if (rc) {
        ps_error ("%s", err.msg);
        //  As a shell reports a command a signal ended: 128 + its number.
        return result.stopped_by ? 128 + result.stopped_by : 1;
    }
    return 0;
}
