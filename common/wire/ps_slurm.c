//  The Slurm cluster resolver (see ps_slurm.h).

#include "ps_slurm.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_parse.h"

//  The longest host name a list may produce.
#define S_HOST_MAX 256

//  The most numbers in one bracket group, and groups in one item.
#define S_GROUP_MAX 1024
#define S_GROUPS_MAX 8

int
ps_slurm_parse_options (const char *text, ps_slurm_options_t *opt, ps_error_t *err)
{
    ps_slurm_options_t result = { .ps = 1, .evaluator = false, .port_base = PS_SLURM_PORT_BASE };
    const char *expected = "expected slurm, or slurm: followed by ps=N, evaluator and port=P "
                           "separated by commas";
    if (strncmp (text, "slurm", 5) != 0 || (text [5] && (text [5] != ':' || !text [6])))
        return ps_error_set (err, PS_EINVAL, "--cluster-resolver \"%s\": %s", text, expected);
    const char *at = text [5] ? text + 6 : text + 5;
    while (*at) {
        const char *end = strchr (at, ',');
        size_t n = end ? (size_t) (end - at) : strlen (at);
        char item [64];
        if (n == 0 || n >= sizeof item)
            return ps_error_set (err, PS_EINVAL, "--cluster-resolver \"%s\": %s", text,
                                 expected);
        memcpy (item, at, n);
        item [n] = 0;
        uint64_t value;
        ps_error_t why;
        if (strcmp (item, "evaluator") == 0)
            result.evaluator = true;
        else
        if (strncmp (item, "ps=", 3) == 0) {
            if (ps_parse_uint ("ps", item + 3, 0, 1000, &value, &why))
                return ps_error_set (err, PS_EINVAL, "--cluster-resolver \"%s\": %s", text,
                                     why.msg);
            result.ps = (int) value;
        }
        else
        if (strncmp (item, "port=", 5) == 0) {
            if (ps_parse_uint ("port", item + 5, 1, 65535, &value, &why))
                return ps_error_set (err, PS_EINVAL, "--cluster-resolver \"%s\": %s", text,
                                     why.msg);
            result.port_base = (int) value;
        }
        else
            return ps_error_set (err, PS_EINVAL, "--cluster-resolver \"%s\": unknown setting "
                                 "\"%s\"; %s", text, item, expected);
        at += n + (end ? 1 : 0);
        if (end && !*at)
            return ps_error_set (err, PS_EINVAL, "--cluster-resolver \"%s\": %s", text,
                                 expected);
    }
    *opt = result;
    return 0;
}

void
ps_slurm_hosts_free (char **hosts, size_t count)
{
    if (!hosts)
        return;
    for (size_t h = 0; h < count; h++)
        free (hosts [h]);
    free (hosts);
}

//  One number of a bracket group, as text: its value and the width it is
//  printed with.
typedef struct {
    unsigned long value;
    int width;
} s_number_t;

//  A parsed item of a host list: literal pieces between bracket groups.
//  The item is piece[0] group[0] piece[1] group[1] ... piece[ngroups].
typedef struct {
    char piece [S_GROUPS_MAX + 1][S_HOST_MAX];
    s_number_t *group [S_GROUPS_MAX];
    size_t size [S_GROUPS_MAX];
    int ngroups;
} s_item_t;

static void
s_item_free (s_item_t *item)
{
    for (int g = 0; g < item->ngroups; g++)
        free (item->group [g]);
}

//  Parse a decimal number of text [at, end) into *number. Returns false
//  when it is empty, not all digits, or too large.
static bool
s_number (const char *at, const char *end, s_number_t *number)
{
    if (at == end || end - at > 9)
        return false;
    unsigned long value = 0;
    for (const char *c = at; c < end; c++) {
        if (!isdigit ((unsigned char) *c))
            return false;
        value = value * 10 + (unsigned long) (*c - '0');
    }
    number->value = value;
    number->width = (int) (end - at);
    return true;
}

//  Parse the ranges of one bracket group, text [at, end), into item's
//  next group. Returns 0 or PS_EINVAL naming the list.
static int
s_group (const char *list, const char *at, const char *end, s_item_t *item, ps_error_t *err)
{
    if (item->ngroups == S_GROUPS_MAX)
        return ps_error_set (err, PS_EINVAL, "node list \"%s\": more than %d bracket groups in "
                             "one name", list, S_GROUPS_MAX);
    s_number_t *numbers = malloc (S_GROUP_MAX * sizeof *numbers);
    if (!numbers)
        abort ();
    size_t n = 0;
    while (at <= end) {
        const char *comma = memchr (at, ',', (size_t) (end - at));
        const char *stop = comma ? comma : end;
        const char *dash = memchr (at, '-', (size_t) (stop - at));
        s_number_t lo, hi;
        bool ok = dash ? s_number (at, dash, &lo) && s_number (dash + 1, stop, &hi)
                       : s_number (at, stop, &lo);
        if (!dash)
            hi = lo;
        if (!ok || hi.value < lo.value) {
            free (numbers);
            return ps_error_set (err, PS_EINVAL, "node list \"%s\": range \"%.*s\" in brackets: "
                                 "expected N or N-M with N <= M, in digits", list,
                                 (int) (stop - at), at);
        }
        if (hi.value - lo.value >= S_GROUP_MAX - n) {
            free (numbers);
            return ps_error_set (err, PS_EINVAL, "node list \"%s\": more than %d numbers in "
                                 "one bracket group", list, S_GROUP_MAX);
        }
        //  Slurm pads every number of a range to the width of its lower
        //  bound as written: [08-10] is 08, 09, 10.
        for (unsigned long v = lo.value; v <= hi.value; v++)
            numbers [n++] = (s_number_t) { v, lo.width };
        at = stop + 1;
    }
    item->group [item->ngroups] = numbers;
    item->size [item->ngroups++] = n;
    return 0;
}

//  Parse item text [at, end) of the list. Returns 0 or PS_EINVAL.
static int
s_item (const char *list, const char *at, const char *end, s_item_t *item, ps_error_t *err)
{
    memset (item, 0, sizeof *item);
    if (at == end)
        return ps_error_set (err, PS_EINVAL, "node list \"%s\": an empty name (two commas in a "
                             "row, or a comma at an end)", list);
    size_t plen = 0;
    while (at < end) {
        if (*at == ']')
            return ps_error_set (err, PS_EINVAL, "node list \"%s\": \"]\" without \"[\"", list);
        if (*at == '[') {
            const char *close = memchr (at, ']', (size_t) (end - at));
            const char *open = close ? memchr (at + 1, '[', (size_t) (close - at - 1)) : NULL;
            int rc = !close || open
                   ? ps_error_set (err, PS_EINVAL, "node list \"%s\": \"[\" without its \"]\"",
                                  list)
                   : close == at + 1
                   ? ps_error_set (err, PS_EINVAL, "node list \"%s\": empty brackets \"[]\"",
                                   list)
                   : s_group (list, at + 1, close, item, err);
            if (rc) {
                s_item_free (item);
                return rc;
            }
            plen = 0;
            at = close + 1;
            continue;
        }
        if (plen + 1 >= S_HOST_MAX) {
            s_item_free (item);
            return ps_error_set (err, PS_EINVAL, "node list \"%s\": a name longer than %d "
                                 "characters", list, S_HOST_MAX - 1);
        }
        item->piece [item->ngroups][plen++] = *at++;
        item->piece [item->ngroups][plen] = 0;
    }
    return 0;
}

int
ps_slurm_expand_nodelist (const char *list, char ***hosts_p, size_t *count_p, ps_error_t *err)
{
    char **hosts = NULL;
    size_t count = 0;
    const char *at = list;
    const char *end = list + strlen (list);
    s_item_t *item = malloc (sizeof *item);
    if (!item)
        abort ();
    int rc = 0;
    if (!*list)
        rc = ps_error_set (err, PS_EINVAL, "node list is empty: expected host names such as "
                           "node[01-04,07]");
    while (rc == 0 && at <= end) {
        //  The item ends at the first comma outside brackets.
        const char *stop = at;
        int depth = 0;
        while (stop < end && (*stop != ',' || depth)) {
            depth += *stop == '[' ? 1 : *stop == ']' ? -1 : 0;
            stop++;
        }
        if ((rc = s_item (list, at, stop, item, err)))
            break;
        size_t product = 1;
        for (int g = 0; g < item->ngroups; g++) {
            //  Each group has at most S_GROUP_MAX numbers: stopping past
            //  the limit keeps the product from overflowing.
            product *= item->size [g];
            if (product > PS_SLURM_MAX_HOSTS)
                break;
        }
        if (product > PS_SLURM_MAX_HOSTS || count + product > PS_SLURM_MAX_HOSTS) {
            rc = ps_error_set (err, PS_EINVAL, "node list \"%s\": more than %d hosts", list,
                               PS_SLURM_MAX_HOSTS);
            s_item_free (item);
            break;
        }
        char **grown = realloc (hosts, (count + product) * sizeof (char *));
        if (!grown)
            abort ();
        hosts = grown;
        //  The first group varies slowest: host k's number in group g is
        //  digit g of k in the mixed radix of the groups' sizes.
        for (size_t k = 0; k < product && rc == 0; k++) {
            //  Large enough for every piece and number at their longest.
            char name [(S_GROUPS_MAX + 1) * S_HOST_MAX + S_GROUPS_MAX * 16] = "";
            size_t len = 0, rest = k, stride = product;
            for (int g = 0; g <= item->ngroups; g++) {
                len += (size_t) snprintf (name + len, sizeof name - len, "%s", item->piece [g]);
                if (g == item->ngroups)
                    break;
                stride /= item->size [g];
                const s_number_t *number = &item->group [g][rest / stride];
                rest %= stride;
                len += (size_t) snprintf (name + len, sizeof name - len, "%0*lu", number->width,
                                          number->value);
            }
            if (len >= S_HOST_MAX)
                rc = ps_error_set (err, PS_EINVAL, "node list \"%s\": a name longer than %d "
                                   "characters", list, S_HOST_MAX - 1);
            else
            if (!(hosts [count++] = strdup (name)))
                abort ();
        }
        s_item_free (item);
        at = stop + 1;
    }
    free (item);
    if (rc) {
        ps_slurm_hosts_free (hosts, count);
        return rc;
    }
    *hosts_p = hosts;
    *count_p = count;
    return 0;
}

int
ps_slurm_tasks_per_node (const char *text, int *counts, size_t nodes, ps_error_t *err)
{
    size_t n = 0;
    const char *at = text;
    while (*at) {
        char *end;
        unsigned long tasks = isdigit ((unsigned char) *at) ? strtoul (at, &end, 10) : 0;
        unsigned long times = 1;
        if (tasks == 0 || tasks > 100000)
            goto bad;
        at = end;
        if (strncmp (at, "(x", 2) == 0) {
            if (!isdigit ((unsigned char) at [2]))
                goto bad;
            times = strtoul (at + 2, &end, 10);
            if (*end != ')' || times == 0 || times > PS_SLURM_MAX_HOSTS)
                goto bad;
            at = end + 1;
        }
        if (times > nodes - n)
            return ps_error_set (err, PS_EINVAL, "tasks per node \"%s\": more entries than the "
                                 "%zu nodes of the node list", text, nodes);
        for (unsigned long t = 0; t < times; t++)
            counts [n++] = (int) tasks;
        if (*at == ',' && at [1])
            at++;
        else
        if (*at)
            goto bad;
    }
    if (n != nodes)
        return ps_error_set (err, PS_EINVAL, "tasks per node \"%s\": %zu entries for the %zu "
                             "nodes of the node list", text, n, nodes);
    return 0;
bad:
    return ps_error_set (err, PS_EINVAL, "tasks per node \"%s\": expected counts such as "
                         "\"2(x3),1\", separated by commas", text);
}

//  The value of the first of the variables a and b that is set, and its
//  name in *name. NULL when neither is.
static const char *
s_env (const char *a, const char *b, const char **name)
{
    const char *value = getenv (a);
    *name = a;
    if (!value && b) {
        value = getenv (b);
        *name = b;
    }
    return value;
}

//  The role of rank r of ntasks, with nps servers and the evaluator as the
//  last rank when there is one, and its index in the role.
static const char *
s_role (int r, int ntasks, int nps, bool evaluator, int *index)
{
    if (r == 0) {
        *index = 0;
        return "chief";
    }
    if (r <= nps) {
        *index = r - 1;
        return "ps";
    }
    if (evaluator && r == ntasks - 1) {
        *index = 0;
        return "evaluator";
    }
    *index = r - 1 - nps;
    return "worker";
}

//  Append the addresses of role's ranks, separated by commas, to the
//  cluster JSON text at *at.
static void
s_append_role (char *text, size_t len, size_t *at, const char *role, int ntasks, int nps,
               bool evaluator, char **node_of, const int *local_of, int port_base)
{
    const char *sep = "";
    for (int r = 0; r < ntasks; r++) {
        int index;
        if (strcmp (s_role (r, ntasks, nps, evaluator, &index), role) != 0)
            continue;
        *at += (size_t) snprintf (text + *at, len - *at, "%s\"%s:%d\"", sep, node_of [r],
                                  port_base + local_of [r]);
        sep = ", ";
    }
}

int
ps_slurm_resolve (const ps_slurm_options_t *opt, char **cluster, char *type, size_t len,
                  int *index, ps_error_t *err)
{
    const char *names [4];
    const char *procid = s_env ("SLURM_PROCID", NULL, &names [0]);
    const char *ntasks_text = s_env ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", &names [1]);
    const char *nodelist = s_env ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", &names [2]);
    const char *per_node = s_env ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                                  &names [3]);
    const char *values [4] = { procid, ntasks_text, nodelist, per_node };
    for (int v = 0; v < 4; v++)
        if (!values [v])
            return ps_error_set (err, PS_ENOTFOUND, "--cluster-resolver slurm: %s is not set "
                                 "(run the program as a task of a Slurm job step: srun)",
                                 names [v]);
    uint64_t rank, ntasks;
    ps_error_t why;
    if (ps_parse_uint (names [1], ntasks_text, 1, 100000, &ntasks, &why)
    ||  ps_parse_uint (names [0], procid, 0, ntasks - 1, &rank, &why))
        return ps_error_set (err, PS_EINVAL, "--cluster-resolver slurm: %s", why.msg);
    int workers = (int) ntasks - 1 - opt->ps - (opt->evaluator ? 1 : 0);
    if (workers < 1)
        return ps_error_set (err, PS_EINVAL, "--cluster-resolver slurm: %s is %d: too few "
                             "tasks for the chief, %d ps%s and at least one worker (expected "
                             "%d or more)", names [1], (int) ntasks, opt->ps,
                             opt->evaluator ? ", the evaluator" : "",
                             opt->ps + (opt->evaluator ? 3 : 2));
    char **hosts;
    size_t nhosts;
    if (ps_slurm_expand_nodelist (nodelist, &hosts, &nhosts, &why))
        return ps_error_set (err, PS_EINVAL, "--cluster-resolver slurm: %s: %s", names [2],
                             why.msg);
    int *counts = calloc (nhosts, sizeof (int));
    char **node_of = calloc (ntasks, sizeof (char *));
    int *local_of = calloc (ntasks, sizeof (int));
    if (!counts || !node_of || !local_of)
        abort ();
    int rc = ps_slurm_tasks_per_node (per_node, counts, nhosts, &why);
    if (rc)
        ps_error_set (err, rc, "--cluster-resolver slurm: %s: %s", names [3], why.msg);
    size_t placed = 0;
    for (size_t h = 0; h < nhosts && rc == 0; h++)
        placed += (size_t) counts [h];
    if (rc == 0 && placed != ntasks)
        rc = ps_error_set (err, PS_EINVAL, "--cluster-resolver slurm: %s \"%s\" places %zu "
                           "tasks, but %s is %d", names [3], per_node, placed, names [1],
                           (int) ntasks);
    //  Block distribution: node k holds the next counts[k] ranks.
    size_t r = 0;
    for (size_t h = 0; h < nhosts && rc == 0; h++)
        for (int l = 0; l < counts [h]; l++, r++) {
            node_of [r] = hosts [h];
            local_of [r] = l;
            if (opt->port_base + l > 65535)
                rc = ps_error_set (err, PS_EINVAL, "--cluster-resolver slurm: port %d + local "
                                   "task %d is past 65535", opt->port_base, l);
        }
    //  This task's own node and local index, where Slurm says them, must
    //  be the layout's: another distribution would give every task a
    //  different idea of the cluster.
    const char *local = getenv ("SLURM_LOCALID");
    const char *node = getenv ("SLURMD_NODENAME");
    if (rc == 0 && ((local && atoi (local) != local_of [rank])
                 || (node && strcmp (node, node_of [rank]) != 0)))
        rc = ps_error_set (err, PS_EINVAL, "--cluster-resolver slurm: task %d runs on %s as "
                           "local task %s, but the block layout of %s and %s puts it on %s as "
                           "local task %d (use srun's default --distribution=block)",
                           (int) rank, node ? node : "?", local ? local : "?", names [2],
                           names [3], node_of [rank], local_of [rank]);
    if (rc == 0) {
        size_t tlen = 64 + ntasks * (S_HOST_MAX + 16);
        char *text = malloc (tlen);
        if (!text)
            abort ();
        size_t at = (size_t) snprintf (text, tlen, "{");
        const char *roles [] = { "chief", "ps", "worker", "evaluator" };
        for (int k = 0; k < 4; k++) {
            if ((k == 1 && opt->ps == 0) || (k == 3 && !opt->evaluator))
                continue;
            at += (size_t) snprintf (text + at, tlen - at, "%s\"%s\": [", at > 1 ? ", " : "",
                                     roles [k]);
            s_append_role (text, tlen, &at, roles [k], (int) ntasks, opt->ps, opt->evaluator,
                           node_of, local_of, opt->port_base);
            at += (size_t) snprintf (text + at, tlen - at, "]");
        }
        snprintf (text + at, tlen - at, "}");
        const char *role = s_role ((int) rank, (int) ntasks, opt->ps, opt->evaluator, index);
        snprintf (type, len, "%s", role);
        *cluster = text;
    }
    free (local_of);
    free (node_of);
    free (counts);
    ps_slurm_hosts_free (hosts, nhosts);
    return rc;
}

ps_tfconfig_t *
ps_slurm_tfconfig (const char *text, char **cluster_p, ps_error_t *err)
{
    ps_slurm_options_t opt;
    char *cluster, type [16];
    int index;
    if (ps_slurm_parse_options (text, &opt, err)
    ||  ps_slurm_resolve (&opt, &cluster, type, sizeof type, &index, err))
        return NULL;
    size_t len = strlen (cluster) + 96;
    char *spec = malloc (len);
    if (!spec)
        abort ();
    snprintf (spec, len, "{\"cluster\": %s, \"task\": {\"type\": \"%s\", \"index\": %d}}",
              cluster, type, index);
    ps_tfconfig_t *tf = ps_tfconfig_parse (spec, "--cluster-resolver slurm", err);
    free (spec);
    if (tf && cluster_p)
        *cluster_p = cluster;
    else
        free (cluster);
    return tf;
}
