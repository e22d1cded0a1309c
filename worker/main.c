//  ps-worker: the process that does the arithmetic of training. It trains
//  standalone (--standalone) today; in a cluster it will take its steps from
//  the coordinator and its parameters from the ps-servers.

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_dataset.h"
#include "ps_log.h"
#include "ps_model.h"
#include "ps_standalone.h"

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: ps-worker --standalone [options]\n"
        "\n"
        "Trains a model on Fashion-MNIST in one process (forward and backward on\n"
        "the CPU with OpenBLAS or on a GPU with CUDA + cuBLAS, the optimizer of\n"
        "ps-server applied locally) and prints, per epoch, the training loss,\n"
        "test loss, test accuracy and training samples per second.\n"
        "\n"
        "  --standalone        train in this process (required until cluster mode)\n"
        "  --model NAME|FILE   cnn, cnn2, mlp or a JSON spec (schemas/model.md);\n"
        "                      default cnn\n"
        "  --epochs N          default 3\n"
        "  --batch N           default 64\n"
        "  --optimizer KIND    sgd, momentum, adagrad or adam (default adam)\n"
        "  --lr RATE           learning rate (default 0.001 for adam)\n"
        "  --device D          cpu, gpu or auto (default auto: the GPU when present)\n"
        "  --threads N         CPU threads, OpenBLAS's included (default: all cores)\n"
        "  --data DIR          IDX files (default " PS_DATASET_DEFAULT_DIR ")\n"
        "  --seed N            weights, shuffle and dropout (default 1)\n"
        "  --limit N           use only the first N training examples\n"
        "  --test-limit N      use only the first N test examples\n"
        "  --metrics FILE      also write one JSON object per epoch to FILE\n"
        "  --progress S        seconds between progress lines (default 5, 0 = none)\n"
        "  --summary           print the model's layers and exit\n"
        "  --help              this text\n");
}

//  Parse a number in [min, max], or fail naming the option.
static int
s_number (const char *option, const char *text, double min, double max, double *out)
{
    char *end;
    double v = strtod (text, &end);
    if (end == text || *end || !(v >= min && v <= max)) {
        ps_error ("--%s: \"%s\" is not a number in [%g, %g]", option, text, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

//  Parse a whole decimal number in [min, max] (digits only, so that seeds
//  above 2^53 keep every bit and "1.5" or "0x10" are refused), or fail
//  naming the option.
static int
s_integer (const char *option, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull (text, &end, 10);
    if (*text < '0' || *text > '9' || *end || errno || v < min || v > max) {
        ps_error ("--%s: \"%s\" is not a whole number in [%llu, %llu]", option, text,
                  (unsigned long long) min, (unsigned long long) max);
        return -1;
    }
    *out = v;
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
    ps_log_init ("ps-worker", PS_LOG_INFO);
    ps_standalone_config_t cfg;
    ps_standalone_config_default (&cfg);
    bool standalone = false, summary = false;
    const char *opt_kind = NULL;
    double lr = 0;
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
        switch (c) {
            case 'S': standalone = true; break;
            case 'u': summary = true; break;
            case 'M': cfg.model = optarg; break;
            case 'D': cfg.data_dir = optarg; break;
            case 'm': cfg.metrics_path = optarg; break;
            case 'o': opt_kind = optarg; break;
            case 'd':
                if (ps_device_parse (optarg, &cfg.device, &err)) {
                    ps_error ("--device: %s", err.msg);
                    return 2;
                }
                break;
            case 'e':
                if (s_integer (name, optarg, 1, 1000000, &n))
                    return 2;
                cfg.epochs = (int) n;
                break;
            case 'b':
                if (s_integer (name, optarg, 1, 65536, &n))
                    return 2;
                cfg.batch = (int) n;
                break;
            case 't':
                if (s_integer (name, optarg, 1, 256, &n))
                    return 2;
                cfg.threads = (int) n;
                break;
            case 's':
                if (s_integer (name, optarg, 0, UINT64_MAX, &n))
                    return 2;
                cfg.seed = n;
                break;
            case 'L':
                if (s_integer (name, optarg, 1, 1000000000, &n))
                    return 2;
                cfg.train_limit = (size_t) n;
                break;
            case 'T':
                if (s_integer (name, optarg, 1, 1000000000, &n))
                    return 2;
                cfg.test_limit = (size_t) n;
                break;
            case 'p':
                if (s_number (name, optarg, 0, 1e6, &cfg.progress_s))
                    return 2;
                break;
            case 'l':
                if (s_number (name, optarg, 1e-12, 1e6, &lr))
                    return 2;
                break;
            case 'h': s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
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
        ps_error ("cluster mode (steps from a coordinator, parameters from ps-servers) "
                  "is not available yet; use --standalone");
        return 2;
    }
    ps_standalone_result_t result;
    if (ps_standalone_run (&cfg, &result, &err)) {
        ps_error ("%s", err.msg);
        return 1;
    }
    return 0;
}
