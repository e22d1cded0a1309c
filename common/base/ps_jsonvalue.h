//  JSON values as JSON Schema sees them, which is not always as jansson
//  does: a real with no fractional part is an integer (1.0), numbers are
//  equal by value whatever their JSON type (1 equals 1.0), and a string's
//  length counts characters, not bytes. Also how a message quotes a value.
//  The JSON Schema validator (ps_jsonschema.h) is built on these, and the
//  readers of what it accepted (job files, model specs) read integers
//  through ps_jsonvalue_integer.

#ifndef PS_JSONVALUE_H_INCLUDED
#define PS_JSONVALUE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

//  Room for a value quoted in a message (ps_jsonvalue_quote).
#define PS_JSONVALUE_QUOTE_MAX  72

//  Whether value is an integer as JSON Schema counts them: a JSON integer
//  or a finite real with no fractional part.
bool ps_jsonvalue_is_integer (const json_t *value);

//  The value of a number that is an integer as ps_jsonvalue_is_integer
//  counts them, within the 64-bit range (a real beyond it is clamped).
json_int_t ps_jsonvalue_integer (const json_t *value);

//  Compare two JSON numbers exactly: -1, 0 or 1.
int ps_jsonvalue_compare (const json_t *a, const json_t *b);

//  Equality as JSON Schema has it: numbers by value, arrays and objects
//  item by item, the rest as jansson compares them.
bool ps_jsonvalue_equal (const json_t *a, const json_t *b);

//  The characters (code points) of a JSON string.
size_t ps_jsonvalue_length (const json_t *string);

//  A number as text: integers exactly, reals with the fewest digits that
//  read back to the same value.
void ps_jsonvalue_number (const json_t *number, char *buf, size_t size);

//  A value as text for a message: JSON, cut short with "..." when longer
//  than size (more than 4) allows.
void ps_jsonvalue_quote (const json_t *value, char *buf, size_t size);

#endif
