/*
 * coll_gpuring_compat.h -- the differences between the Open MPI series
 * gpuring builds against, in one place.  Both have the unversioned
 * mca_coll_base_component_t and the same module, comm_query, enable/disable
 * and collective signatures; what differs:
 *   - the coll framework version a component declares (each series loads
 *     only components of its own: one binary per series);
 *   - OMPI_MODULE_DECLSPEC (gone in 5.0: OMPI_DECLSPEC);
 *   - an MPI datatype for fp16 (5.0's shortfloat extension only);
 *   - a communicator's context id (5.0: ompi_comm_get_local_cid).
 * Open MPI 6 (coll API 3.0: size_t counts, other install hooks) is refused
 * by configure.
 */
#ifndef MCA_COLL_GPURING_COMPAT_H
#define MCA_COLL_GPURING_COMPAT_H

#include "ompi/mca/coll/coll.h"

#if defined(MCA_COLL_BASE_VERSION_2_4_0)
#define MCA_COLL_GPURING_BASE_VERSION MCA_COLL_BASE_VERSION_2_4_0 /* Open MPI 5.0 */
#elif defined(MCA_COLL_BASE_VERSION_2_0_0)
#define MCA_COLL_GPURING_BASE_VERSION MCA_COLL_BASE_VERSION_2_0_0 /* Open MPI 4.x */
#else
#error "gpuring builds against Open MPI 4.x or 5.0 (coll framework 2.0.0 or 2.4.0)"
#endif

/* a communicator's context id (5.0: the local one): the log's name for a communicator
 * without a name (mca_coll_gpuring_comm_name) */
#if defined(MCA_COLL_BASE_VERSION_2_4_0)
#define MCA_COLL_GPURING_COMM_CID(_comm) ompi_comm_get_local_cid(_comm)
#else
#define MCA_COLL_GPURING_COMM_CID(_comm) ompi_comm_get_cid((ompi_communicator_t *)(_comm))
#endif

#ifndef OMPI_MODULE_DECLSPEC
#define OMPI_MODULE_DECLSPEC OMPI_DECLSPEC
#endif

/* fp16's MPI datatype: MPIX_C_FLOAT16 of the shortfloat extension (Open MPI 5, where
 * the compiler has _Float16); Open MPI 4 has none, and no series names bfloat16 */
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif
#if defined(MPIX_C_FLOAT16)
#define MCA_COLL_GPURING_MPI_FLOAT16 MPIX_C_FLOAT16
#endif

#endif /* MCA_COLL_GPURING_COMPAT_H */
