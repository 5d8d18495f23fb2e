/*
 * cudacpu_fiber.h -- a block's threads as fibers of one OS thread (test/cudacpu).
 */
#ifndef CUDACPU_FIBER_H
#define CUDACPU_FIBER_H

#include "include/vector_types.h"

namespace cudacpu {

/*
 * Run body(arg) once per thread of a block of shape `block`, each as a fiber
 * with its own stack and threadIdx, on the calling OS thread; return when every
 * fiber has returned.  Fibers switch only in __syncthreads: a phase runs every
 * live fiber (in the CUDACPU_FIBER_ORDER order) up to its next __syncthreads or
 * its end; a fiber that has returned no longer holds the barrier.  `salt` varies
 * the random order between blocks.
 */
void fibers_run_block(const dim3 &block, void (*body)(void *), void *arg, uint64_t salt);

} /* namespace cudacpu */

#endif /* CUDACPU_FIBER_H */
