//  The servers' probe (ps_probe.h): one client over the cluster's ps
//  tasks, a ping to each one asked for.

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "ps_client.h"
#include "ps_probe.h"

#define S_ENDPOINT_MAX 512

int
ps_probe_ping (ps_tfconfig_t *tf, int server, ps_curve_t *curve, int timeout_ms,
               ps_error_t *err)
{
    assert (tf);
    int nservers = ps_tfconfig_count (tf, "ps");
    if (nservers < 1)
        return ps_error_set (err, PS_EINVAL, "the cluster has no ps task to ping");
    if (server < -1 || server >= nservers)
        return ps_error_set (err, PS_EINVAL, "the cluster has no task ps:%d (it has %d ps "
                             "task%s)", server, nservers, nservers == 1 ? "" : "s");
    //  The client takes every server's endpoint, so that its server i is
    //  task ps:i and its key is looked up by that name.
    char **endpoints = calloc ((size_t) nservers, sizeof (char *));
    if (!endpoints)
        abort ();
    int rc = PS_OK;
    for (int s = 0; s < nservers && rc == PS_OK; s++) {
        if (!(endpoints [s] = malloc (S_ENDPOINT_MAX)))
            abort ();
        rc = ps_tfconfig_connect_endpoint (tf, "ps", s, endpoints [s], S_ENDPOINT_MAX, err);
    }
    ps_client_t *client = NULL;
    if (rc == PS_OK
    &&  !(client = ps_client_new ((const char *const *) endpoints, nservers, timeout_ms, curve,
                                  err)))
        rc = err->code;
    for (int s = 0; s < nservers && rc == PS_OK; s++) {
        if (server != -1 && s != server)
            continue;
        if ((rc = ps_client_ping (client, s, err)))
            ps_error_prefix (err, rc, "ps:%d (%s), pinged with a %d ms timeout", s,
                             endpoints [s], timeout_ms);
    }
    ps_client_destroy (&client);
    for (int s = 0; s < nservers; s++)
        free (endpoints [s]);
    free (endpoints);
    return rc;
}
