/*
 * threads_pthreads_threads.h -- stand-in for the header of Open MPI 5.0's
 * pthreads threads component that libopenmpi-dev does not install (see
 * threads_pthreads_mutex.h): opal_thread_t holds a pthread_t, and a thread
 * yields with sched_yield.
 */
#ifndef GPURING_COMPAT_THREADS_PTHREADS_THREADS_H
#define GPURING_COMPAT_THREADS_PTHREADS_THREADS_H

#include <pthread.h>
#include <sched.h>

static inline void opal_thread_yield(void)
{
    sched_yield();
}

#endif
