//  Crash-safe files: the few system-call sequences that every file format
//  of ps-cluster (snapshots, checkpoint manifests) writes with, and the
//  directories they go in.
//
//  A file is replaced atomically by writing it under a temporary name,
//  fsyncing it, renaming it over the final name and fsyncing the directory,
//  so that after a crash at any point the path holds either the old file or
//  the whole new one, and a completed write survives a power loss.

#ifndef PS_FILE_H_INCLUDED
#define PS_FILE_H_INCLUDED

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

//  Create the directory path and any missing parents, like mkdir -p. An
//  existing directory is fine. Returns 0, PS_EINVAL for an empty path or
//  one of PATH_MAX bytes or more, or PS_EIO naming the directory that
//  could not be made or exists as something else.
int ps_file_mkdirs (const char *path, ps_error_t *err);

#endif
