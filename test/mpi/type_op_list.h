/*
 * type_op_list.h -- the MPI test programs' -x lists: "type:op,..." pairs of reductions
 * to leave out (where the MPI library below gets them wrong: known_ompi_bugs.sh); a
 * type or op of "*" matches any.  Header-only (static functions).
 */
#ifndef GPURING_TEST_TYPE_OP_LIST_H
#define GPURING_TEST_TYPE_OP_LIST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_TYPE_OP_MAX 32
typedef struct {
    int n;
    char type[TEST_TYPE_OP_MAX][32], op[TEST_TYPE_OP_MAX][32];
} test_type_op_list_t;

/* The pairs of `list` added to l (at most TEST_TYPE_OP_MAX in all); 0, or -1 where an
 * entry is not type:op (said on stderr where `say`). */
static inline int test_type_op_list_add(test_type_op_list_t *l, const char *list, int say)
{
    char *copy = strdup(list), *save = NULL;
    int bad = 0;

    if (copy == NULL) return -1;
    for (char *e = strtok_r(copy, ",", &save); e != NULL && l->n < TEST_TYPE_OP_MAX;
         e = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(e, ':');
        if (colon == NULL) {
            if (say) fprintf(stderr, "bad -x entry %s (want type:op)\n", e);
            bad = -1;
            continue;
        }
        *colon = '\0';
        snprintf(l->type[l->n], sizeof(l->type[0]), "%s", e);
        snprintf(l->op[l->n], sizeof(l->op[0]), "%s", colon + 1);
        l->n++;
    }
    free(copy);
    return bad;
}

/* Whether l names op on type. */
static inline int test_type_op_listed(const test_type_op_list_t *l, const char *type,
                                      const char *op)
{
    for (int k = 0; k < l->n; k++)
        if ((!strcmp(l->type[k], "*") || !strcmp(l->type[k], type)) &&
            (!strcmp(l->op[k], "*") || !strcmp(l->op[k], op)))
            return 1;
    return 0;
}

#endif
