//  A probe of a cluster's servers over the wire protocol, for the liveness
//  and readiness checks of container orchestrators (deploy/k8s): it pings
//  one ps task, or every one, from this process's own identity (CurveZMQ
//  or PLAIN as its keys say, or unsecured), and says whether each answered
//  ping_ok in time. A server answers a ping only when its serving loop
//  runs, so a server that is up but wedged fails it, unlike a TCP check.
//  It opens its own connections for the call and keeps nothing.

#ifndef PS_PROBE_H_INCLUDED
#define PS_PROBE_H_INCLUDED

#include "ps_curve.h"
#include "ps_error.h"
#include "ps_tfconfig.h"

//  Ping server ps:server of the cluster tf (every server when server is
//  -1) with curve's identity (NULL: unsecured), waiting up to timeout_ms
//  for each answer. Returns 0 when every server pinged answered ping_ok;
//  PS_ETIMEDOUT, or the error of the reply, naming the server and its
//  address, when one did not; PS_EINVAL when the cluster has no such
//  server.
int ps_probe_ping (ps_tfconfig_t *tf, int server, ps_curve_t *curve, int timeout_ms,
                   ps_error_t *err);

#endif
