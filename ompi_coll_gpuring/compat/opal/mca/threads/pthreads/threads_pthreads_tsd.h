/*
 * threads_pthreads_tsd.h -- stand-in for the header of Open MPI 5.0's
 * pthreads threads component that libopenmpi-dev does not install (see
 * threads_pthreads_mutex.h): thread-specific data keys are pthread keys.
 * gpuring uses none; Open MPI's headers need the type.
 */
#ifndef GPURING_COMPAT_THREADS_PTHREADS_TSD_H
#define GPURING_COMPAT_THREADS_PTHREADS_TSD_H

#include <pthread.h>

typedef pthread_key_t opal_tsd_key_t;

static inline int opal_tsd_key_delete(opal_tsd_key_t key)
{
    return pthread_key_delete(key);
}

static inline int opal_tsd_setspecific(opal_tsd_key_t key, void *value)
{
    return pthread_setspecific(key, value);
}

static inline int opal_tsd_getspecific(opal_tsd_key_t key, void **valuep)
{
    *valuep = pthread_getspecific(key);
    return 0; /* OPAL_SUCCESS */
}

#endif
