//  The run's outcome as the servers saw it (see ps_outcome.h).

#include "ps_outcome.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *
ps_outcome_servers (ps_client_t *client, int nservers, uint64_t done, json_t *mismatches,
                    int *unanswered)
{
    *unanswered = -1;
    json_t *servers = json_array ();
    for (int s = 0; s < nservers && client; s++) {
        ps_part_stats_t *stats = NULL;
        size_t count = 0;
        ps_error_t err;
        json_t *server = json_object ();
        json_object_set_new (server, "task", json_integer (s));
        int rc = ps_client_stats (client, s, &stats, &count, &err);
        if (rc == 0) {
            uint64_t updates = 0, duplicates = 0;
            json_t *parts = json_array ();
            for (size_t p = 0; p < count; p++) {
                updates += stats [p].updates;
                duplicates += stats [p].duplicates;
                json_array_append_new (parts,
                    json_pack ("{s:s, s:i, s:I, s:I, s:I}", "var", stats [p].var,
                               "part", (int) stats [p].part,
                               "updates", (json_int_t) stats [p].updates,
                               "recorded", (json_int_t) stats [p].recorded,
                               "duplicates", (json_int_t) stats [p].duplicates));
                if (stats [p].recorded != done)
                    json_array_append_new (mismatches,
                        json_pack ("{s:s, s:i, s:s, s:i, s:I, s:I}", "role", "ps", "task", s,
                                   "var", stats [p].var, "part", (int) stats [p].part,
                                   "recorded", (json_int_t) stats [p].recorded,
                                   "expected", (json_int_t) done));
            }
            json_object_set_new (server, "updates", json_integer ((json_int_t) updates));
            json_object_set_new (server, "duplicates", json_integer ((json_int_t) duplicates));
            json_object_set_new (server, "partitions", parts);
        }
        else {
            if (*unanswered < 0 && (rc == PS_ETIMEDOUT || rc == PS_EIO))
                *unanswered = s;
            json_object_set_new (server, "error", json_string (err.msg));
            json_array_append_new (mismatches,
                json_pack ("{s:s, s:i, s:s}", "role", "ps", "task", s, "error", err.msg));
        }
        free (stats);
        json_array_append_new (servers, server);
    }
    return servers;
}

//  The done record's entry of table name in tables, added when missing.
static json_t *
s_table_entry (json_t *tables, const char *name, int nservers)
{
    size_t i;
    json_t *entry;
    json_array_foreach (tables, i, entry)
        if (strcmp (json_string_value (json_object_get (entry, "table")), name) == 0)
            return entry;
    json_t *steps = json_array ();
    for (int s = 0; s < nservers; s++)
        json_array_append_new (steps, json_null ());
    json_t *pushes = json_deep_copy (steps);
    entry = json_pack ("{s:s, s:i, s:i, s:i, s:i, s:i, s:o, s:o}", "table", name, "rows", 0,
                       "created", 0, "evicted", 0, "dropped", 0, "oom", 0, "shard_steps", steps,
                       "shard_pushes", pushes);
    json_array_append_new (tables, entry);
    return entry;
}

//  Add n to entry's counter key.
static void
s_add (json_t *entry, const char *key, uint64_t n)
{
    json_int_t was = json_integer_value (json_object_get (entry, key));
    json_object_set_new (entry, key, json_integer (was + (json_int_t) n));
}

json_t *
ps_outcome_tables (ps_client_t *client, int nservers, uint64_t done, json_t *mismatches)
{
    json_t *tables = json_array ();
    for (int s = 0; s < nservers && client; s++) {
        ps_table_stats_t *stats = NULL;
        size_t count = 0;
        ps_error_t err;
        if (ps_client_table_stats (client, s, &stats, &count, &err) != 0) {
            json_array_append_new (mismatches,
                json_pack ("{s:s, s:i, s:s}", "role", "ps", "task", s, "error", err.msg));
            continue;
        }
        for (size_t t = 0; t < count; t++) {
            json_t *entry = s_table_entry (tables, stats [t].table, nservers);
            s_add (entry, "rows", stats [t].rows);
            s_add (entry, "created", stats [t].created);
            s_add (entry, "evicted", stats [t].evicted);
            s_add (entry, "dropped", stats [t].dropped);
            s_add (entry, "oom", stats [t].oom);
            json_array_set_new (json_object_get (entry, "shard_steps"), (size_t) s,
                                json_integer ((json_int_t) stats [t].steps));
            json_array_set_new (json_object_get (entry, "shard_pushes"), (size_t) s,
                                json_integer ((json_int_t) stats [t].pushes));
            if (stats [t].steps != done)
                json_array_append_new (mismatches,
                    json_pack ("{s:s, s:i, s:s, s:i, s:I, s:I}", "role", "ps", "task", s,
                               "table", stats [t].table, "shard", (int) stats [t].shard,
                               "recorded", (json_int_t) stats [t].steps,
                               "expected", (json_int_t) done));
        }
        free (stats);
    }
    return tables;
}

void
ps_outcome_describe (const json_t *mismatches, char *list, size_t size)
{
    size_t len = 0, i;
    json_t *m;
    *list = 0;
    json_array_foreach (mismatches, i, m) {
        const char *role = json_string_value (json_object_get (m, "role"));
        int task = (int) json_integer_value (json_object_get (m, "task"));
        const char *var = json_string_value (json_object_get (m, "var"));
        const char *table = json_string_value (json_object_get (m, "table"));
        const char *error = json_string_value (json_object_get (m, "error"));
        char item [192];
        if (error)
            snprintf (item, sizeof item, "%s:%d could not be asked (%s)", role, task, error);
        else
        if (table)
            snprintf (item, sizeof item, "%s:%d table %s shard %d applied %" JSON_INTEGER_FORMAT
                      " steps", role, task, table,
                      (int) json_integer_value (json_object_get (m, "shard")),
                      json_integer_value (json_object_get (m, "recorded")));
        else
        if (var)
            snprintf (item, sizeof item, "%s:%d %s part %d recorded %" JSON_INTEGER_FORMAT,
                      role, task, var, (int) json_integer_value (json_object_get (m, "part")),
                      json_integer_value (json_object_get (m, "recorded")));
        else
            snprintf (item, sizeof item, "%s:%d's replica recorded %" JSON_INTEGER_FORMAT,
                      role, task, json_integer_value (json_object_get (m, "recorded")));
        int n = snprintf (list + len, size - len, "%s%s", i ? "; " : "", item);
        if (n < 0 || (size_t) n >= size - len) {
            snprintf (list + len, size - len, "; ...");
            break;
        }
        len += (size_t) n;
    }
}
