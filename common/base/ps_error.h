//  Error codes and error reports shared by every ps-cluster module.
//
//  Functions return 0 on success or one of the negative codes below. Where
//  the caller needs to know what exactly was wrong (which file, which key,
//  which shape), the function also fills a ps_error_t, whose message names
//  the offending thing and what was expected. A ps_error_t pointer may be
//  NULL when the caller only wants the code.

#ifndef PS_ERROR_H_INCLUDED
#define PS_ERROR_H_INCLUDED

#include <stddef.h>

//  C linkage also when included from CUDA C++ (the GPU backend).
#ifdef __cplusplus
extern "C" {
#endif

//  Positive status: not an error, the request was a repeat.
#define PS_DUPLICATE    1

#define PS_OK           0
#define PS_EINVAL      -1   //  invalid argument or configuration
#define PS_EPROTO      -2   //  malformed or unexpected message
#define PS_ESHAPE      -3   //  shape or length mismatch
#define PS_ENOTFOUND   -4   //  no such partition, file or key
#define PS_EEXIST      -5   //  exists with a different definition
#define PS_EIO         -6   //  a system call failed
#define PS_ECORRUPT    -7   //  checksum, magic or length check failed
#define PS_ETIMEDOUT   -8   //  a peer did not answer in time
#define PS_EREMOTE     -9   //  the peer answered with an error reply
#define PS_ETOOBIG    -10   //  larger than a configured limit
#define PS_EVERSION   -11   //  unsupported protocol or format version
#define PS_ECANCELED  -12   //  aborted on request before it completed
#define PS_EBUSY      -13   //  held by someone else now; try again later
#define PS_EPERM      -14   //  the authenticated peer may not do this
#define PS_ENONFINITE -15   //  a gradient holds NaN or an infinity

//  How a ps-server's error message says that a push was refused because
//  its tables could pass the server's memory limit (ps-server
//  --memory-limit): the coordinator fails the run at once on it, since
//  retrying cannot make room.
#define PS_MEMORY_LIMIT_TEXT "over the server's memory limit"

//  The exit status of a program that cannot run on this machine as it was
//  told to (`ps-worker --device gpu` without a usable GPU): started again
//  it would fail the same way, so a supervisor does not restart it
//  (sysexits.h's EX_UNAVAILABLE).
#define PS_EXIT_UNUSABLE 69

#define PS_ERROR_MSG_MAX 512

typedef struct {
    int code;
    char msg [PS_ERROR_MSG_MAX];
} ps_error_t;

//  Return a short stable name for a code ("bad_shape", ...). These names
//  are also the error codes carried in error replies on the wire.
const char *ps_error_name (int code);

//  Map a wire error name back to a code. Unknown names give PS_EREMOTE.
int ps_error_from_name (const char *name);

//  Record an error in err (when not NULL) and return code, so callers can
//  write `return ps_error_set (err, PS_EINVAL, "...", ...);`.
int ps_error_set (ps_error_t *err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

//  Prefix the message already in err (when not NULL) with more context
//  ("file x: ..."), and return code, the failure being reported.
int ps_error_prefix (ps_error_t *err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

#ifdef __cplusplus
}
#endif

#endif
