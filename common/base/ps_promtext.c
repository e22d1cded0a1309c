//  The Prometheus text exposition format (see ps_promtext.h).

#include "ps_promtext.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct _ps_promtext_t {
    FILE *out;                  //  an open_memstream on text
    char *text;
    size_t size;
};

static void
s_open (ps_promtext_t *self)
{
    self->text = NULL;
    self->size = 0;
    if (!(self->out = open_memstream (&self->text, &self->size)))
        abort ();
}

ps_promtext_t *
ps_promtext_new (void)
{
    ps_promtext_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    s_open (self);
    return self;
}

void
ps_promtext_destroy (ps_promtext_t **self_p)
{
    ps_promtext_t *self = *self_p;
    if (!self)
        return;
    fclose (self->out);
    free (self->text);
    free (self);
    *self_p = NULL;
}

void
ps_promtext_family (ps_promtext_t *self, const char *name, const char *type, const char *help)
{
    fprintf (self->out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

//  A value as the format spells it: %.17g reads back exactly.
static void
s_value (ps_promtext_t *self, double value)
{
    if (isnan (value))
        fputs (" NaN\n", self->out);
    else if (isinf (value))
        fputs (value > 0 ? " +Inf\n" : " -Inf\n", self->out);
    else
        fprintf (self->out, " %.17g\n", value);
}

void
ps_promtext_sample (ps_promtext_t *self, const char *name, const char *label,
                    const char *label_value, double value)
{
    //  Label values here are numbers and names the program chose, never
    //  text with quotes, backslashes or line breaks to escape.
    if (label)
        fprintf (self->out, "%s{%s=\"%s\"}", name, label, label_value);
    else
        fputs (name, self->out);
    s_value (self, value);
}

void
ps_promtext_histogram (ps_promtext_t *self, const char *name, const char *help,
                       const double *bounds, const uint64_t *counts, size_t n,
                       uint64_t above_last, double sum)
{
    ps_promtext_family (self, name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < n; i++) {
        cumulative += counts [i];
        fprintf (self->out, "%s_bucket{le=\"%g\"} %llu\n", name, bounds [i],
                 (unsigned long long) cumulative);
    }
    cumulative += above_last;
    fprintf (self->out, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long) cumulative);
    fprintf (self->out, "%s_sum", name);
    s_value (self, sum);
    fprintf (self->out, "%s_count %llu\n", name, (unsigned long long) cumulative);
}

char *
ps_promtext_take (ps_promtext_t *self)
{
    //  Closing the stream makes text final; a failure to grow it is a
    //  failure to allocate.
    if (fclose (self->out) != 0)
        abort ();
    char *text = self->text;
    s_open (self);
    return text;
}
