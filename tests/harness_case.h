//  The harness's helpers for cmocka test cases: where harness.h returns an
//  error for the caller to judge (it serves benchmarks too), these fail the
//  running case themselves, with a message naming the file, code or
//  endpoint that went wrong, so that a test reads as the steps it takes.
//  They hold what tests had each written again: checking a call's result,
//  reading and writing whole files, counting a directory's entries, a
//  temporary directory per case, a free loopback endpoint, and the relative
//  error of one float vector against another.

#ifndef PS_HARNESS_CASE_H_INCLUDED
#define PS_HARNESS_CASE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

//  Fail the case, naming the code and err's message, unless rc is 0.
void harness_ok (int rc, const ps_error_t *err);

//  The whole of path in a new buffer, with a NUL byte after its *len
//  bytes (so text can be read as a string). Fails the case when the file
//  cannot be read.
uint8_t *harness_slurp (const char *path, size_t *len);

//  Fail the case unless path holds exactly the len bytes of want.
void harness_file_is (const char *path, const uint8_t *want, size_t len);

//  Replace path with len bytes of data. Fails the case when it cannot.
void harness_spit (const char *path, const uint8_t *data, size_t len);

//  A ps_tensor_t fill function over bytes in memory (its arg a
//  harness_filler_t): copies what the writer asks for, and fails the case
//  unless the writer asks for consecutive ranges; counts the calls.
typedef struct {
    const uint8_t *bytes;
    uint64_t next;              //  the offset the next call must ask for
    int calls;
} harness_filler_t;

void harness_fill (void *arg, uint64_t at, void *buf, size_t len);

//  The number of entries of a directory besides . and .. Fails the case
//  when it cannot be read.
int harness_dir_entries (const char *path);

//  Set *buf to a loopback endpoint, tcp://127.0.0.1:PORT, whose port
//  nobody listens on now. Fails the case when no port can be had.
void harness_free_endpoint (char *buf, size_t len);

//  A cmocka setup and teardown that give each case a fresh temporary
//  directory. The fixture is size bytes, zeroed, and must begin with the
//  directory's name, a char array of HARNESS_DIR_SIZE bytes (tests add the
//  paths they derive from it after it); *state points to it. The teardown
//  removes the directory with all it holds and frees the fixture.
#define HARNESS_DIR_SIZE 64
int harness_dir_setup (void **state, size_t size);
int harness_dir_teardown (void **state);

//  ||a - b|| / max (||a||, ||b||) over n floats, in double; 0 when both are
//  zero. NaN anywhere gives NaN, which no `err < tol` check lets through.
double harness_rel_error (const float *a, const float *b, size_t n);

#endif
