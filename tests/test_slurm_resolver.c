//  The Slurm cluster resolver (common/wire/ps_slurm.h): node lists expand
//  as Slurm expands them (its documented examples and hand-written ones,
//  zero padding and several bracket groups included), malformed lists and
//  options are refused naming what is wrong, and each rank of a step gets
//  the role, index and address the documented order and ports give it.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_slurm.h"

//  Expand list and compare with the hosts in want, separated by spaces.
static void
s_expands (const char *list, const char *want)
{
    char **hosts;
    size_t count;
    ps_error_t err;
    int rc = ps_slurm_expand_nodelist (list, &hosts, &count, &err);
    if (rc)
        fail_msg ("%s: %s", list, err.msg);
    char got [4096] = "";
    size_t at = 0;
    for (size_t h = 0; h < count; h++)
        at += (size_t) snprintf (got + at, sizeof got - at, "%s%s", h ? " " : "", hosts [h]);
    ps_slurm_hosts_free (hosts, count);
    if (strcmp (got, want) != 0)
        fail_msg ("%s expanded to \"%s\", expected \"%s\"", list, got, want);
}

//  list is refused, with a message that names it and contains `says`.
static void
s_refused (const char *list, const char *says)
{
    char **hosts = NULL;
    size_t count = 0;
    ps_error_t err;
    int rc = ps_slurm_expand_nodelist (list, &hosts, &count, &err);
    if (rc != PS_EINVAL)
        fail_msg ("%s: expected PS_EINVAL, got %d", list, rc);
    if (*list && !strstr (err.msg, list))
        fail_msg ("%s: the message does not name the list: %s", list, err.msg);
    if (!strstr (err.msg, says))
        fail_msg ("%s: expected \"%s\" in the message: %s", list, says, err.msg);
}

static void
test_nodelist_expands (void **state)
{
    (void) state;
    //  Slurm's own examples (scontrol(1) show hostnames, sbatch(1)'s
    //  SLURM_JOB_NODELIST, the multi-dimensional names of slurm.conf(5)).
    s_expands ("tux[1-3]", "tux1 tux2 tux3");
    s_expands ("lx[15-18,32],ls11", "lx15 lx16 lx17 lx18 lx32 ls11");
    s_expands ("linux[0-3,7]", "linux0 linux1 linux2 linux3 linux7");
    s_expands ("rack[0-1]_blade[0-2]",
               "rack0_blade0 rack0_blade1 rack0_blade2 rack1_blade0 rack1_blade1 rack1_blade2");
    //  The and hand-written cases.
    s_expands ("node[01-04,07]", "node01 node02 node03 node04 node07");
    s_expands ("a[1-2],b3", "a1 a2 b3");
    s_expands ("rack[1-2]-n[01-02]", "rack1-n01 rack1-n02 rack2-n01 rack2-n02");
    s_expands ("node[08-10]", "node08 node09 node10");
    s_expands ("node[9-11]", "node9 node10 node11");
    s_expands ("n[007]", "n007");
    s_expands ("[1-2]x", "1x 2x");
    s_expands ("localhost", "localhost");
    s_expands ("host-a.example.org,host-b", "host-a.example.org host-b");
    s_expands ("c[1,3]d,e[2-3]", "c1d c3d e2 e3");
}

static void
test_nodelist_refused (void **state)
{
    (void) state;
    s_refused ("", "empty");
    s_refused ("node[01-", "without its \"]\"");
    s_refused ("node]1", "\"]\" without \"[\"");
    s_refused ("node[]", "empty brackets");
    s_refused ("node[3-1]", "N <= M");
    s_refused ("node[a-b]", "in digits");
    s_refused ("node[1-]", "range \"1-\"");
    s_refused ("node[1,,2]", "range \"\"");
    s_refused ("node[1,]", "range \"\"");
    s_refused ("node[[1]]", "without its \"]\"");
    s_refused ("a,,b", "empty name");
    s_refused ("a,", "empty name");
    s_refused (",a", "empty name");
    s_refused ("n[0-99999]", "more than");
    s_refused ("a[0-999]b[0-999]", "more than 65536 hosts");
}

static void
test_tasks_per_node (void **state)
{
    (void) state;
    ps_error_t err;
    int counts [4];
    assert_int_equal (ps_slurm_tasks_per_node ("2(x3),1", counts, 4, &err), 0);
    assert_int_equal (counts [0], 2);
    assert_int_equal (counts [2], 2);
    assert_int_equal (counts [3], 1);
    assert_int_equal (ps_slurm_tasks_per_node ("5", counts, 1, &err), 0);
    assert_int_equal (counts [0], 5);
    const char *bad [] = { "2(x3", "x", "2,", "2(x0)", "0", "2(3)", "2;1", "" };
    for (size_t b = 0; b < sizeof bad / sizeof bad [0]; b++) {
        if (ps_slurm_tasks_per_node (bad [b], counts, 1, &err) != PS_EINVAL)
            fail_msg ("tasks per node \"%s\" was taken", bad [b]);
        assert_non_null (strstr (err.msg, "tasks per node"));
    }
    assert_int_equal (ps_slurm_tasks_per_node ("2(x3)", counts, 2, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "more entries than the 2 nodes"));
    assert_int_equal (ps_slurm_tasks_per_node ("2", counts, 2, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "1 entries for the 2 nodes"));
}

static void
test_options (void **state)
{
    (void) state;
    ps_error_t err;
    ps_slurm_options_t opt;
    assert_int_equal (ps_slurm_parse_options ("slurm", &opt, &err), 0);
    assert_int_equal (opt.ps, 1);
    assert_false (opt.evaluator);
    assert_int_equal (opt.port_base, PS_SLURM_PORT_BASE);
    assert_int_equal (ps_slurm_parse_options ("slurm:ps=2,evaluator,port=30000", &opt, &err), 0);
    assert_int_equal (opt.ps, 2);
    assert_true (opt.evaluator);
    assert_int_equal (opt.port_base, 30000);
    const char *bad [] = { "slurmx", "slurm:", "slurm:ps=", "slurm:ps=a", "slurm:gpu=1",
                           "slurm:ps=1,", "kubernetes", "slurm:port=0", "slurm:port=70000",
                           "slurm:ps=-1" };
    for (size_t b = 0; b < sizeof bad / sizeof bad [0]; b++) {
        if (ps_slurm_parse_options (bad [b], &opt, &err) != PS_EINVAL)
            fail_msg ("--cluster-resolver \"%s\" was taken", bad [b]);
        if (!strstr (err.msg, bad [b]))
            fail_msg ("the message does not name \"%s\": %s", bad [b], err.msg);
    }
}

//  A step's variables: node list, tasks per node, tasks, this rank.
static void
s_step (const char *nodelist, const char *per_node, const char *ntasks, const char *procid)
{
    const char *vars [] = { "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                            "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                            "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_PROCID",
                            "SLURM_LOCALID", "SLURMD_NODENAME" };
    for (size_t v = 0; v < sizeof vars / sizeof vars [0]; v++)
        unsetenv (vars [v]);
    if (nodelist)
        setenv ("SLURM_STEP_NODELIST", nodelist, 1);
    if (per_node)
        setenv ("SLURM_STEP_TASKS_PER_NODE", per_node, 1);
    if (ntasks)
        setenv ("SLURM_STEP_NUM_TASKS", ntasks, 1);
    if (procid)
        setenv ("SLURM_PROCID", procid, 1);
}

static void
test_roles_and_ports (void **state)
{
    (void) state;
    ps_error_t err;
    //  Five tasks on two nodes, three on the first: chief, ps:0, ps:1 on
    //  n1 at the base port plus 0, 1, 2; worker:0 and worker:1 on n2.
    s_step ("n[1-2]", "3,2", "5", "3");
    setenv ("SLURM_LOCALID", "0", 1);
    setenv ("SLURMD_NODENAME", "n2", 1);
    char *cluster = NULL;
    ps_tfconfig_t *tf = ps_slurm_tfconfig ("slurm:ps=2", &cluster, &err);
    if (!tf)
        fail_msg ("%s", err.msg);
    assert_string_equal (cluster, "{\"chief\": [\"n1:24000\"], \"ps\": [\"n1:24001\", "
                         "\"n1:24002\"], \"worker\": [\"n2:24000\", \"n2:24001\"]}");
    free (cluster);
    assert_string_equal (ps_tfconfig_task_type (tf), "worker");
    assert_int_equal (ps_tfconfig_task_index (tf), 0);
    assert_string_equal (ps_tfconfig_address (tf, "ps", 1), "n1:24002");
    char endpoint [128];
    assert_int_equal (ps_tfconfig_coordinator_endpoint (tf, endpoint, sizeof endpoint, &err), 0);
    assert_string_equal (endpoint, "tcp://n1:24000");
    ps_tfconfig_destroy (&tf);

    //  Rank by rank on one node, with an evaluator as the last rank and
    //  another base port; the job's variables when the step's are unset.
    const char *want [][2] = { { "chief", "0" }, { "ps", "0" }, { "worker", "0" },
                               { "worker", "1" }, { "evaluator", "0" } };
    for (int r = 0; r < 5; r++) {
        char rank [8];
        snprintf (rank, sizeof rank, "%d", r);
        s_step (NULL, NULL, NULL, rank);
        setenv ("SLURM_JOB_NODELIST", "solo", 1);
        setenv ("SLURM_TASKS_PER_NODE", "5", 1);
        setenv ("SLURM_NTASKS", "5", 1);
        setenv ("SLURM_LOCALID", rank, 1);
        tf = ps_slurm_tfconfig ("slurm:evaluator,port=7000", NULL, &err);
        if (!tf)
            fail_msg ("rank %d: %s", r, err.msg);
        assert_string_equal (ps_tfconfig_task_type (tf), want [r][0]);
        assert_int_equal (ps_tfconfig_task_index (tf), atoi (want [r][1]));
        assert_string_equal (ps_tfconfig_address (tf, "evaluator", 0), "solo:7004");
        assert_string_equal (ps_tfconfig_address (tf, "worker", 1), "solo:7003");
        ps_tfconfig_destroy (&tf);
    }

    //  The step's variables win over the job's.
    s_step ("stepnode", "2", "2", "1");
    setenv ("SLURM_JOB_NODELIST", "jobnode[1-4]", 1);
    tf = ps_slurm_tfconfig ("slurm:ps=0", NULL, &err);
    if (!tf)
        fail_msg ("%s", err.msg);
    assert_string_equal (ps_tfconfig_address (tf, "worker", 0), "stepnode:24001");
    assert_int_equal (ps_tfconfig_count (tf, "ps"), 0);
    ps_tfconfig_destroy (&tf);
}

//  The resolver refuses `resolver` in the current environment with code
//  and a message containing says.
static void
s_resolve_refused (const char *resolver, int code, const char *says)
{
    ps_error_t err;
    ps_tfconfig_t *tf = ps_slurm_tfconfig (resolver, NULL, &err);
    if (tf)
        fail_msg ("%s was resolved; expected \"%s\"", resolver, says);
    assert_int_equal (err.code, code);
    if (!strstr (err.msg, says))
        fail_msg ("expected \"%s\" in: %s", says, err.msg);
}

static void
test_resolve_refused (void **state)
{
    (void) state;
    s_step (NULL, NULL, NULL, NULL);
    s_resolve_refused ("slurm", PS_ENOTFOUND, "SLURM_PROCID is not set");
    s_step ("n1", "3", "3", "0");
    s_resolve_refused ("slurm:ps=2", PS_EINVAL, "expected 4 or more");
    s_step ("n1", "3", "3", "3");
    s_resolve_refused ("slurm", PS_EINVAL, "SLURM_PROCID");
    s_step ("n[1-", "3", "3", "0");
    s_resolve_refused ("slurm", PS_EINVAL, "SLURM_STEP_NODELIST: node list \"n[1-\"");
    s_step ("n[1-2]", "3", "3", "0");
    s_resolve_refused ("slurm", PS_EINVAL, "SLURM_STEP_TASKS_PER_NODE");
    s_step ("n[1-2]", "2(x2)", "3", "0");
    s_resolve_refused ("slurm", PS_EINVAL, "places 4 tasks, but SLURM_STEP_NUM_TASKS is 3");
    //  A cyclic distribution: rank 1 on the second node.
    s_step ("n[1-2]", "2,2", "4", "1");
    setenv ("SLURMD_NODENAME", "n2", 1);
    setenv ("SLURM_LOCALID", "0", 1);
    s_resolve_refused ("slurm", PS_EINVAL, "--distribution=block");
    s_step ("n1", "3", "3", "0");
    s_resolve_refused ("slurm:port=65535", PS_EINVAL, "past 65535");
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_nodelist_expands),
        cmocka_unit_test (test_nodelist_refused),
        cmocka_unit_test (test_tasks_per_node),
        cmocka_unit_test (test_options),
        cmocka_unit_test (test_roles_and_ports),
        cmocka_unit_test (test_resolve_refused),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
