/*
 * coll_gpuring.h -- the Open MPI face of gpuring: component (MCA
 * parameters), module (query, enable, fallback) and the MPI entry points.
 * Only this folder includes Open MPI's internal headers.
 */
#ifndef MCA_COLL_GPURING_H
#define MCA_COLL_GPURING_H

#include "ompi_config.h"

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"

#include "ompi_coll_gpuring/gpuring_comm.h"

BEGIN_C_DECLS

typedef struct mca_coll_gpuring_component {
    mca_coll_base_component_2_0_0_t super;

    /* MCA parameters (coll_gpuring_*), registered in coll_gpuring_component.c */
    int priority;
    int verbose;
    char *verbose_subsys;
    bool host_buffers;
    bool managed_buffers;
    bool agree_memory;
    bool net_gpu_direct;
    bool direct;
    char *algorithm;
    int nchannels;
    int channels_per_call;
    size_t chunk_size;
    size_t slot_size;
    int wait_timeout;
    int ranks_per_node;
    char *topo_xml;
    int net_peer_failure; /* gpuring_proxy_peer_failure_t */

    int output; /* opal_output stream */
    uint64_t fallbacks; /* calls handed to the component below (atomic) */
} mca_coll_gpuring_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_gpuring_component_t mca_coll_gpuring_component;

/* What the component below gpuring provides; retained while we use it. */
typedef struct mca_coll_gpuring_prev {
    mca_coll_base_module_allreduce_fn_t allreduce;
    mca_coll_base_module_t *allreduce_module;
    mca_coll_base_module_allgather_fn_t allgather;
    mca_coll_base_module_t *allgather_module;
    mca_coll_base_module_barrier_fn_t barrier;
    mca_coll_base_module_t *barrier_module;
} mca_coll_gpuring_prev_t;

typedef enum {
    MCA_COLL_GPURING_COMM_NEW,      /* set up at the first call we handle */
    MCA_COLL_GPURING_COMM_READY,
    MCA_COLL_GPURING_COMM_DISABLED, /* setup failed: everything falls back */
} mca_coll_gpuring_comm_state_t;

typedef struct mca_coll_gpuring_module {
    mca_coll_base_module_t super;
    struct ompi_communicator_t *comm;
    mca_coll_gpuring_prev_t prev;
    mca_coll_gpuring_comm_state_t state;
    gpuring_comm_t *gcomm;
} mca_coll_gpuring_module_t;

OBJ_CLASS_DECLARATION(mca_coll_gpuring_module_t);

/* coll_gpuring_module.c */
int mca_coll_gpuring_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_gpuring_comm_query(struct ompi_communicator_t *comm,
                                                    int *priority);
/* The ready gpuring communicator, set up on first use; NULL: fall back. */
gpuring_comm_t *mca_coll_gpuring_comm_get(mca_coll_gpuring_module_t *module);
int mca_coll_gpuring_status_to_ompi(gpuring_status_t st);

/* coll_gpuring_allreduce.c */
int mca_coll_gpuring_allreduce(const void *sbuf, void *rbuf, int count,
                               struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module);


END_C_DECLS

#endif /* MCA_COLL_GPURING_H */
