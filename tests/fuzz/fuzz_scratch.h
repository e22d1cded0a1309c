//  A fuzz process's scratch directory: the targets whose code reads files
//  (snapshots, checkpoints, IDX files, job files) write each input there
//  first, and the ps-server target points its socket and its snapshot
//  requests there.
//
//  The directory is made on first use under $PS_FUZZ_TMPDIR when set, else
//  under /dev/shm (a tmpfs, where the fsyncs of the snapshot writer cost
//  nothing), else under $TMPDIR or /tmp, and removed with everything in it
//  when the process exits normally. A failure here is the harness's, not a
//  finding: it stops the process with the reason.

#ifndef FUZZ_SCRATCH_H_INCLUDED
#define FUZZ_SCRATCH_H_INCLUDED

#include <stddef.h>

//  The directory's path.
const char *fuzz_scratch_dir (void);

//  Write size bytes to the file name (relative to the directory; its
//  parent directories must exist) and put the file's full path in path.
void fuzz_scratch_write (const char *name, const void *data, size_t size,
                         char *path, size_t len);

//  Make the directory name (relative to the directory) and put its full
//  path in path.
void fuzz_scratch_mkdir (const char *name, char *path, size_t len);

//  Remove everything inside the directory, keeping the directory.
void fuzz_scratch_clear (void);

#endif
