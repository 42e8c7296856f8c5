/* SPDX-License-Identifier: MIT */
/* An intrusive doubly linked list: each element holds a rill__link, the
 * list is a pointer to the first link (NULL when empty), and RILL__OWNER
 * turns a link back into its element. Insertion at the front and removal
 * are O(1); nothing allocates. Not thread-safe: the owner's lock guards a
 * list and its links.
 *
 * Invariant: for every link l on a list, l->prev is NULL exactly for the
 * first link (*head == l), l->prev->next == l otherwise, and l->next->prev
 * == l when l->next is not NULL; a link on no list has both NULL. */
#ifndef RILL_UTIL_LIST_H
#define RILL_UTIL_LIST_H

#include <stddef.h>

typedef struct rill__link {
    struct rill__link *next, *prev;
} rill__link;

/* The element of type type whose member member is the link l. */
#define RILL__OWNER(l, type, member) ((type *)(void *)((char *)(l)-offsetof(type, member)))

/* Puts l, on no list, first on the list *head. */
static inline void rill__list_push(rill__link **head, rill__link *l) {
    l->prev = NULL;
    l->next = *head;
    if (*head != NULL)
        (*head)->prev = l;
    *head = l;
}

/* Takes l off the list *head it is on. */
static inline void rill__list_remove(rill__link **head, rill__link *l) {
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        *head = l->next;
    if (l->next != NULL)
        l->next->prev = l->prev;
    l->next = l->prev = NULL;
}

#endif
