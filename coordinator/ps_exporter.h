//  The coordinator's Prometheus endpoint (--metrics-port): an HTTP server
//  that answers GET /metrics with the run's numbers in the Prometheus
//  text format.
//
//  The server runs on a thread of its own (libmicrohttpd's), and never
//  touches the coordinator's state: the loop renders the text
//  (ps_metrics_prometheus) now and then and publishes it here, and a
//  request gets a copy of the latest text, taken under a lock held only
//  for the copy. A slow or stuck client therefore never slows or stalls
//  the loop. Before the first publish /metrics answers an empty text.

#ifndef PS_EXPORTER_H_INCLUDED
#define PS_EXPORTER_H_INCLUDED

#include "ps_error.h"

typedef struct _ps_exporter_t ps_exporter_t;

//  Listen on addr (an IPv4 or IPv6 address) and port (0: any free port)
//  and serve. Returns NULL with err naming the address and the reason
//  (PS_EINVAL for an address that is not one, PS_EIO when it cannot be
//  bound) otherwise.
ps_exporter_t *ps_exporter_new (const char *addr, int port, ps_error_t *err);

//  Stop serving (requests in progress are finished), free, set *self_p NULL.
void ps_exporter_destroy (ps_exporter_t **self_p);

//  The port it listens on (the one chosen when asked for 0).
int ps_exporter_port (const ps_exporter_t *self);

//  Serve text from now on; the exporter takes it (a malloc'd string) and
//  frees the text it replaces.
void ps_exporter_publish (ps_exporter_t *self, char *text);

#endif
