//  ps-worker's command line; see ps_wcmdline.h.

#include "ps_wcmdline.h"

#include <argp.h>
#include <stdint.h>
#include <string.h>

#include "ps_backend.h"
#include "ps_cli.h"
#include "ps_dataset.h"
#include "ps_error.h"
#include "ps_parse.h"

//  Keys of the options without a short form.
enum {
    O_STANDALONE = 256, O_SUMMARY, O_RESOLVER, O_INSECURE, O_JOB, O_OPTIMIZER, O_SEED,
    O_LIMIT, O_TEST_LIMIT, O_METRICS, O_PROGRESS, O_EVAL_STEPS, O_TEST_DATA, O_FORMAT,
    O_CHECKPOINT_DIR, O_CHECKPOINT_EVERY, O_RESUME, O_TRAIN_IMAGES, O_TRAIN_LABELS,
    O_TEST_IMAGES, O_TEST_LABELS, O_LABEL_COLUMN, O_IDLE_PRIORITY,
};

//  The groups of the help, in its order.
enum { G_CLUSTER = 1, G_STANDALONE, G_CTR, G_BOTH };

static const struct argp_option s_options [] = {
    { NULL, 0, NULL, 0, "In a cluster (the default):", G_CLUSTER },
    { "cluster", 'c', "FILE", 0,
      "The cluster spec (TF_CONFIG's JSON) from FILE instead of the TF_CONFIG environment "
      "variable", G_CLUSTER },
    { "cluster-resolver", O_RESOLVER, "slurm[:ps=N][,evaluator][,port=P]", 0,
      "The cluster spec and this task from the Slurm job step it runs in (README.md, "
      "Running on Slurm)", G_CLUSTER },
    { "task", 't', "TYPE:INDEX", 0,
      "This process's task, worker:N or evaluator:N (default: TF_CONFIG's or the file's "
      "\"task\")", G_CLUSTER },
    { "keys", 'k', "DIR", 0,
      "The cluster's CurveZMQ keys: DIR/public/ and this task's secret certificate "
      "(README.md, Security)", G_CLUSTER },
    { "insecure", O_INSECURE, NULL, 0, "No authentication, no encryption (warns at start)",
      G_CLUSTER },
    { "job", O_JOB, "FILE", 0,
      "For a cluster of workers only (no chief): worker 0 runs the coordinator with this "
      "job (schemas/job.md) and exits with its status; the other workers ignore it "
      "(README.md, TF_CONFIG from TensorFlow)", G_CLUSTER },
    { "idle-priority", O_IDLE_PRIORITY, NULL, 0,
      "Compute only in the cores' idle time (SCHED_IDLE), so that other processes never "
      "wait for this one; its heartbeats keep their priority (an evaluator beside training "
      "on a machine with no cores to spare: README.md, Running a local cluster)", G_CLUSTER },
    { NULL, 0, NULL, 0, "Standalone training:", G_STANDALONE },
    { "standalone", O_STANDALONE, NULL, 0, "Train in this process, without a cluster",
      G_STANDALONE },
    { "model", 'm', "NAME|FILE", 0,
      "cnn, cnn2, mlp, lr, dlrm or a JSON spec (schemas/model.md); default cnn",
      G_STANDALONE },
    { "epochs", 'e', "N", 0, "Default 3 (1 for a click-through-rate model)", G_STANDALONE },
    { "batch", 'b', "N", 0, "Default 64 (512 for a click-through-rate model)", G_STANDALONE },
    { "optimizer", O_OPTIMIZER, "KIND", 0,
      "sgd, momentum, adagrad or adam (default adam; a click-through-rate model's dense "
      "variables: its spec's)", G_STANDALONE },
    { "lr", 'l', "RATE", 0,
      "Learning rate (default: the optimizer's, 0.001 for adam), before or after "
      "--optimizer", G_STANDALONE },
    { "data", 'D', "DIR|FILE", 0,
      "IDX files (default " PS_DATASET_DEFAULT_DIR "); for a click-through-rate model or "
      "--format csv, the training file", G_STANDALONE },
    { "train-images", O_TRAIN_IMAGES, "FILE", 0,
      "Training images by name, IDX or .npy, [N, H, W] or [N, H, W, C], in place of those "
      "in --data (README.md, Bring your own data)", G_STANDALONE },
    { "train-labels", O_TRAIN_LABELS, "FILE", 0, "Training labels by name, IDX or .npy, [N]",
      G_STANDALONE },
    { "test-images", O_TEST_IMAGES, "FILE", 0, "Test images by name, as --train-images",
      G_STANDALONE },
    { "test-labels", O_TEST_LABELS, "FILE", 0, "Test labels by name, as --train-labels",
      G_STANDALONE },
    { "seed", O_SEED, "N", 0, "Weights, shuffle and dropout (default 1)", G_STANDALONE },
    { "limit", O_LIMIT, "N", 0, "Use only the first N training examples (lines)",
      G_STANDALONE },
    { "test-limit", O_TEST_LIMIT, "N", 0, "Use only the first N test examples (lines)",
      G_STANDALONE },
    { "metrics", O_METRICS, "FILE", 0,
      "Append JSON lines to FILE: progress, evaluations, epochs, done (the coordinator's "
      "format, schemas/metrics.md)", G_STANDALONE },
    { "eval-steps", O_EVAL_STEPS, "N", 0,
      "Also evaluate every N steps, and write an \"eval\" object for it and for each "
      "epoch's end (test loss and accuracy, params_at_s, train_s, eval_ms); default 0: "
      "once per epoch", G_STANDALONE },
    { "progress", O_PROGRESS, "S", 0,
      "Seconds between progress lines and records (default 5, 0 = none)", G_STANDALONE },
    { "checkpoint-dir", O_CHECKPOINT_DIR, "DIR", 0,
      "Write checkpoints there, in the cluster's format, at each epoch's end (coordinator "
      "export and ps-worker predict read them)", G_STANDALONE },
    { "checkpoint-every", O_CHECKPOINT_EVERY, "N", 0, "Also every N steps", G_STANDALONE },
    { "resume", O_RESUME, NULL, 0,
      "Continue from the newest checkpoint in --checkpoint-dir", G_STANDALONE },
    { NULL, 0, NULL, 0, "Click-through-rate models and CSV data (with --standalone):",
      G_CTR },
    { "test-data", O_TEST_DATA, "FILE", 0, "The test file (--data: the training file)",
      G_CTR },
    { "format", O_FORMAT, "F", 0,
      "criteo or libsvm (default criteo), plain or gzip, streamed; or csv, for a "
      "classifier on CSV files with a header row", G_CTR },
    { "label-column", O_LABEL_COLUMN, "NAME", 0,
      "The CSV column of the classes, or of a regression model's target (default label); "
      "every other column is a feature",
      G_CTR },
    { NULL, 0, NULL, 0, "In a cluster and standalone:", G_BOTH },
    { "threads", 'T', "N", 0,
      "CPU threads, OpenBLAS's included (default: the plan's in a cluster; standalone, "
      "the cores it may use (CPUs online, affinity, cgroup quota), or 1 for a "
      "click-through-rate model)", G_BOTH },
    { "device", 'd', "D", 0,
      "cpu, gpu or auto (default: the plan's in a cluster; standalone, auto: the GPU when "
      "present)", G_BOTH },
    { "summary", O_SUMMARY, NULL, 0, "Print the layers of --model and exit", G_BOTH },
    { NULL, 0, NULL, 0, "Output:", -1 },
    { 0 },
};

//  The options only standalone training reads: in a cluster the
//  coordinator's job sets what they set.
static bool
s_standalone_only (int key)
{
    switch (key) {
        case 'm': case 'e': case 'b': case 'l': case 'D': case O_OPTIMIZER: case O_SEED:
        case O_LIMIT: case O_TEST_LIMIT: case O_METRICS: case O_PROGRESS: case O_EVAL_STEPS:
        case O_TEST_DATA: case O_FORMAT: case O_CHECKPOINT_DIR: case O_CHECKPOINT_EVERY:
        case O_RESUME: case O_TRAIN_IMAGES: case O_TRAIN_LABELS: case O_TEST_IMAGES:
        case O_TEST_LABELS: case O_LABEL_COLUMN:
            return true;
        default:
            return false;
    }
}

//  The long name of option `key`.
static const char *
s_long_name (int key)
{
    for (int i = 0; s_options [i].name || s_options [i].doc; i++)
        if (s_options [i].name && s_options [i].key == key)
            return s_options [i].name;
    return "?";
}

static error_t
s_parse (int key, char *arg, struct argp_state *state)
{
    ps_wcmdline_t *self = state->input;
    ps_standalone_config_t *cfg = &self->cfg;
    ps_error_t err;
    uint64_t n;
    int rc = PS_OK;
    if (!self->standalone_only && s_standalone_only (key))
        self->standalone_only = s_long_name (key);
    switch (key) {
        case O_STANDALONE: self->standalone = true; break;
        case O_SUMMARY: self->summary = true; break;
        case 'c': self->cluster_path = arg; break;
        case O_RESOLVER: self->resolver = arg; break;
        case 't': self->task_text = arg; break;
        case 'k': self->keys_dir = arg; break;
        case O_INSECURE: self->insecure = true; break;
        case O_IDLE_PRIORITY: self->idle_priority = true; break;
        case O_JOB: self->job_file = arg; break;
        case 'm': cfg->model = arg; break;
        case 'D': cfg->data_dir = self->data_arg = arg; break;
        case O_TRAIN_IMAGES: cfg->train_images = arg; break;
        case O_TRAIN_LABELS: cfg->train_labels = arg; break;
        case O_TEST_IMAGES: cfg->test_images = arg; break;
        case O_TEST_LABELS: cfg->test_labels = arg; break;
        case O_LABEL_COLUMN: cfg->label_column = arg; break;
        case O_METRICS: cfg->metrics_path = arg; break;
        case O_TEST_DATA: self->test_data = arg; break;
        case O_CHECKPOINT_DIR: cfg->checkpoint_dir = arg; break;
        case O_RESUME: cfg->resume = true; break;
        case O_FORMAT:
            self->csv = strcmp (arg, "csv") == 0;
            if (!self->csv && (rc = ps_ctrformat_parse (arg, &self->format, &err)) != PS_OK)
                ps_error_prefix (&err, rc, "--format (or csv, for a classifier's CSV files)");
            break;
        case O_OPTIMIZER: {
            //  The optimizer's defaults replace the configuration here, and
            //  --lr is applied over them at the end, so that the two give
            //  the same rate in either order.
            ps_opt_kind_t kind;
            if ((rc = ps_opt_kind_parse (arg, &kind, &err)) != PS_OK)
                ps_error_prefix (&err, rc, "--optimizer");
            else {
                ps_opt_config_default (&cfg->optimizer, kind);
                self->opt_given = true;
            }
            break;
        }
        case 'l':
            rc = ps_parse_double ("--lr", arg, 1e-12, false, 1e6, &self->lr, &err);
            break;
        case 'd':
            if ((rc = ps_device_parse (arg, &cfg->device, &err)) != PS_OK)
                ps_error_prefix (&err, rc, "--device");
            self->device_name = arg;
            break;
        case 'e':
            if ((rc = ps_parse_uint ("--epochs", arg, 1, 1000000, &n, &err)) == PS_OK)
                cfg->epochs = (int) n;
            self->epochs_given = true;
            break;
        case 'b':
            if ((rc = ps_parse_uint ("--batch", arg, 1, 65536, &n, &err)) == PS_OK)
                cfg->batch = (int) n;
            self->batch_given = true;
            break;
        case 'T':
            if ((rc = ps_parse_uint ("--threads", arg, 1, 256, &n, &err)) == PS_OK)
                cfg->threads = self->threads = (int) n;
            break;
        case O_SEED:
            //  Digits only, so that a seed above 2^53 keeps every bit.
            rc = ps_parse_uint ("--seed", arg, 0, UINT64_MAX, &cfg->seed, &err);
            break;
        case O_LIMIT:
            if ((rc = ps_parse_uint ("--limit", arg, 1, 1000000000, &n, &err)) == PS_OK)
                cfg->train_limit = (size_t) n;
            break;
        case O_TEST_LIMIT:
            if ((rc = ps_parse_uint ("--test-limit", arg, 1, 1000000000, &n, &err)) == PS_OK)
                cfg->test_limit = (size_t) n;
            break;
        case O_PROGRESS:
            rc = ps_parse_double ("--progress", arg, 0, false, 1e6, &cfg->progress_s, &err);
            break;
        case O_EVAL_STEPS:
            rc = ps_parse_uint ("--eval-steps", arg, 0, 1000000000, &cfg->eval_steps, &err);
            break;
        case O_CHECKPOINT_EVERY:
            rc = ps_parse_uint ("--checkpoint-every", arg, 1, 1000000000,
                                &cfg->checkpoint_every, &err);
            break;
        case ARGP_KEY_END:
            if (self->lr > 0)
                cfg->optimizer.lr = self->lr;
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
    "In a cluster (the default), registers with the coordinator (the cluster's chief), "
    "receives the job plan (model, data, batch, servers) and trains the steps the "
    "coordinator hands out: pulls the parameters from the ps-servers, computes the gradient "
    "of the step's batch, pushes it, reports. An evaluator evaluates the servers' parameters "
    "on the test set when asked. Exits 0 when the coordinator says training is over, or on "
    "SIGTERM or SIGINT.\n\n"
    "With --standalone, trains a model in one process, an image classifier on Fashion-MNIST "
    "(or IDX, .npy or CSV files) by default: forward and backward on the CPU with OpenBLAS "
    "or on a GPU with CUDA + cuBLAS, the optimizer of ps-server applied locally; it prints, "
    "per epoch, the training loss, test loss, test accuracy and training samples per "
    "second. A click-through-rate model (lr, dlrm or a spec with \"inputs\") trains on a "
    "Criteo or LIBSVM text file with the tables in process, and prints the test log loss "
    "and AUC instead.\n\n"
    "A regression model (\"loss\": \"mse\") prints the test mse and mae instead of the "
    "accuracy, and a binary classifier the test AUC too.\n\n"
    "ps-worker predict runs a trained model on images or arrays (ps-worker predict "
    "--help).\v"
    "Standalone training stops between two steps on Ctrl-C (SIGINT) or SIGTERM, after a "
    "checkpoint of the steps done (with --checkpoint-dir), and exits 130 (143); a second "
    "signal stops it at once. --device gpu without a usable GPU exits 69 at once, saying "
    "why. --quiet leaves out the per-epoch lines but the last.\n\n"
    "Exit status: 0 done or stopped, 1 training failed, 2 bad usage or cluster spec.",
    ps_cli_children, NULL, NULL,
};

void
ps_wcmdline_parse (int argc, char *argv [], ps_wcmdline_t *self)
{
    memset (self, 0, sizeof *self);
    ps_standalone_config_default (&self->cfg);
    self->format = PS_CTR_CRITEO;
    ps_cli_parse (&s_argp, argc, argv, self);
}

static const struct argp_option s_predict_options [] = {
    { "weights", 'w', "FILE|DIR", 0,
      "A safetensors file (coordinator export) or a checkpoint directory or root (its "
      "newest valid checkpoint); required", 1 },
    { "data", 'D', "FILE", 0,
      "The inputs: an IDX file (gzip or raw, [N, rows, cols] or [N, rows, cols, channels]) "
      "or a .npy array (uint8 scaled to [0, 1], float32 as it is); required", 1 },
    { "model", 'm', "NAME|FILE", 0, "Default: the model the weights name", 1 },
    { "out", 'o', "FILE", 0, "FILE.csv or FILE.jsonl (default: CSV to stdout)", 1 },
    { "batch", 'b', "N", 0, "Examples per forward pass (default 256)", 1 },
    { "device", 'd', "D", 0, "cpu (default), gpu or auto", 1 },
    { "threads", 'T', "N", 0, "CPU threads (default 1)", 1 },
    { NULL, 0, NULL, 0, "Output:", -1 },
    { 0 },
};

static error_t
s_parse_predict (int key, char *arg, struct argp_state *state)
{
    ps_predict_config_t *cfg = state->input;
    ps_error_t err;
    uint64_t n;
    int rc = PS_OK;
    switch (key) {
        case 'm': cfg->model = arg; break;
        case 'w': cfg->weights = arg; break;
        case 'D': cfg->data = arg; break;
        case 'o': cfg->out = arg; break;
        case 'b':
            if ((rc = ps_parse_uint ("--batch", arg, 1, 65536, &n, &err)) == PS_OK)
                cfg->batch = (int) n;
            break;
        case 'T':
            if ((rc = ps_parse_uint ("--threads", arg, 1, 256, &n, &err)) == PS_OK)
                cfg->threads = (int) n;
            break;
        case 'd':
            if ((rc = ps_device_parse (arg, &cfg->device, &err)) != PS_OK)
                ps_error_prefix (&err, rc, "--device");
            break;
        case ARGP_KEY_END:
            if (!cfg->weights)
                argp_error (state, "--weights FILE|DIR is required");
            else
            if (!cfg->data)
                argp_error (state, "--data FILE is required");
            break;
        default:
            return ARGP_ERR_UNKNOWN;
    }
    if (rc)
        argp_error (state, "%s", err.msg);
    return 0;
}

static const struct argp s_predict_argp = {
    s_predict_options, s_parse_predict, NULL,
    "Runs a trained model on the examples of an IDX or .npy file and writes one row per "
    "example: a classifier's predicted class and every class's probability (softmax; a "
    "binary classifier's 1 - p and p), a regression model's outputs.",
    ps_cli_children, NULL, NULL,
};

void
ps_wcmdline_parse_predict (int argc, char *argv [], ps_predict_config_t *cfg)
{
    ps_predict_config_default (cfg);
    //  Messages and "Usage:" name the subcommand as it was typed.
    char *args [argc + 1];
    args [0] = (char *) "ps-worker predict";
    for (int i = 1; i < argc; i++)
        args [i] = argv [i];
    args [argc] = NULL;
    ps_cli_parse (&s_predict_argp, argc, args, cfg);
}
