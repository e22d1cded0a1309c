//  Finding a sibling program: one ps-cluster executable that starts another
//  (the coordinator's launchers start ps-server and ps-worker, ps-worker
//  worker:0 of a chiefless cluster starts the coordinator) looks for it in
//  one place and one order, installed or in the build tree.

#ifndef PS_PROGRAM_H_INCLUDED
#define PS_PROGRAM_H_INCLUDED

#include <stddef.h>

//  The path of program name into buf (len bytes): $env (PS_SERVER,
//  PS_WORKER, PS_COORDINATOR) when set, else next to this executable
//  (/proc/self/exe: installed, every program is in one directory), else in
//  the build tree's directory for its role, ../subdir/name (subdir: ps,
//  worker, coordinator). Returns 0, or -1 when none of these is an
//  executable.
int ps_program_find (const char *env, const char *name, const char *subdir, char *buf,
                     size_t len);

#endif
