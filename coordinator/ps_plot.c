//  coordinator plot (see ps_plot.h).

#include "ps_plot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "ps_file.h"
#include "ps_log.h"

//  The largest metrics file read: far more than any run writes.
#define S_MAX_FILE  (1024u * 1024 * 1024)

extern char **environ;

//  A failure or a recovery, placed at a step.
typedef struct {
    double time_s, step;        //  step NAN: placed by time
    bool failure;
    char label [80];
} s_event_t;

//  What the metrics file holds that is drawn.
typedef struct {
    double (*progress) [5];     //  time_s, step, loss, accuracy, samples_per_s
    size_t nprogress;
    double (*evals) [4];        //  step, test_accuracy, test_loss, test_mae
    size_t nevals;
    bool regression;            //  an eval record had test_mae (and no accuracy)
    s_event_t *events;
    size_t nevents;
    size_t records;
} s_curves_t;

static void
s_curves_free (s_curves_t *curves)
{
    free (curves->progress);
    free (curves->evals);
    free (curves->events);
}

//  Grow array (of n elements of size bytes) by one, zeroed; abort when
//  out of memory.
static void *
s_append (void *array, size_t *n, size_t size)
{
    char *grown = realloc (array, (*n + 1) * size);
    if (!grown)
        abort ();
    memset (grown + *n * size, 0, size);
    (*n)++;
    return grown;
}

//  A record's number by key, NAN when it has none.
static double
s_number (json_t *record, const char *key)
{
    json_t *value = json_object_get (record, key);
    return json_is_number (value) ? json_number_value (value) : NAN;
}

static void
s_add_event (s_curves_t *curves, json_t *record, bool failure, const char *format, ...)
    __attribute__ ((format (printf, 4, 5)));

static void
s_add_event (s_curves_t *curves, json_t *record, bool failure, const char *format, ...)
{
    curves->events = s_append (curves->events, &curves->nevents, sizeof curves->events [0]);
    s_event_t *event = &curves->events [curves->nevents - 1];
    event->time_s = s_number (record, "time_s");
    event->step = s_number (record, "step");
    event->failure = failure;
    va_list args;
    va_start (args, format);
    vsnprintf (event->label, sizeof event->label, format, args);
    va_end (args);
}

//  Take what is drawn from one record.
static void
s_take (s_curves_t *curves, json_t *record)
{
    const char *event = json_string_value (json_object_get (record, "event"));
    const char *role = json_string_value (json_object_get (record, "role"));
    json_int_t task = json_integer_value (json_object_get (record, "task"));
    if (!event)
        return;
    if (strcmp (event, "progress") == 0) {
        curves->progress = s_append (curves->progress, &curves->nprogress,
                                     sizeof curves->progress [0]);
        double *row = curves->progress [curves->nprogress - 1];
        row [0] = s_number (record, "time_s");
        row [1] = s_number (record, "step");
        row [2] = s_number (record, "loss");
        row [3] = s_number (record, "accuracy");
        row [4] = s_number (record, "samples_per_s");
    }
    else
    if (strcmp (event, "eval") == 0) {
        curves->evals = s_append (curves->evals, &curves->nevals, sizeof curves->evals [0]);
        double *row = curves->evals [curves->nevals - 1];
        double loss = s_number (record, "test_loss");
        row [0] = s_number (record, "step");
        row [1] = s_number (record, "test_accuracy");
        //  A loss that was not finite is written as -1.
        row [2] = loss >= 0 ? loss : NAN;
        //  A regression model's test loss is its mse; its mae joins it.
        row [3] = s_number (record, "test_mae");
        curves->regression |= isfinite (row [3]);
    }
    else
    if (strcmp (event, "worker_failed") == 0)
        s_add_event (curves, record, true, "worker %lld failed", (long long) task);
    else
    if (strcmp (event, "server_failed") == 0)
        s_add_event (curves, record, true, "server %lld failed", (long long) task);
    else
    if (strcmp (event, "recovered") == 0)
        s_add_event (curves, record, false, "restored step %.0f", s_number (record, "step"));
    else
    if ((strcmp (event, "registered") == 0
         && json_is_true (json_object_get (record, "restarted")))
    ||  strcmp (event, "rejoined") == 0) {
        s_add_event (curves, record, false, "%s %lld back",
                     !role ? "task" : strcmp (role, "ps") == 0 ? "server" : role,
                     (long long) task);
        //  A registration's step is the time's: it has none of its own.
        curves->events [curves->nevents - 1].step = NAN;
    }
}

//  Read the metrics file into curves.
static int
s_read (const char *path, s_curves_t *curves, ps_error_t *err)
{
    char *data;
    size_t len;
    int rc = ps_file_read (path, S_MAX_FILE, &data, &len, err);
    if (rc)
        return rc;
    char *line = data;
    for (int number = 1; *line; number++) {
        char *end = strchr (line, '\n');
        if (end)
            *end = 0;
        if (strspn (line, " \t\r") != strlen (line)) {
            json_error_t jerr;
            json_t *record = json_loads (line, 0, &jerr);
            if (!json_is_object (record)) {
                json_decref (record);
                free (data);
                return ps_error_set (err, PS_EINVAL, "%s: line %d: expected a JSON object "
                                     "(a metrics record, schemas/metrics.md)%s%s", path, number,
                                     record ? "" : ": ", record ? "" : jerr.text);
            }
            curves->records++;
            s_take (curves, record);
            json_decref (record);
        }
        if (!end)
            break;
        line = end + 1;
    }
    free (data);
    return 0;
}

//  The step the run had reached at time t, between the progress records
//  around it.
static double
s_step_at (const s_curves_t *curves, double t)
{
    if (t <= curves->progress [0][0])
        return curves->progress [0][1] * (t > 0 ? t / curves->progress [0][0] : 0);
    for (size_t i = 1; i < curves->nprogress; i++) {
        const double *a = curves->progress [i - 1], *b = curves->progress [i];
        if (t <= b [0])
            return b [0] > a [0] ? a [1] + (b [1] - a [1]) * (t - a [0]) / (b [0] - a [0])
                                 : b [1];
    }
    return curves->progress [curves->nprogress - 1][1];
}

//  Write text to dir/name. Returns 0 or PS_EIO.
static int
s_write_file (const char *dir, const char *name, const char *text, ps_error_t *err)
{
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen (path, "w");
    if (!f || fputs (text, f) == EOF || fclose (f) != 0) {
        int saved = errno;
        return ps_error_set (err, PS_EIO, "writing %s: %s", path, strerror (saved));
    }
    return 0;
}

//  A gnuplot single-quoted string of text: quotes doubled.
static void
s_quoted (FILE *out, const char *text)
{
    fputc ('\'', out);
    for (const char *c = text; *c; c++) {
        if (*c == '\'')
            fputc ('\'', out);
        fputc (*c, out);
    }
    fputc ('\'', out);
}

//  The data files and the script, as text (open_memstream).
static int
s_write_inputs (const ps_plot_config_t *cfg, const s_curves_t *curves, const char *dir,
                ps_error_t *err)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    if (!out)
        abort ();
    for (size_t i = 0; i < curves->nprogress; i++)
        fprintf (out, "%.17g %.17g %.17g %.17g\n", curves->progress [i][1],
                 curves->progress [i][2], curves->progress [i][3], curves->progress [i][4]);
    if (fclose (out) != 0)
        abort ();
    int rc = s_write_file (dir, "progress.dat", text, err);
    free (text);
    if (rc)
        return rc;
    out = open_memstream (&text, &size);
    if (!out)
        abort ();
    //  gnuplot reads NaN as a missing point.
    for (size_t i = 0; i < curves->nevals; i++)
        fprintf (out, "%.17g %.17g %.17g %.17g\n", curves->evals [i][0],
                 curves->evals [i][1], curves->evals [i][2], curves->evals [i][3]);
    if (fclose (out) != 0)
        abort ();
    rc = s_write_file (dir, "eval.dat", text, err);
    free (text);
    if (rc)
        return rc;

    out = open_memstream (&text, &size);
    if (!out)
        abort ();
    double last = curves->progress [curves->nprogress - 1][1];
    for (size_t i = 0; i < curves->nevals; i++)
        if (curves->evals [i][0] > last)
            last = curves->evals [i][0];
    fprintf (out, "set terminal pngcairo size %d,%d font 'sans,9'\nset output ", cfg->width,
             cfg->height);
    s_quoted (out, cfg->out_path);
    fprintf (out, "\nset datafile missing NaN\nset grid\nset key top right\n"
                  "set xrange [0:%.17g]\nset lmargin 12\n", last > 0 ? last : 1);
    //  The events: a dashed line across each panel, labelled in the top
    //  one (labels are drawn in the panel plotted after they are set).
    for (size_t i = 0; i < curves->nevents; i++) {
        const s_event_t *event = &curves->events [i];
        double step = isfinite (event->step) ? event->step : s_step_at (curves, event->time_s);
        fprintf (out, "set arrow %zu from %.17g, graph 0 to %.17g, graph 1 nohead dt 2 lw 1.5 "
                      "lc rgb '%s'\n", i + 1, step, step,
                 event->failure ? "#d62728" : "#2ca02c");
        fprintf (out, "set label %zu ", i + 1);
        s_quoted (out, event->label);
        fprintf (out, " at %.17g, graph %.2f left offset 0.5,0 tc rgb '%s' font 'sans,8'\n",
                 step, 0.92 - 0.08 * (double) (i % 4), event->failure ? "#d62728" : "#2ca02c");
    }
    fprintf (out, "set multiplot layout 3,1 title %s\n",
             "'training: loss, accuracy and samples/s by step (dashed: failures in red, "
             "recoveries in green)'");
    fprintf (out, "set ylabel 'loss'\nplot 'progress.dat' using 1:2 with lines lw 2 lc rgb "
                  "'#1f77b4' title 'training loss'%s%s\n", curves->nevals
             ? ", 'eval.dat' using 1:3 with linespoints pt 7 ps 0.8 lc rgb '#ff7f0e' "
               "title 'test loss (evaluations)'" : "", curves->regression
             ? ", 'eval.dat' using 1:4 with linespoints pt 5 ps 0.8 lc rgb '#2ca02c' "
               "title 'test mae (evaluations)'" : "");
    fprintf (out, "unset label\nset ylabel 'accuracy'\nset yrange [0:1]\nset key bottom right\n"
                  "plot 'progress.dat' using 1:3 with lines lw 2 lc rgb '#1f77b4' "
                  "title 'training accuracy'%s\n", curves->nevals
             ? ", 'eval.dat' using 1:2 with linespoints pt 7 ps 0.8 lc rgb '#ff7f0e' "
               "title 'test accuracy (evaluations)'" : "");
    fprintf (out, "set yrange [0:*]\nset key bottom right\nset ylabel 'samples/s'\n"
                  "set xlabel 'step'\nplot 'progress.dat' using 1:4 with lines lw 2 "
                  "lc rgb '#1f77b4' title 'samples/s'\nunset multiplot\n");
    if (fclose (out) != 0)
        abort ();
    rc = s_write_file (dir, "plot.gp", text, err);
    free (text);
    return rc;
}

//  Run gnuplot on dir/plot.gp in dir, its output in dir/gnuplot.log.
static int
s_gnuplot (const char *dir, ps_error_t *err)
{
    char log [PATH_MAX];
    snprintf (log, sizeof log, "%s/gnuplot.log", dir);
    posix_spawn_file_actions_t actions;
    if (posix_spawn_file_actions_init (&actions) != 0
    ||  posix_spawn_file_actions_addopen (&actions, STDOUT_FILENO, log,
                                          O_WRONLY | O_CREAT | O_TRUNC, 0600) != 0
    ||  posix_spawn_file_actions_adddup2 (&actions, STDOUT_FILENO, STDERR_FILENO) != 0)
        abort ();
    //  gnuplot reads the data files by their names in dir: it runs there,
    //  through the shell's cd, since posix_spawn has no working directory.
    char *argv [] = { "/bin/sh", "-c", "cd \"$1\" && exec gnuplot plot.gp", "sh", (char *) dir,
                      NULL };
    pid_t pid;
    int rc = posix_spawn (&pid, "/bin/sh", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy (&actions);
    if (rc != 0)
        return ps_error_set (err, PS_EIO, "cannot run /bin/sh for gnuplot: %s", strerror (rc));
    int status;
    while (waitpid (pid, &status, 0) < 0)
        if (errno != EINTR)
            return ps_error_set (err, PS_EIO, "waiting for gnuplot: %s", strerror (errno));
    if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
        return 0;
    //  The shell's 127: no gnuplot on the PATH.
    if (WIFEXITED (status) && WEXITSTATUS (status) == 127)
        return ps_error_set (err, PS_ENOTFOUND, "gnuplot is not installed (or not on the PATH): "
                             "install it (Debian: apt-get install gnuplot-nox)");
    //  gnuplot's message starts at '"plot.gp" line N:' (the lines before
    //  it echo the script's line at fault), or else is its last line; its
    //  lines are joined by "; ".
    char *text = NULL;
    size_t len = 0;
    ps_error_t ignored;
    char last [300] = "";
    if (ps_file_read (log, 64 * 1024, &text, &len, &ignored) == 0) {
        while (len > 0 && (text [len - 1] == '\n' || text [len - 1] == ' '))
            text [--len] = 0;
        char *newline = strrchr (text, '\n');
        const char *from = strstr (text, "\"plot.gp\" line");
        if (!from)
            from = newline ? newline + 1 : text;
        size_t at = 0;
        for (; *from && at + 3 < sizeof last; from++)
            if (*from == '\n') {
                last [at++] = ';';
                last [at++] = ' ';
            }
            else
                last [at++] = *from;
        last [at] = 0;
    }
    rc = ps_error_set (err, PS_EIO, "gnuplot failed (%s %d)%s%s",
                       WIFEXITED (status) ? "exit status" : "signal",
                       WIFEXITED (status) ? WEXITSTATUS (status) : WTERMSIG (status),
                       *last ? ": " : "", last);
    free (text);
    return rc;
}

int
ps_plot_run (const ps_plot_config_t *cfg, ps_plot_summary_t *summary, ps_error_t *err)
{
    memset (summary, 0, sizeof *summary);
    s_curves_t curves;
    memset (&curves, 0, sizeof curves);
    int rc = s_read (cfg->metrics_path, &curves, err);
    if (rc == 0 && curves.records == 0)
        rc = ps_error_set (err, PS_EINVAL, "%s has no records: expected the JSON lines of "
                           "--metrics (schemas/metrics.md)", cfg->metrics_path);
    else
    if (rc == 0 && curves.nprogress == 0)
        rc = ps_error_set (err, PS_EINVAL, "%s has %zu records but no \"progress\" record to "
                           "draw (one per log_seconds of the job; standalone, per --progress)",
                           cfg->metrics_path, curves.records);
    char dir [PATH_MAX] = "";
    if (rc == 0) {
        const char *tmp = getenv ("TMPDIR");
        snprintf (dir, sizeof dir, "%s/ps-plot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp (dir)) {
            rc = ps_error_set (err, PS_EIO, "mkdtemp %s: %s", dir, strerror (errno));
            *dir = 0;
        }
    }
    //  gnuplot runs in the temporary directory, so a relative output path
    //  is made absolute; it writes OUT.tmp, renamed to OUT once complete,
    //  so that a failure leaves no partial image (nor spoils an old one).
    char out [PATH_MAX], partial [PATH_MAX + 8];
    char cwd [PATH_MAX] = "";
    if (rc == 0 && cfg->out_path [0] != '/' && !getcwd (cwd, sizeof cwd))
        rc = ps_error_set (err, PS_EIO, "getcwd: %s", strerror (errno));
    if (rc == 0
    &&  snprintf (out, sizeof out, "%s%s%s", cwd, *cwd ? "/" : "", cfg->out_path)
        >= (int) sizeof out)
        rc = ps_error_set (err, PS_EINVAL, "--out %s: the path is too long", cfg->out_path);
    ps_plot_config_t partial_cfg = *cfg;
    if (rc == 0) {
        snprintf (partial, sizeof partial, "%s.tmp", out);
        partial_cfg.out_path = partial;
        rc = s_write_inputs (&partial_cfg, &curves, dir, err);
    }
    if (rc == 0)
        rc = s_gnuplot (dir, err);
    struct stat st;
    if (rc == 0 && (stat (partial, &st) != 0 || st.st_size == 0))
        rc = ps_error_set (err, PS_EIO, "gnuplot wrote no image to %s", partial);
    if (rc == 0 && rename (partial, out) != 0)
        rc = ps_error_set (err, PS_EIO, "renaming %s to %s: %s", partial, out, strerror (errno));
    if (rc && partial_cfg.out_path == partial && unlink (partial) != 0 && errno != ENOENT)
        ps_warn ("cannot remove %s: %s", partial, strerror (errno));
    ps_error_t ignored;
    if (*dir && ps_file_remove_tree (dir, &ignored))
        ps_warn ("cannot remove %s: %s", dir, ignored.msg);
    if (rc == 0) {
        summary->progress = curves.nprogress;
        summary->evaluations = curves.nevals;
        for (size_t i = 0; i < curves.nevents; i++)
            *(curves.events [i].failure ? &summary->failures : &summary->recoveries) += 1;
        summary->last_step = curves.progress [curves.nprogress - 1][1];
    }
    s_curves_free (&curves);
    return rc;
}
