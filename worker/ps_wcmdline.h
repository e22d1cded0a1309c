//  ps-worker's command line, on argp (ps_cli.h): the options of the
//  program itself (a cluster worker, --standalone training, --summary)
//  and those of its `predict` subcommand. Parsing fills a plain struct;
//  a usage error (an unknown option, a bad value, a stray argument)
//  exits 2 from inside the parse, saying what was wrong. What needs more
//  than the command line to check (files, the cluster spec, which model
//  is a click-through-rate model) is left to main.c.

#ifndef PS_WCMDLINE_H_INCLUDED
#define PS_WCMDLINE_H_INCLUDED

#include <stdbool.h>

#include "ps_ctrbatch.h"
#include "ps_predict.h"
#include "ps_standalone.h"

//  What ps-worker's own command line says.
typedef struct {
    //  Standalone training's configuration, --optimizer and --lr applied
    //  (whatever their order): the defaults of ps_standalone_config_default
    //  where no option says otherwise.
    ps_standalone_config_t cfg;
    bool standalone;            //  --standalone
    bool summary;               //  --summary
    bool opt_given;             //  --optimizer was given (cfg.optimizer is its defaults)
    double lr;                  //  --lr, or 0
    //  Cluster mode: the spec, this task and the overrides of the plan.
    const char *cluster_path;
    const char *resolver;
    const char *task_text;
    const char *device_name;    //  --device as given (checked), or NULL
    const char *keys_dir;
    bool insecure;
    bool idle_priority;         //  --idle-priority
    int threads;                //  --threads, or 0
    //  A job file (schemas/job.md), for worker 0 of a cluster without a
    //  chief to start the coordinator with; kept here, not read yet.
    const char *job_file;
    //  The long name of the first option given that only standalone
    //  training reads ("data"), or NULL.
    const char *standalone_only;
    //  What a click-through-rate model's training reads besides cfg, and
    //  which of cfg's fields the command line set (their defaults differ).
    const char *data_arg;
    const char *test_data;
    ps_ctrformat_t format;
    bool csv;                   //  --format csv
    bool epochs_given;
    bool batch_given;
} ps_wcmdline_t;

//  Parse ps-worker's options (argv [0] is the program) into self. Returns
//  only when they are all valid; --help, --usage and --version exit 0, a
//  usage error exits 2.
void ps_wcmdline_parse (int argc, char *argv [], ps_wcmdline_t *self);

//  Parse the options of `ps-worker predict` (argv [0] is "predict") into
//  cfg, which is set to its defaults first. Returns only when they are
//  valid and name the weights and the data; exits as ps_wcmdline_parse.
void ps_wcmdline_parse_predict (int argc, char *argv [], ps_predict_config_t *cfg);

#endif
