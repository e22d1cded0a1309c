//  A process's link to the coordinator: registration and heartbeats, kept
//  alive on a background thread whatever the process itself is doing.
//
//  ps-servers, workers and evaluators each make one link. Its thread owns a
//  DEALER socket connected to the coordinator's ROUTER (routing id
//  "<role>:<index>:<incarnation>", so the coordinator can tell a restarted
//  process from the one before it) and:
//    - sends "register" every heartbeat interval until "register_ok" comes
//      (while the coordinator cannot be reached a few wait, and arrive
//      together when it can: it answers each);
//    - then sends "heartbeat" every interval, and watches the coordinator's
//      heartbeats: when nothing has come from the coordinator for the
//      timeout, or the coordinator answers with an error of code not_found
//      (it restarted, or it declared this process failed), or a heartbeat
//      carries a new coordinator incarnation, it registers again;
//    - hands every other message from the coordinator ("register_ok",
//      "work", "error") to the owner, in order, and sends the owner's
//      messages to the coordinator.
//  Because heartbeats come from this thread, a process stays alive to the
//  coordinator while it computes or waits on a server; a process that is
//  stopped (SIGSTOP) or killed falls silent, as it should.
//
//  When the coordinator falls silent the owner receives an "error" message
//  of code "timeout" (PS_ETIMEDOUT by ps_error_from_name) naming the
//  coordinator; an error of code not_found is the link's own business and
//  is never handed on, nor is an error of code busy that answers a
//  register (the coordinator's run waits for its servers, or another
//  incarnation of this task is alive to it: the link registers on, after
//  50 ms, then after twice as long each time up to the heartbeat
//  interval, and is taken once the servers are there, or that incarnation
//  is known dead or has been silent for the timeout). The next "register_ok"
//  the owner receives means the link is back (possibly to a restarted
//  coordinator, with a new plan), also
//  when it re-registered without a timeout (coordinator restarted, or it
//  declared this process failed). Whether the coordinator had said that
//  the run is over before it fell silent is ps_link_finished's answer.
//  Messages the owner sends while the link is down are dropped: a worker's
//  requests are always answered, so the owner learns of the loss from that
//  error and asks again after registering. Messages the coordinator sent
//  just before it closed the connection (it exited) are still read.
//
//  Incoming messages are read on the link thread and queued on an inproc
//  socket; received messages the owner never reads are dropped past
//  ZeroMQ's high-water mark, never blocking the heartbeats. The owner
//  thread alone calls ps_link_recv and ps_link_send.

#ifndef PS_LINK_H_INCLUDED
#define PS_LINK_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_curve.h"
#include "ps_error.h"
#include "ps_msg.h"

typedef struct _ps_link_t ps_link_t;

typedef struct {
    const char *coordinator;    //  ZeroMQ endpoint of the coordinator
    const char *role;           //  "ps", "worker" or "evaluator"
    int index;                  //  task index
    const char *endpoint;       //  a ps-server's serving endpoint, or NULL
    int heartbeat_ms;           //  until register_ok says otherwise (0: 500)
    int timeout_ms;             //  until register_ok says otherwise (0: 3000)
    bool deliver;               //  hand messages to the owner (false for ps-servers)
    ps_curve_t *curve;          //  this process's identity (NULL: unsecured); the caller
                                //  keeps it until the link is destroyed
} ps_link_config_t;

//  Start the link thread; it starts registering at once. Returns NULL and
//  sets err when the endpoint is invalid or a socket or the thread cannot
//  be made.
ps_link_t *ps_link_new (const ps_link_config_t *config, ps_error_t *err);

//  Stop the thread (it sends nothing more) and free.
void ps_link_destroy (ps_link_t **self_p);

//  This process's incarnation (random, drawn at ps_link_new).
uint64_t ps_link_incarnation (const ps_link_t *self);

//  Whether the link is registered now (read from the link thread).
bool ps_link_registered (ps_link_t *self);

//  Whether the coordinator's heartbeats have said that the run is over
//  (every step trained and the last checkpoint written). It stays true
//  through the coordinator's silence that follows, until a register_ok:
//  an owner that loses a finished coordinator knows it exited rather than
//  crashed, and stops instead of waiting for it to come back.
bool ps_link_finished (ps_link_t *self);

//  Receive the next message from the coordinator into msg, decoded and
//  validated, waiting up to timeout_ms (-1: forever). Returns 0,
//  PS_ETIMEDOUT when none came (also early, with errno EINTR, when a signal
//  interrupted the wait), or PS_EIO when the link thread has failed.
int ps_link_recv (ps_link_t *self, ps_msg_t *msg, int timeout_ms, ps_error_t *err);

//  The owner's end of the link's queue, for zmq_poll (ZMQ_POLLIN) next to
//  the owner's own sockets: it is readable when ps_link_recv has a message.
//  Read it only through ps_link_recv.
void *ps_link_pollable (ps_link_t *self);

//  Send a message to the coordinator: the header packed in writer (type
//  and fields), no tensor frames. Returns 0 or PS_EIO.
int ps_link_send (ps_link_t *self, ps_writer_t *writer, ps_error_t *err);

#endif
