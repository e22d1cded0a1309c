//  Files: the few system-call sequences that every file format of
//  ps-cluster (snapshots, checkpoint manifests, job and cluster files,
//  model specs, data sets) is written and read with, the directories they
//  go in, and the careful removal of a directory tree that pruning
//  checkpoints needs.
//
//  A file is replaced atomically by writing it under a temporary name,
//  fsyncing it, renaming it over the final name and fsyncing the directory,
//  so that after a crash at any point the path holds either the old file or
//  the whole new one, and a completed write survives a power loss.
//
//  A file is read only when it is a regular file. A path that names a FIFO
//  would block the reader until someone writes to it, perhaps for ever, a
//  character device may never end, and a directory has nothing to parse:
//  each is refused at once, with a message naming the path and what it is.

#ifndef PS_FILE_H_INCLUDED
#define PS_FILE_H_INCLUDED

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

//  Write all of data to fd, resuming after short writes and signals, and
//  fold what was written into *crc (zlib's CRC-32) unless crc is NULL.
//  Returns 0, or -1 with errno set.
int ps_file_write_all (int fd, const void *data, size_t len, uint32_t *crc);

//  fsync the directory dir, so that the entries created, renamed or removed
//  in it are on disk. Returns 0 or PS_EIO naming the directory and call.
int ps_file_fsync_dir (const char *dir, ps_error_t *err);

//  Writes the content of a file to fd; returns 0, or -1 with errno set.
typedef int (ps_file_writer_fn) (int fd, void *arg);

//  Replace path atomically with what write (fd, arg) writes: into tmp
//  (created or truncated), then fsync, close, rename to path and fsync the
//  directory holding path. Returns 0, or PS_EIO naming path, the failing
//  call and its object; tmp is removed on failure.
int ps_file_write_atomic (const char *path, const char *tmp, ps_file_writer_fn *write,
                          void *arg, ps_error_t *err);

//  The same through a temporary file beside path, named PATH.tmp.PID, for a
//  writer whose file has no temporary name of its own (the exports).
int ps_file_write_beside (const char *path, ps_file_writer_fn *write, void *arg,
                          ps_error_t *err);

//  Remove path and, when it is a directory, everything under it, never
//  following a symbolic link (a link is removed, not what it points to).
//  A path that does not exist is fine. Returns 0 or PS_EIO naming the
//  entry and the call that failed.
int ps_file_remove_tree (const char *path, ps_error_t *err);

//  The next entry of dir, opened from path, other than "." and "..": 1 with
//  *entry set, 0 at the end, or PS_EIO naming path when readdir fails
//  (which a bare readdir loop would take for the end).
int ps_file_next_entry (DIR *dir, const char *path, struct dirent **entry, ps_error_t *err);

//  Open path for reading, refusing at once what is not a regular file
//  (the open itself does not wait on a FIFO). Returns a blocking,
//  close-on-exec descriptor, or a negative code: PS_ENOTFOUND ("PATH: not
//  found"), PS_EINVAL ("PATH: a FIFO, not a regular file"), or PS_EIO
//  naming the path and the failing call.
int ps_file_open_regular (const char *path, ps_error_t *err);

//  Read the whole regular file at path, of at most max bytes, into *data
//  (malloc'd, NUL-terminated after its *len bytes; free it). Returns 0, or
//  as ps_file_open_regular, or PS_ETOOBIG when the file is larger than max,
//  PS_EIO when a read fails or it shrinks while read; *data is NULL then.
int ps_file_read (const char *path, size_t max, char **data, size_t *len, ps_error_t *err);

//  Create the directory path and any missing parents, like mkdir -p. An
//  existing directory is fine. Returns 0, PS_EINVAL for an empty path or
//  one of PATH_MAX bytes or more, or PS_EIO naming the directory that
//  could not be made or exists as something else.
int ps_file_mkdirs (const char *path, ps_error_t *err);

#endif
