//  Fuzz target: the TF_CONFIG parser (common/wire/ps_tfconfig), both ways a
//  process reads a cluster spec: the TF_CONFIG text (ps_tfconfig_parse)
//  and a --cluster file holding the same JSON (ps_tfconfig_from_file). The
//  input is the text, up to its first NUL byte. A spec that parses is then
//  asked everything the programs ask of one: counts and addresses of every
//  role, connect and bind endpoints, the coordinator's endpoint, and a
//  task set from the command line. The input is also read as a --task
//  option.
//
//  Oracles, beyond the sanitizers: the text and the file are accepted or
//  refused alike (the two differ only in where the JSON comes from), and a
//  refusal names its source: "TF_CONFIG", or the file's path.

#include "fuzz_input.h"
#include "fuzz_scratch.h"
#include "ps_tfconfig.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_types [] = { "chief", "worker", "ps", "evaluator", "boss" };

static void
s_fail (const char *what, const char *detail)
{
    fprintf (stderr, "fuzz_tfconfig: %s: %s\n", what, detail);
    abort ();
}

//  Ask a parsed spec everything the programs ask.
static void
s_query (ps_tfconfig_t *tf)
{
    char buf [512];
    ps_error_t err;
    size_t types = sizeof s_types / sizeof s_types [0];
    for (size_t t = 0; t < types; t++) {
        int count = ps_tfconfig_count (tf, s_types [t]);
        for (int i = -1; i <= count; i++) {
            const char *address = ps_tfconfig_address (tf, s_types [t], i);
            if ((address != NULL) != (i >= 0 && i < count))
                s_fail ("ps_tfconfig_address disagrees with the count for", s_types [t]);
            ps_tfconfig_connect_endpoint (tf, s_types [t], i, buf, sizeof buf, &err);
        }
        ps_tfconfig_bind_endpoint (tf, s_types [t], buf, sizeof buf, &err);
    }
    ps_tfconfig_coordinator_endpoint (tf, buf, sizeof buf, &err);
    const char *type = ps_tfconfig_task_type (tf);
    int index = ps_tfconfig_task_index (tf);
    //  Only an evaluator may be outside the cluster: TensorFlow's side-car
    //  evaluator, evaluator:0, which binds nothing.
    if (type && ps_tfconfig_address (tf, type, index) == NULL
    &&  !(strcmp (type, "evaluator") == 0 && index == 0
          && ps_tfconfig_count (tf, "evaluator") == 0))
        s_fail ("the task has no address", type);
    for (size_t t = 0; t < types; t++)
        if (ps_tfconfig_set_task (tf, s_types [t], 0, &err) == 0)
            ps_tfconfig_bind_endpoint (tf, s_types [t], buf, sizeof buf, &err);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *text = fuzz_input_text (data, size);
    size_t len = strlen (text);

    ps_error_t err = { 0 };
    ps_tfconfig_t *tf = ps_tfconfig_parse (text, "TF_CONFIG", &err);
    if (tf)
        s_query (tf);
    else
    if (!strstr (err.msg, "TF_CONFIG"))
        s_fail ("a refusal does not name TF_CONFIG", err.msg);

    char path [512];
    fuzz_scratch_write ("cluster.json", text, len, path, sizeof path);
    ps_error_t file_err = { 0 };
    ps_tfconfig_t *from_file = ps_tfconfig_from_file (path, &file_err);
    if (!from_file && !strstr (file_err.msg, path))
        s_fail ("a refusal does not name the file", file_err.msg);
    if ((tf == NULL) != (from_file == NULL))
        s_fail (tf ? "the file is refused, the same text accepted"
                   : "the file is accepted, the same text refused",
                tf ? file_err.msg : err.msg);
    ps_tfconfig_destroy (&tf);
    ps_tfconfig_destroy (&from_file);

    char type [32];
    int index;
    ps_tfconfig_parse_task (text, type, sizeof type, &index, &err);
    free (text);
    return 0;
}
