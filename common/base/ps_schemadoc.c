//  Reading a JSON Schema document; see ps_schemadoc.h.

#include "ps_schemadoc.h"

#include <assert.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_jsonvalue.h"


const json_t *
ps_schemadoc_resolve (const json_t *root, const char *ref)
{
    assert (ref);
    if (strcmp (ref, "#") == 0)
        return root;
    if (strncmp (ref, "#/$defs/", 8) == 0 && !strchr (ref + 8, '/') && !strchr (ref + 8, '~'))
        return json_object_get (json_object_get (root, "$defs"), ref + 8);
    return NULL;
}


static void s_describe (const json_t *root, const json_t *schema, char *buf, size_t size,
                        int depth);

static void
s_append (char *buf, size_t size, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static void
s_append (char *buf, size_t size, const char *fmt, ...)
{
    size_t used = strlen (buf);
    if (used + 1 >= size)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (buf + used, size - used, fmt, args);
    va_end (args);
}

//  The range of a number (" in 1 .. 65536", " > 0", " in [0, 1)").
static void
s_range (const json_t *schema, bool integer, char *buf, size_t size)
{
    const json_t *low = json_object_get (schema, "exclusiveMinimum");
    bool low_open = low != NULL;
    if (!low)
        low = json_object_get (schema, "minimum");
    const json_t *high = json_object_get (schema, "exclusiveMaximum");
    bool high_open = high != NULL;
    if (!high)
        high = json_object_get (schema, "maximum");
    char a [40], b [40];
    if (low)
        ps_jsonvalue_number (low, a, sizeof a);
    if (high)
        ps_jsonvalue_number (high, b, sizeof b);
    if (low && high && integer && !low_open && !high_open)
        s_append (buf, size, " in %s .. %s", a, b);
    else
    if (low && high)
        s_append (buf, size, " in %c%s, %s%c", low_open ? '(' : '[', a, b, high_open ? ')' : ']');
    else
    if (low)
        s_append (buf, size, " %s %s", low_open ? ">" : ">=", a);
    else
    if (high)
        s_append (buf, size, " %s %s", high_open ? "<" : "<=", b);
}

static void
s_describe_type (const json_t *schema, const char *type, char *buf, size_t size)
{
    if (strcmp (type, "integer") == 0 || strcmp (type, "number") == 0) {
        s_append (buf, size, "%s", type [0] == 'i' ? "an integer" : "a number");
        s_range (schema, type [0] == 'i', buf, size);
    }
    else
    if (strcmp (type, "string") == 0) {
        const json_t *least = json_object_get (schema, "minLength");
        const json_t *most = json_object_get (schema, "maxLength");
        s_append (buf, size, "a %sstring", least && json_integer_value (least) > 0
                                           ? "non-empty " : "");
        if (least && json_integer_value (least) > 1)
            s_append (buf, size, " of at least %lld characters",
                      (long long) json_integer_value (least));
        if (most)
            s_append (buf, size, "%s of at most %lld characters",
                      least && json_integer_value (least) > 1 ? " and" : "",
                      (long long) json_integer_value (most));
        if (json_object_get (schema, "pattern"))
            s_append (buf, size, " matching %s",
                      json_string_value (json_object_get (schema, "pattern")));
    }
    else
    if (strcmp (type, "array") == 0) {
        const json_t *least = json_object_get (schema, "minItems");
        const json_t *most = json_object_get (schema, "maxItems");
        long long l = least ? (long long) json_integer_value (least) : 0;
        s_append (buf, size, "an array");
        if (most && l == json_integer_value (most))
            s_append (buf, size, " of %lld item%s", l, l == 1 ? "" : "s");
        else
        if (l > 0 && most)
            s_append (buf, size, " of %lld to %lld items", l,
                      (long long) json_integer_value (most));
        else
        if (most)
            s_append (buf, size, " of at most %lld items", (long long) json_integer_value (most));
        else
        if (l > 0)
            s_append (buf, size, " of at least %lld item%s", l, l == 1 ? "" : "s");
    }
    else
    if (strcmp (type, "boolean") == 0)
        s_append (buf, size, "true or false");
    else
    if (strcmp (type, "object") == 0)
        s_append (buf, size, "an object");
    else
        s_append (buf, size, "null");
}

static void
s_describe_list (const json_t *root, const json_t *list, char *buf, size_t size, int depth)
{
    size_t i;
    const json_t *item;
    json_array_foreach (list, i, item) {
        if (i)
            s_append (buf, size, " or ");
        s_describe (root, item, buf, size, depth + 1);
    }
}

static void
s_describe (const json_t *root, const json_t *schema, char *buf, size_t size, int depth)
{
    if (depth > PS_SCHEMADOC_DEPTH_MAX || json_is_true (schema)) {
        s_append (buf, size, "any value");
        return;
    }
    if (json_is_false (schema)) {
        s_append (buf, size, "no value");
        return;
    }
    const json_t *v;
    if ((v = json_object_get (schema, "const"))) {
        char quoted [PS_JSONVALUE_QUOTE_MAX];
        ps_jsonvalue_quote (v, quoted, sizeof quoted);
        s_append (buf, size, "%s", quoted);
    }
    else
    if ((v = json_object_get (schema, "enum"))) {
        s_append (buf, size, "one of ");
        size_t i;
        const json_t *item;
        json_array_foreach (v, i, item) {
            char quoted [PS_JSONVALUE_QUOTE_MAX];
            ps_jsonvalue_quote (item, quoted, sizeof quoted);
            s_append (buf, size, "%s%s", i ? ", " : "", quoted);
        }
    }
    else
    if ((v = json_object_get (schema, "type"))) {
        if (json_is_string (v))
            s_describe_type (schema, json_string_value (v), buf, size);
        else {
            size_t i;
            const json_t *item;
            json_array_foreach (v, i, item) {
                if (i)
                    s_append (buf, size, " or ");
                s_describe_type (schema, json_string_value (item), buf, size);
            }
        }
    }
    else
    if ((v = json_object_get (schema, "$ref")))
        s_describe (root, ps_schemadoc_resolve (root, json_string_value (v)), buf, size,
                    depth + 1);
    else
    if ((v = json_object_get (schema, "anyOf")) || (v = json_object_get (schema, "oneOf")))
        s_describe_list (root, v, buf, size, depth);
    else
    if ((v = json_object_get (schema, "allOf")))
        s_describe (root, json_array_get (v, 0), buf, size, depth + 1);
    else
    if ((v = json_object_get (schema, "not"))) {
        s_append (buf, size, "not ");
        s_describe (root, v, buf, size, depth + 1);
    }
    else {
        s_append (buf, size, "a value");
        s_range (schema, false, buf, size);
    }
}

void
ps_schemadoc_describe (const json_t *root, const json_t *schema, char *buf, size_t size)
{
    assert (buf && size > 0);
    s_describe (root, schema, buf, size, 0);
}

void
ps_schemadoc_describe_any (const json_t *root, const json_t *list, char *buf, size_t size)
{
    assert (buf && size > 0);
    s_describe_list (root, list, buf, size, 0);
}

void
ps_schemadoc_keys (const json_t *schema, char *buf, size_t size)
{
    assert (buf && size > 0);
    buf [0] = 0;
    const char *key;
    const json_t *ignored;
    json_object_foreach (json_object_get (schema, "properties"), key, ignored)
        s_append (buf, size, "%s%s", buf [0] ? ", " : "", key);
}


//  Follow $ref and allOf's first member with properties or items down to
//  the schema that says what a value is.
static const json_t *
s_concrete (const json_t *root, const json_t *schema, const char *keyword)
{
    for (int depth = 0; schema && depth < PS_SCHEMADOC_DEPTH_MAX; depth++) {
        if (json_object_get (schema, keyword) || json_object_get (schema, "type"))
            return schema;
        const json_t *ref = json_object_get (schema, "$ref");
        if (ref)
            schema = ps_schemadoc_resolve (root, json_string_value (ref));
        else
            schema = json_array_get (json_object_get (schema, "allOf"), 0);
    }
    return schema;
}

//  The schema of property key: the object's own, or one that a member of
//  its allOf, that member's then or else, or a $ref adds (as a layer's
//  type picks its fields).
static const json_t *
s_find_property (const json_t *root, const json_t *schema, const char *key, int depth)
{
    if (!json_is_object (schema) || depth > PS_SCHEMADOC_DEPTH_MAX)
        return NULL;
    const json_t *found = json_object_get (json_object_get (schema, "properties"), key);
    const json_t *ref = json_object_get (schema, "$ref");
    if (!found && ref)
        found = s_find_property (root, ps_schemadoc_resolve (root, json_string_value (ref)), key,
                                depth + 1);
    const json_t *all = json_object_get (schema, "allOf");
    for (size_t i = 0; !found && i < json_array_size (all); i++) {
        const json_t *member = json_array_get (all, i);
        found = s_find_property (root, member, key, depth + 1);
        if (!found)
            found = s_find_property (root, json_object_get (member, "then"), key, depth + 1);
        if (!found)
            found = s_find_property (root, json_object_get (member, "else"), key, depth + 1);
    }
    return found;
}

int
ps_schemadoc_at (const json_t *root, const char *pointer, const json_t **found,
                 ps_error_t *err)
{
    assert (root);
    assert (pointer);
    assert (found);
    const json_t *schema = root;
    const char *p = pointer;
    char walked [PS_SCHEMADOC_POINTER_MAX] = "";
    while (*p == '/') {
        size_t n = strcspn (p + 1, "/");
        char token [PS_SCHEMADOC_POINTER_MAX];
        //  Unescape ~1 and ~0 (RFC 6901).
        size_t t = 0;
        for (size_t i = 0; i < n && t + 1 < sizeof token; i++) {
            char c = p [1 + i];
            if (c == '~' && i + 1 < n && (p [2 + i] == '0' || p [2 + i] == '1'))
                c = p [2 + i++] == '0' ? '~' : '/';
            token [t++] = c;
        }
        token [t] = 0;
        snprintf (walked + strlen (walked), sizeof walked - strlen (walked), "/%.*s", (int) n,
                  p + 1);
        const json_t *object = s_concrete (root, schema, "properties");
        const json_t *array = s_concrete (root, schema, "items");
        const json_t *properties = json_object_get (object, "properties");
        const json_t *next = NULL;
        if (properties) {
            next = s_find_property (root, object, token, 0);
            if (!next && json_is_false (json_object_get (object, "additionalProperties"))) {
                char list [320];
                ps_schemadoc_keys (object, list, sizeof list);
                return ps_error_set (err, PS_EINVAL, "at %s: unknown key \"%s\" (expected one "
                                     "of %s)", walked, token, list);
            }
        }
        else
        if (array) {
            char *end;
            unsigned long index = strtoul (token, &end, 10);
            const json_t *prefix = json_object_get (array, "prefixItems");
            if (*end == 0 && index < json_array_size (prefix))
                next = json_array_get (prefix, index);
            else
                next = json_object_get (array, "items");
        }
        if (!next)
            return PS_ENOTFOUND;
        schema = next;
        p += 1 + n;
    }
    *found = s_concrete (root, schema, "type");
    return 0;
}

const json_t *
ps_schemadoc_field (const json_t *obj, const json_t *properties, const char *key)
{
    const json_t *value = json_object_get (obj, key);
    if (value)
        return value;
    const json_t *dflt = json_object_get (json_object_get (properties, key), "default");
    return json_is_null (dflt) ? NULL : dflt;
}
