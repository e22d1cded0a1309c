//  The stop signals, SIGINT and SIGTERM, read through a signalfd.
//
//  Every ps-cluster program stops in order: its loop finishes what is in
//  hand (a request, a step, a checkpoint) and then exits. So the signals
//  are blocked, before any thread starts (threads inherit the mask), and
//  read through a signalfd that the loop polls with its sockets.

#ifndef PS_SIGNAL_H_INCLUDED
#define PS_SIGNAL_H_INCLUDED

#include <signal.h>
#include <stddef.h>

#include "ps_error.h"

//  Fill mask with the stop signals.
void ps_signal_stop_set (sigset_t *mask);

//  Block the stop signals in the calling thread (and the threads it starts
//  later) and return a close-on-exec signalfd that becomes readable when
//  one arrives; PS_EIO naming the failing call otherwise.
int ps_signal_stop_fd (ps_error_t *err);

//  The stop signal waiting on signalfd fd, read: its number, or 0 when
//  none is waiting (fd is polled, not waited on).
int ps_signal_take (int fd);

//  Signal signo's name as users know it ("SIGINT"), in name (len bytes).
void ps_signal_name (int signo, char *name, size_t len);

#endif
