/* SPDX-License-Identifier: MIT */
/* A small JSON reader for the tools (json.c): the whole of JSON (objects,
 * arrays, strings with escapes, numbers, literals) into a tree, and a
 * damaged text told by the line and column where it stops being JSON. */
#ifndef RILL_TOOLS_JSON_H
#define RILL_TOOLS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum jkind { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jkind;

typedef struct jval {
    jkind kind;
    double num;
    char *str;          /* J_STR: owned */
    struct jval *items; /* J_ARR, J_OBJ: owned, count of them */
    char **keys;        /* J_OBJ: owned, one per item */
    size_t count;
} jval;

/* Parses text[0, n) into *out (freed with jfree). False, with "what at
 * line L, column C" in err, when it is not one JSON value. */
bool jparse(const char *text, size_t n, jval *out, char *err, size_t err_size);
void jfree(jval *v);
/* The member key of an object, NULL when obj is no object or lacks it. */
const jval *jget(const jval *obj, const char *key);
/* A string's text, or NULL when v is no string. */
const char *jstr(const jval *v);
/* A number into *out; false when v is no number. */
bool jnum(const jval *v, double *out);
/* Writes v to f as JSON (numbers with up to 15 significant digits, which
 * keeps a trace's microsecond times to the nanosecond). */
void jwrite(FILE *f, const jval *v);

#endif
