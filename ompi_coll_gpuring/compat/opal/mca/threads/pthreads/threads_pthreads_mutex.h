/*
 * threads_pthreads_mutex.h -- stand-in for the header of Open MPI 5.0's
 * pthreads threads component, which opal_config.h names but libopenmpi-dev
 * does not install (an upstream install bug, 5.0.0 to 5.0.10).  configure
 * puts compat/ on the include path only when the real header is missing.
 *
 * Open MPI builds that component on Linux: its mutex is a pthread mutex and
 * its condition a pthread condition, so opal_mutex_t, embedded in the
 * communicator, gets the library's layout.  gpuring never takes an Open MPI
 * lock itself; the functions are here because Open MPI's own inline
 * functions call them.
 */
#ifndef GPURING_COMPAT_THREADS_PTHREADS_MUTEX_H
#define GPURING_COMPAT_THREADS_PTHREADS_MUTEX_H

#include <pthread.h>
#include <stdbool.h>

typedef pthread_mutex_t opal_thread_internal_mutex_t;
typedef pthread_cond_t opal_thread_internal_cond_t;

#define OPAL_THREAD_INTERNAL_MUTEX_INITIALIZER PTHREAD_MUTEX_INITIALIZER
#define OPAL_THREAD_INTERNAL_COND_INITIALIZER PTHREAD_COND_INITIALIZER
#ifdef PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
#define OPAL_THREAD_INTERNAL_RECURSIVE_MUTEX_INITIALIZER PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
#endif

static inline int opal_thread_internal_mutex_init(opal_thread_internal_mutex_t *m, bool recursive)
{
    pthread_mutexattr_t attr;
    int rc;

    if (!recursive) return pthread_mutex_init(m, NULL);
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    rc = pthread_mutex_init(m, &attr);
    pthread_mutexattr_destroy(&attr);
    return rc;
}

static inline int opal_thread_internal_mutex_trylock(opal_thread_internal_mutex_t *m)
{
    return pthread_mutex_trylock(m) != 0;
}

static inline void opal_thread_internal_mutex_lock(opal_thread_internal_mutex_t *m)
{
    pthread_mutex_lock(m);
}

static inline void opal_thread_internal_mutex_unlock(opal_thread_internal_mutex_t *m)
{
    pthread_mutex_unlock(m);
}

static inline void opal_thread_internal_mutex_destroy(opal_thread_internal_mutex_t *m)
{
    pthread_mutex_destroy(m);
}

static inline int opal_thread_internal_cond_init(opal_thread_internal_cond_t *c)
{
    return pthread_cond_init(c, NULL);
}

static inline void opal_thread_internal_cond_signal(opal_thread_internal_cond_t *c)
{
    pthread_cond_signal(c);
}

static inline void opal_thread_internal_cond_destroy(opal_thread_internal_cond_t *c)
{
    pthread_cond_destroy(c);
}

#endif
