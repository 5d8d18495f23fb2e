/*
 * ll_rows.h -- where a FIFO's LL rows stand, for the tests that poison them
 * with the flags of steps to come (proxy/conn.h: LL flags come back, and due
 * rows are cleaned).  Header-only (a static function).
 */
#ifndef GPURING_TEST_LL_ROWS_H
#define GPURING_TEST_LL_ROWS_H

#include <stdint.h>

#include "proxy/conn.h"

/* The first step from `from` on LL row `row` (a step's row: step % GPURING_NSTEPS). */
static inline uint64_t test_ll_row_step(uint64_t from, unsigned row)
{
    return from + (row + GPURING_NSTEPS - from % GPURING_NSTEPS) % GPURING_NSTEPS;
}

#endif /* GPURING_TEST_LL_ROWS_H */
