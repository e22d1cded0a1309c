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
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_chief_child.h"
#include "ps_cli.h"
#include "ps_ctrstandalone.h"
#include "ps_floats.h"
#include "ps_heap.h"
#include "ps_host.h"
#include "ps_log.h"
#include "ps_model.h"
#include "ps_predict.h"
#include "ps_standalone.h"
#include "ps_tfconfig.h"
#include "ps_signal.h"
#include "ps_slurm.h"
#include "ps_trainer.h"
#include "ps_wcmdline.h"

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

//  Run in a cluster: find the coordinator and this task in the cluster
//  spec, then train under the coordinator until it says stop or a signal
//  comes. Returns the exit status.
static int
s_cluster (const ps_wcmdline_t *args)
{
    const char *cluster_path = args->cluster_path, *resolver = args->resolver;
    const char *task_text = args->task_text, *device = args->device_name;
    ps_error_t err;
    if (cluster_path && resolver) {
        ps_cli_error ("--cluster FILE and --cluster-resolver: give one or the other");
        return 2;
    }
    //  A device this machine lacks is said before registering, and with
    //  the status a supervisor does not restart: a restart would not help.
    ps_device_t wanted;
    if (device && ps_device_parse (device, &wanted, &err) == 0 && ps_device_check (wanted, &err)) {
        ps_cli_error ("%s", err.msg);
        return PS_EXIT_UNUSABLE;
    }
    ps_tfconfig_t *tf = resolver ? ps_slurm_tfconfig (resolver, NULL, &err)
                      : cluster_path ? ps_tfconfig_from_file (cluster_path, &err)
                      : ps_tfconfig_from_env (&err);
    if (!tf) {
        if (err.code == PS_ENOTFOUND && !cluster_path && !resolver)
            ps_cli_error ("no cluster spec: TF_CONFIG is not set and no --cluster FILE was given "
                          "(or train alone with --standalone)");
        else
            ps_cli_error ("%s", err.msg);
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
        ps_cli_error ("%s: %s", source, err.msg);
        goto done;
    }
    if (!ps_tfconfig_task_type (tf)) {
        ps_cli_error ("%s has no 'task', and no --task TYPE:INDEX was given", source);
        goto done;
    }
    snprintf (type, sizeof type, "%s", ps_tfconfig_task_type (tf));
    index = ps_tfconfig_task_index (tf);
    if (strcmp (type, "worker") != 0 && strcmp (type, "evaluator") != 0) {
        ps_cli_error ("task type \"%s\": ps-worker runs as a worker or an evaluator (ps-server "
                      "runs the ps tasks, the coordinator the chief)", type);
        goto done;
    }
    char coordinator [512];
    if (ps_tfconfig_coordinator_endpoint (tf, coordinator, sizeof coordinator, &err)) {
        ps_cli_error ("%s: %s", source, err.msg);
        goto done;
    }
    char task [48];
    snprintf (task, sizeof task, "%s:%d", type, index);
    ps_curve_t *curve = NULL;
    if (ps_curve_open (args->keys_dir, args->insecure, task, &curve, &err)) {
        ps_cli_error ("%s", err.msg);
        goto done;
    }
    //  The stop signals are blocked before any thread of ours starts (the
    //  link's, ZeroMQ's, the backend's; OpenBLAS's were started with them
    //  blocked, see s_block_stop_signals), so the signals reach only the
    //  signalfd, which the trainer checks between steps: a step in hand is
    //  finished, never cut.
    int stop_fd = ps_signal_stop_fd (&err);
    if (stop_fd < 0) {
        ps_cli_error ("%s", err.msg);
        ps_curve_destroy (&curve);
        status = 1;
        goto done;
    }
    char name [64];
    snprintf (name, sizeof name, "ps-worker %s:%d", type, index);
    ps_log_init (name, ps_log_level ());
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
    //  Ring members on this host reach this one over ipc:// (ps_host.h):
    //  the endpoint is named now, and registered with the coordinator,
    //  which gives it to the ring's members; the ring binds it later.
    char ring_ipc [256] = "", ring_advert [PS_HOST_SET_MAX] = "";
    if (have_ring && ps_host_same_host ()
    &&  strncmp (ring_bind, "tcp://", 6) == 0
    &&  ps_host_ipc_endpoint ("ring", ring_bind, ring_ipc, sizeof ring_ipc, &err) != 0) {
        ps_warn ("ring members on this host will use tcp: %s", err.msg);
        ring_ipc [0] = '\0';
    }
    if (have_ring
    &&  ps_host_set (ring_bind, ring_ipc [0] ? ring_ipc : NULL, false, ring_advert,
                     sizeof ring_advert, &err) != 0) {
        ps_warn ("ring members on this host will use tcp: %s", err.msg);
        ring_ipc [0] = ring_advert [0] = '\0';
    }
    ps_trainer_config_t config = {
        .coordinator = coordinator, .role = type, .index = index, .threads = args->threads,
        .device = device, .stop_fd = stop_fd, .ring_bind = have_ring ? ring_bind : NULL,
        .ring_ipc = ring_ipc, .ring_advert = ring_advert [0] ? ring_advert : NULL,
        .curve = curve, .idle_priority = args->idle_priority,
    };
    status = ps_chief_child_train (tf, args->job_file, args->keys_dir, args->insecure, &config);
    close (stop_fd);
    ps_curve_destroy (&curve);
done:
    ps_tfconfig_destroy (&tf);
    return status;
}

//  ps-worker predict (ps_predict.h). Returns the exit status: 1 when the
//  prediction failed (bad usage exits 2 in the parse).
static int
s_predict (int argc, char *argv [])
{
    ps_predict_config_t cfg;
    ps_wcmdline_parse_predict (argc, argv, &cfg);
    ps_error_t err;
    if (ps_device_check (cfg.device, &err)) {
        ps_cli_error ("predict: %s", err.msg);
        return PS_EXIT_UNUSABLE;
    }
    size_t examples = 0;
    if (ps_predict_run (&cfg, &examples, &err)) {
        ps_cli_error ("predict: %s", err.msg);
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
    ps_cli_init ("ps-worker");
    ps_floats_flush_subnormals ();
    if (argc > 1 && strcmp (argv [1], "predict") == 0)
        return s_predict (argc - 1, argv + 1);
    ps_wcmdline_t args;
    ps_wcmdline_parse (argc, argv, &args);
    ps_standalone_config_t cfg = args.cfg;
    cfg.quiet = ps_cli_quiet ();
    ps_error_t err;
    if (args.summary) {
        ps_model_t *model = ps_model_load (cfg.model, &err);
        if (!model) {
            ps_cli_error ("%s", err.msg);
            return 1;
        }
        ps_model_summary (model, s_print_line, NULL);
        ps_model_destroy (&model);
        return 0;
    }
    if (!args.standalone) {
        if (args.standalone_only) {
            ps_cli_error ("--%s is for --standalone; in a cluster the coordinator's job sets it",
                          args.standalone_only);
            return 2;
        }
        return s_cluster (&args);
    }
    if (args.cluster_path || args.resolver || args.task_text || args.keys_dir || args.insecure
    ||  args.job_file || args.idle_priority) {
        ps_cli_error ("--cluster, --cluster-resolver, --task, --keys, --insecure, --job and "
                      "--idle-priority are for cluster mode, not --standalone");
        return 2;
    }
    //  A click-through-rate model trains on its own path; the model is
    //  loaded here only to tell which (an unknown one is reported below).
    ps_model_t *model = ps_model_load (cfg.model, NULL);
    const ps_ctrmodel_t *ctr = model ? ps_model_ctr (model) : NULL;
    if (ctr && (cfg.train_images || cfg.train_labels || cfg.test_images || cfg.test_labels
                || args.csv || cfg.label_column)) {
        ps_cli_error ("--train-images, --train-labels, --test-images, --test-labels, --format csv "
                      "and --label-column are for classifiers; a click-through-rate model reads "
                      "--data and --test-data in criteo or libsvm format");
        ps_model_destroy (&model);
        return 2;
    }
    if (ctr && (cfg.eval_steps || cfg.device == PS_DEVICE_GPU || cfg.checkpoint_dir)) {
        ps_cli_error ("%s is for image classifiers; a click-through-rate model trains on the CPU, "
                      "evaluates after each epoch and keeps no checkpoints",
                      cfg.eval_steps ? "--eval-steps" : cfg.checkpoint_dir ? "--checkpoint-dir"
                                                                          : "--device gpu");
        ps_model_destroy (&model);
        return 2;
    }
    //  A device this machine lacks is said before the data are read.
    if (ps_device_check (cfg.device, &err)) {
        ps_cli_error ("%s", err.msg);
        ps_model_destroy (&model);
        return PS_EXIT_UNUSABLE;
    }
    if (ctr) {
        ps_ctrstandalone_config_t ctr_cfg;
        ps_ctrstandalone_config_default (&ctr_cfg);
        ctr_cfg.model = cfg.model;
        ctr_cfg.train_path = args.data_arg;
        ctr_cfg.test_path = args.test_data;
        ctr_cfg.format = args.format;
        ctr_cfg.threads = args.threads ? args.threads : ctr_cfg.threads;
        ctr_cfg.epochs = args.epochs_given ? cfg.epochs : ctr_cfg.epochs;
        ctr_cfg.batch = args.batch_given ? cfg.batch : ctr_cfg.batch;
        ctr_cfg.seed = cfg.seed;
        //  --optimizer and --lr override the spec's dense optimizer, each
        //  on its own.
        ctr_cfg.optimizer_given = args.opt_given || args.lr > 0;
        ctr_cfg.optimizer = args.opt_given ? cfg.optimizer : ctr->optimizer;
        if (args.lr > 0)
            ctr_cfg.optimizer.lr = args.lr;
        ps_model_destroy (&model);
        ctr_cfg.train_limit = cfg.train_limit;
        ctr_cfg.test_limit = cfg.test_limit;
        ctr_cfg.metrics_path = cfg.metrics_path;
        ctr_cfg.progress_s = cfg.progress_s;
        ctr_cfg.quiet = cfg.quiet;
        ps_ctrstandalone_result_t ctr_result;
        if (ps_ctrstandalone_run (&ctr_cfg, &ctr_result, &err)) {
            ps_error ("%s", err.msg);
            return 1;
        }
        return 0;
    }
    ps_model_destroy (&model);
    if (args.csv && (!args.data_arg || !args.test_data)) {
        ps_cli_error ("--format csv needs the training file (--data FILE) and the test file "
                      "(--test-data FILE)");
        return 2;
    }
    if (args.csv) {
        cfg.train_csv = args.data_arg;
        cfg.test_csv = args.test_data;
        cfg.label_column = cfg.label_column ? cfg.label_column : "label";
    }
    else
    if (args.test_data || cfg.label_column) {
        ps_cli_error ("--test-data and --format are for click-through-rate models (lr, dlrm or a "
                      "spec with \"inputs\") and CSV data (--format csv, with --label-column), "
                      "not model \"%s\" on IDX data", cfg.model);
        return 2;
    }
    if ((cfg.resume || cfg.checkpoint_every) && !cfg.checkpoint_dir) {
        ps_cli_error ("%s needs --checkpoint-dir DIR", cfg.resume ? "--resume"
                                                                 : "--checkpoint-every");
        return 2;
    }
    //  A stop signal is read between two steps, so that a checkpoint of
    //  the steps done can be written; the threads training starts inherit
    //  the mask and leave the signals to the signalfd.
    if ((cfg.stop_fd = ps_signal_stop_fd (&err)) < 0) {
        ps_cli_error ("%s", err.msg);
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
