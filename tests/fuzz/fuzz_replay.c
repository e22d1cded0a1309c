//  Runs a fuzz target over files without libFuzzer: how the gcc builds
//  replay the fuzz inputs (the generated seeds, and the committed inputs
//  of tests/fuzz/corpus, among them every input that once broke a target)
//  as regression tests. Linked with one fuzz_<name>.c:
//
//    fuzz_replay_<name> FILE_OR_DIRECTORY...
//
//  Every file named, and every file in a directory named, is passed to
//  LLVMFuzzerTestOneInput once, in name order. A broken oracle or a
//  sanitizer report stops the program as it stops the fuzzer; the last
//  "replay:" line names the input.

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
int LLVMFuzzerInitialize (int *argc, char ***argv) __attribute__ ((weak));

static void
s_replay_file (const char *path)
{
    FILE *file = fopen (path, "rbe");
    if (!file) {
        fprintf (stderr, "fuzz_replay: cannot open %s: %s\n", path, strerror (errno));
        exit (1);
    }
    uint8_t *data = NULL;
    size_t size = 0, cap = 0;
    while (!feof (file) && !ferror (file)) {
        if (size == cap) {
            cap = cap ? 2 * cap : 4096;
            data = realloc (data, cap);
            if (!data)
                abort ();
        }
        size += fread (data + size, 1, cap - size, file);
    }
    if (ferror (file)) {
        fprintf (stderr, "fuzz_replay: cannot read %s\n", path);
        exit (1);
    }
    fclose (file);
    printf ("replay: %s (%zu bytes)\n", path, size);
    fflush (stdout);
    //  A copy of exactly size bytes, so that ASan sees a read past the end.
    uint8_t *input = malloc (size ? size : 1);
    if (!input)
        abort ();
    memcpy (input, data, size);
    free (data);
    LLVMFuzzerTestOneInput (input, size);
    free (input);
}

static int
s_visible (const struct dirent *entry)
{
    return entry->d_name [0] != '.';
}

static size_t
s_replay (const char *path)
{
    struct stat st;
    if (stat (path, &st) != 0) {
        fprintf (stderr, "fuzz_replay: %s: %s\n", path, strerror (errno));
        exit (1);
    }
    if (!S_ISDIR (st.st_mode)) {
        s_replay_file (path);
        return 1;
    }
    struct dirent **entries;
    int count = scandir (path, &entries, s_visible, alphasort);
    if (count < 0) {
        fprintf (stderr, "fuzz_replay: cannot list %s: %s\n", path, strerror (errno));
        exit (1);
    }
    size_t replayed = 0;
    for (int i = 0; i < count; i++) {
        char child [PATH_MAX];
        snprintf (child, sizeof child, "%s/%s", path, entries [i]->d_name);
        replayed += s_replay (child);
        free (entries [i]);
    }
    free (entries);
    return replayed;
}

int
main (int argc, char *argv [])
{
    if (argc < 2) {
        fprintf (stderr, "usage: %s FILE_OR_DIRECTORY...\n", argv [0]);
        return 2;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize (&argc, &argv);
    size_t replayed = 0;
    for (int i = 1; i < argc; i++)
        replayed += s_replay (argv [i]);
    printf ("%zu inputs replayed\n", replayed);
    return 0;
}
