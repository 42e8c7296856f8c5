/* SPDX-License-Identifier: MIT */
/* The tools' JSON reader (json.h). */
#include "json.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jparser {
    const char *s, *end, *start;
    char err[160];
    int depth;
} jparser;

void jfree(jval *v) {
    free(v->str);
    for (size_t i = 0; i < v->count; i++) {
        jfree(&v->items[i]);
        if (v->keys != NULL)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

static bool jfail(jparser *p, const char *what) {
    if (p->err[0] == '\0') {
        int line = 1, col = 1;
        for (const char *c = p->start; c < p->s && c < p->end; c++) {
            if (*c == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        snprintf(p->err, sizeof p->err, "%s at line %d, column %d", what, line, col);
    }
    return false;
}

static void skip_ws(jparser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static bool parse_value(jparser *p, jval *v);

static bool parse_string(jparser *p, char **out) {
    p->s++; /* the quote */
    size_t cap = 16, n = 0;
    char *buf = malloc(cap);
    if (buf == NULL)
        return jfail(p, "out of memory");
    for (;;) {
        if (p->s >= p->end) {
            free(buf);
            return jfail(p, "the file ends inside a string");
        }
        unsigned char ch = (unsigned char)*p->s++;
        if (ch == '"')
            break;
        if (ch < 0x20) {
            free(buf);
            return jfail(p, "a control character inside a string");
        }
        if (ch == '\\') {
            if (p->s >= p->end) {
                free(buf);
                return jfail(p, "the file ends inside a string");
            }
            char e = *p->s++;
            switch (e) {
            case '"':
            case '\\':
            case '/':
                ch = (unsigned char)e;
                break;
            case 'b':
                ch = '\b';
                break;
            case 'f':
                ch = '\f';
                break;
            case 'n':
                ch = '\n';
                break;
            case 'r':
                ch = '\r';
                break;
            case 't':
                ch = '\t';
                break;
            case 'u': {
                unsigned code = 0;
                for (int i = 0; i < 4; i++) {
                    if (p->s >= p->end || !isxdigit((unsigned char)*p->s)) {
                        free(buf);
                        return jfail(p, "a bad \\u escape");
                    }
                    char h = *p->s++;
                    code =
                        code * 16 +
                        (unsigned)(isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
                }
                ch = code < 0x80 ? (unsigned char)code : '?';
                break;
            }
            default:
                free(buf);
                return jfail(p, "a bad escape in a string");
            }
        }
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (nb == NULL) {
                free(buf);
                return jfail(p, "out of memory");
            }
            buf = nb;
        }
        buf[n++] = (char)ch;
    }
    buf[n] = '\0';
    *out = buf;
    return true;
}

static bool push_item(jparser *p, jval *v, size_t *cap, char *key) {
    if (v->count == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        jval *ni = realloc(v->items, nc * sizeof *ni);
        if (ni == NULL)
            return jfail(p, "out of memory");
        v->items = ni;
        if (v->kind == J_OBJ) {
            char **nk = realloc(v->keys, nc * sizeof *nk);
            if (nk == NULL)
                return jfail(p, "out of memory");
            v->keys = nk;
        }
        *cap = nc;
    }
    memset(&v->items[v->count], 0, sizeof v->items[0]);
    if (v->kind == J_OBJ)
        v->keys[v->count] = key;
    v->count++;
    return true;
}

static bool parse_container(jparser *p, jval *v, bool object) {
    char close = object ? '}' : ']';
    v->kind = object ? J_OBJ : J_ARR;
    if (++p->depth > 64)
        return jfail(p, "nesting deeper than 64 levels");
    p->s++;
    size_t cap = 0;
    skip_ws(p);
    if (p->s < p->end && *p->s == close) {
        p->s++;
        p->depth--;
        return true;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(p);
        if (object) {
            if (p->s >= p->end || *p->s != '"')
                return jfail(p, "expected a key in quotes");
            if (!parse_string(p, &key))
                return false;
            skip_ws(p);
            if (p->s >= p->end || *p->s != ':') {
                free(key);
                return jfail(p, "expected ':' after a key");
            }
            p->s++;
        }
        if (!push_item(p, v, &cap, key)) {
            free(key);
            return false;
        }
        if (!parse_value(p, &v->items[v->count - 1]))
            return false;
        skip_ws(p);
        if (p->s >= p->end)
            return jfail(p, object ? "the file ends inside an object"
                                   : "the file ends inside an array");
        if (*p->s == ',') {
            p->s++;
            continue;
        }
        if (*p->s == close) {
            p->s++;
            p->depth--;
            return true;
        }
        return jfail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool parse_value(jparser *p, jval *v) {
    skip_ws(p);
    if (p->s >= p->end)
        return jfail(p, "the file ends where a value was expected");
    char c = *p->s;
    if (c == '{' || c == '[')
        return parse_container(p, v, c == '{');
    if (c == '"') {
        v->kind = J_STR;
        return parse_string(p, &v->str);
    }
    static const char *const lits[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(lits[i]);
        if ((size_t)(p->end - p->s) >= n && memcmp(p->s, lits[i], n) == 0) {
            p->s += n;
            v->kind = i == 2 ? J_NULL : J_BOOL;
            v->num = i == 0;
            return true;
        }
    }
    if (c == '-' || isdigit((unsigned char)c)) {
        char tmp[64];
        size_t n = 0;
        while (p->s + n < p->end && n < sizeof tmp - 1 &&
               strchr("+-0123456789.eE", p->s[n]) != NULL) {
            tmp[n] = p->s[n];
            n++;
        }
        tmp[n] = '\0';
        char *endp;
        errno = 0;
        v->num = strtod(tmp, &endp);
        if (endp != tmp + n || n == 0)
            return jfail(p, "a malformed number");
        v->kind = J_NUM;
        p->s += n;
        return true;
    }
    return jfail(p, "unexpected character");
}

const jval *jget(const jval *obj, const char *key) {
    if (obj == NULL || obj->kind != J_OBJ)
        return NULL;
    for (size_t i = 0; i < obj->count; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

const char *jstr(const jval *v) {
    return v != NULL && v->kind == J_STR ? v->str : NULL;
}

bool jnum(const jval *v, double *out) {
    if (v == NULL || v->kind != J_NUM)
        return false;
    *out = v->num;
    return true;
}

bool jparse(const char *text, size_t n, jval *out, char *err, size_t err_size) {
    jparser p = {.s = text, .end = text + n, .start = text};
    memset(out, 0, sizeof *out);
    bool ok = parse_value(&p, out);
    skip_ws(&p);
    if (ok && p.s != p.end)
        ok = jfail(&p, "text after the end of the JSON value");
    if (!ok) {
        jfree(out);
        memset(out, 0, sizeof *out);
        snprintf(err, err_size, "%s", p.err);
    }
    return ok;
}

static void write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void jwrite(FILE *f, const jval *v) {
    switch (v->kind) {
    case J_NULL:
        fputs("null", f);
        break;
    case J_BOOL:
        fputs(v->num != 0 ? "true" : "false", f);
        break;
    case J_NUM:
        fprintf(f, "%.15g", v->num);
        break;
    case J_STR:
        write_string(f, v->str);
        break;
    case J_ARR:
    case J_OBJ:
        fputc(v->kind == J_ARR ? '[' : '{', f);
        for (size_t i = 0; i < v->count; i++) {
            if (i > 0)
                fputc(',', f);
            if (v->kind == J_OBJ) {
                write_string(f, v->keys[i]);
                fputc(':', f);
            }
            jwrite(f, &v->items[i]);
        }
        fputc(v->kind == J_ARR ? ']' : '}', f);
        break;
    }
}
