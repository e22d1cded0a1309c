//  The ps-server's listening endpoint, with the connections it accepts
//  kept below the process's file-descriptor limit.
//
//  Every accepted connection costs a file descriptor. At the limit the
//  kernel refuses accept (EMFILE), the connection stays in the listen
//  backlog, and libzmq's I/O thread, woken again and again by the listening
//  socket, spins a core. So the server does not let it come to that: it
//  raises its soft limit to the hard limit, counts the connections with a
//  socket monitor (ZMQ_EVENT_ACCEPTED and ZMQ_EVENT_DISCONNECTED, which
//  carry each connection's descriptor), and once the connections reach a
//  high-water mark some descriptors short of the limit, it shuts down each
//  connection accepted beyond it (shutdown(2) on its descriptor, after
//  which ZeroMQ drops it), logging that once. The connections it had keep
//  working, and new ones are kept again once others have closed. Unbinding
//  the endpoint instead would end every connection made through it: in
//  libzmq a listener owns the sessions it accepted.
//
//  The mark is the limit less the reserve less the descriptors that are not
//  connections, counted at start, again whenever accept fails for want of
//  descriptors, and again before connections beyond the mark are shut down
//  (the server opens descriptors of its own after the listener starts).
//  A burst of connections makes it fail even so (ZeroMQ
//  accepts into every free descriptor before its events are read), and
//  the monitor's events lag behind: so each descriptor is asked whether it
//  is a connection of the endpoint (its local address), rather than taking
//  the connections reported so far for all there are.
//
//  The monitor's inproc endpoint is named after this object, so that any
//  number of servers can share one ZeroMQ context. The listener does not
//  own the socket it watches.

#ifndef PS_LISTENER_H_INCLUDED
#define PS_LISTENER_H_INCLUDED

#include <stddef.h>

#include "ps_error.h"

typedef struct _ps_listener_t ps_listener_t;

//  Raise the file-descriptor limit, start monitoring socket (of context
//  ctx) and bind it to endpoint. Returns NULL and sets err naming the
//  endpoint when it cannot be bound or monitored.
ps_listener_t *ps_listener_new (void *ctx, void *socket, const char *endpoint,
                                ps_error_t *err);

//  Bind the socket also to ipc (ipc://PATH, the same-host endpoint of
//  ps_host.h), whose connections count as the endpoint's. Returns 0, or
//  PS_EINVAL / PS_EIO naming the endpoint.
int ps_listener_bind_also (ps_listener_t *self, const char *ipc, ps_error_t *err);

//  Stop monitoring and destroy the listener; the socket stays bound.
void ps_listener_destroy (ps_listener_t **self_p);

//  The endpoint bound, with the port chosen for port 0.
const char *ps_listener_endpoint (ps_listener_t *self);

//  The socket that becomes readable when connections come or go; poll it
//  for ZMQ_POLLIN and call ps_listener_handle.
void *ps_listener_events (ps_listener_t *self);

//  Take the events waiting and shut down the connections there is no room
//  for. Returns 0, or PS_EIO when the monitor socket fails.
int ps_listener_handle (ps_listener_t *self, ps_error_t *err);

#endif
