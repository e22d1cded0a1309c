//  The mirrored mode: every worker holds a replica of all the variables,
//  and a ring all-reduce sums each global step's gradients so that every
//  replica applies the same update (Horovod's ring, made elastic).
//
//  The coordinator moves the whole ring from one phase to the next: it
//  holds each member's work_request until every member has asked, then
//  answers them all with the next phase's work (join a ring, run a global
//  step, evaluate a shard, save the replica). A global step hands each
//  member one batch of the schedule, so the schedule counts batches
//  exactly as in async mode and a checkpoint's done set means the same in
//  both modes.
//
//  When a member dies the members still in the phase are told to abort,
//  and once every live worker is held again the ring is formed anew. A
//  global step cut short counts if any survivor completed it (the
//  all-reduce gave every member that finished the same sum, and a
//  survivor that finished applied it), and goes back to the queue
//  otherwise. The root of the new ring is a survivor whose replica is at
//  the committed count; every other member (a survivor that fell behind,
//  a worker that joins or comes back) takes over its replica. With no
//  such survivor, the root loads the newest checkpoint. Servers keep
//  nothing in this mode. Its operations are ps_mode_mirrored (ps_mode.h);
//  nothing else is public.
//
//  ps_mode_mirrored.c is about 900 lines, over the project's 800: it is
//  one state machine (the ring's phases and what each outcome means for
//  the members' replicas), and every part of it reads and changes the
//  members' state; cut in two, each half would need the other's
//  internals.

#ifndef PS_MODE_MIRRORED_H_INCLUDED
#define PS_MODE_MIRRORED_H_INCLUDED

#include "ps_mode.h"

extern const ps_mode_ops_t ps_mode_mirrored;

#endif
