/*
 * mismatch_check.c -- ranks that make different calls must fail, every one
 * of them, promptly, and never return MPI_SUCCESS with data they did not
 * reduce.
 *
 * For each case, on a fresh duplicate of MPI_COMM_WORLD (MPI_ERRORS_RETURN):
 * one correct MPI_Allreduce (the communicator is set up), then the
 * mismatched call -- the last rank passes COUNT + EXTRA elements where the
 * others pass COUNT (or, for the type case, MPI_FLOAT where the others pass
 * MPI_INT, same count, so every step has the right size and only the call id
 * tells) -- then a correct call again.  Expected on every rank:
 *   the mismatched call  fails, within LIMIT seconds (the driver sets
 *                        coll_gpuring_wait_timeout far above it, so a
 *                        detection that waited for the timeout fails), with
 *                        class MPI_ERR_COUNT (the rank that saw the other
 *                        call) or MPI_ERR_OTHER (a rank told by a peer that
 *                        gave up), at least one rank MPI_ERR_COUNT, and an
 *                        error string naming gpuring;
 *   the call after it    fails at once on every rank with class
 *                        MPI_ERR_OTHER: gpuring refuses a communicator that
 *                        failed, the same way everywhere.
 * Then a new communicator still works (its result is checked).  With
 * "device", the buffers are device memory (libcudart, dlopen'ed: a GPU, or
 * the CUDA CPU runtime).  Prints `N passed, N failed` on rank 0.
 *
 * With a fault ("nomem" or "nolaunch": device buffers on the CUDA CPU
 * runtime), the calls match, but the last rank's runtime fails something the
 * failing call needs (an environment variable set around that call): that
 * rank's call fails before any step moves, with the fault's class, and the
 * others must fail within LIMIT too, with class MPI_ERR_OTHER and a string
 * naming gpuring (told by the rank that gave up, not by their timeout); EXTRA
 * is unused.
 *   nomem     the failing call's buffers sit one byte off their int grid on
 *             every rank, so each rank runs it on aligned copies in device
 *             memory, and the last rank's stream-ordered allocations fail
 *             (CUDACPU_FAIL_MALLOC_ASYNC): MPI_ERR_NO_MEM.  With "type" too,
 *             the failing call is MPI_FLOAT on aligned buffers: a small one
 *             runs the ordered gather, whose scratch memory is what fails.
 *   nolaunch  the last rank's kernels of more than one thread per block do not
 *             launch (CUDACPU_FAIL_LAUNCH, as too many registers would):
 *             MPI_ERR_OTHER ("a CUDA operation failed").
 *   othergpu  (CUDACPU_DEVICES=2, or a machine of 2 GPUs) the last rank's failing
 *             call passes buffers of another GPU than its earlier calls, on
 *             which its device connections were made: MPI_ERR_ARG (and its
 *             peers must be told, not left to wait for a call it never made).
 *   late      (device buffers, coll_gpuring_host_buffers 1, a wait timeout under
 *             LATE_SEC) the communicator's setup call is on host buffers, and
 *             the last rank makes the failing call, the first on device buffers
 *             (which connects the device plane), LATE_SEC late: the others'
 *             exchanges time out, the last rank's then too.  Every rank must fail
 *             (none may fall back: the ranks made different numbers of gpuring's
 *             exchanges, which pair by their order).
 *   nothread  (host or device buffers) the last rank cannot start a thread of
 *             gpuring's (GPURING_TEST_FAIL_THREAD, read by test/mpi/fail_inject.c,
 *             LD_PRELOADed: pthread_create fails with EAGAIN, as at a pids limit):
 *             with "iallreduce", the worker thread of non-blocking calls, so
 *             the rank cannot queue the call: MPI_ERR_OTHER.
 *   copyout   the last rank's receive buffer sits one byte off its int grid, so its
 *             call runs on an aligned copy, and every device copy of its runtime
 *             fails during the call (CUDACPU_FAIL_COPY): the copy of its result out of
 *             that copy, after every step of the call moved.  That rank's call fails
 *             (MPI_ERR_OTHER) and no other's: the others' results are right, and the
 *             call after it succeeds on every rank, its results right -- the failure
 *             is the rank's result alone, not the communicator's.
 *   copyrun   as copyout, but the copies are queued and fail when the GPU runs them
 *             (CUDACPU_FAIL_COPY_RUN: nothing moves, the stream's next query says so):
 *             the same verdicts (a call that returned MPI_SUCCESS there left the
 *             receive buffer as it was).
 *   copyin    the last rank's send buffer sits one byte off its int grid, so its call
 *             runs on an aligned copy, and the copy of its input into that copy is
 *             queued and fails when the GPU runs it (CUDACPU_FAIL_COPY_RUN): nothing of
 *             its input arrives, so no rank's sums can be right -- every rank must fail
 *             (MPI_ERR_OTHER), none return MPI_SUCCESS with the aligned copy's old bytes
 *             added in.
 *   setdevice (with iallreduce) the last rank's worker thread, which runs its
 *             non-blocking device calls, cannot make the plane's GPU current
 *             (CUDACPU_FAIL_SET_DEVICE_OFF_MAIN: cudaSetDevice fails off the main
 *             thread): that rank's call fails (MPI_ERR_OTHER), and it must give the
 *             call up on its connections, so that its peers fail at once (they used
 *             to wait out their wait timeout).
 *   latekernel the last rank's kernels of the failing call start LATE_KERNEL_MS after
 *             their stream reaches them (CUDACPU_LATE_LAUNCH_MS: as kernels queued on a
 *             GPU behind long work), past its wait timeout and the second's grace after
 *             it: every rank fails the call (MPI_ERR_OTHER: the peers time out, and so
 *             does that rank, whose kernel is then still to start); the kernel leaves
 *             late, at its first look at the abort, and the rank's next device call must
 *             take its status entry back (every rank sleeps until then, before the
 *             new communicator's call); the receive buffer, which the application
 *             has back once the call returned (here: a pattern written then), must
 *             hold that pattern after the late kernel ran (the LL direct kernel found
 *             every peer's units and wrote its result there)
 *   latekernel_grace  the same, the kernels 2.5 s late: past a wait timeout of 2 s,
 *             inside the second's grace after the abort -- the LL direct kernel then
 *             leaves at once (no output), and its rank must fail the call, not take
 *             the kernel's leaving in the grace for its end; or, where its kernel
 *             still started before its host gave up (a loaded machine), succeed with
 *             every sum right (its receive buffer is poisoned before the call)
 *   latekernel_peer  the same, and rank 0 makes the call PEER_LATE_SEC late, so that
 *             it still waits in it when the late kernel starts: that kernel must send
 *             it nothing to complete the call with (it completed it, MPI_SUCCESS,
 *             while the late rank failed) -- rank 0 fails too; or, as above, every
 *             rank succeeds with every sum right
 *   netfail   (ranks as virtual nodes: net connections; a wait timeout under
 *             LIMIT) every UCX send of the last rank's gpuring fails
 *             (GPURING_TEST_FAIL_NET=1, read by test/mpi/fail_inject.c) during
 *             the failing call: its connections of that communicator fail,
 *             and so does its call (MPI_ERR_OTHER); it cannot tell its peers
 *             (every way to them is a failed send), which time out.  The new
 *             communicator at the end runs over the same UCX endpoints, and
 *             must work on every rank: a failure is its connection's, not
 *             the process's.
 *
 * With "allgather", the mismatched (or failing) call is an MPI_Allgather of COUNT
 * ints (the last rank COUNT + EXTRA) received as a datatype with holes (an int
 * every 8 bytes), so that every rank packs its receive buffer; with "nomem" the
 * last rank cannot get the device memory to pack into: it gives up on the call
 * before the call has moved anything, and its peers must be told.  On device buffers,
 * REFUSED_CALLS more such calls on the failed communicator (each refused at once) must
 * give back the device memory they packed into (cudaMemGetInfo, where the runtime has
 * it: the CUDA CPU runtime counts the process's allocations).
 *
 * With "bcast" (and a fault), the failing call is an MPI_Bcast of COUNT ints from
 * rank 0: the ranks that only send, or whose part ended before the last rank failed,
 * may return MPI_SUCCESS (a call completes locally: README, "After a failure") -- then
 * holding rank 0's data (a pattern no earlier call left) --, but
 * the call after it must fail on every rank within LIMIT -- the failed rank makes no
 * step of it, and its host's peers learn so from the arrival board instead of waiting
 * out their wait timeout.  With "laterhost" too, the call after it is on host buffers
 * (run with coll_gpuring_host_buffers 1: the host plane's first call, whose connections
 * the failed rank still makes with the others before it refuses the call).
 *
 * With "idle", every rank then sleeps 1 s before it frees the failed communicator: its
 * process must use under 0.5 s of CPU meanwhile (nothing of gpuring's may spin on the
 * dead call's connections until the communicator goes).
 *
 * With "iallreduce", the call is an MPI_Iallreduce completed by MPI_Wait (on a
 * fresh communicator, so its first non-blocking call: the worker starts there);
 * the call after it is made, and the communicator freed, before that MPI_Wait.
 *
 * usage: mismatch_check LIMIT_SECONDS COUNT:EXTRA[,COUNT:EXTRA...]
 *                       [type|allgather|iallreduce|bcast [laterhost]] [device] [idle] [nomem|nolaunch|copyout|copyrun|
 *                       copyin|setdevice|othergpu|late|nothread|netfail|latekernel|
 *                       latekernel_grace|latekernel_peer]
 *   e.g. 20 7:1,65536:1,655360:4096 (a few elements, one slot, many slots)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/cuda_dl.h"
#include "test/cpu_seconds.h"
#include "test/mpi_verdict.h"

#define MAX_CASES 64

typedef struct {
    int rc, cls;      /* of the mismatched call */
    int later_cls;    /* of the call after it (MPI_SUCCESS: it succeeded) */
    double elapsed;   /* of the mismatched call */
    double later_elapsed; /* of the call after it */
    int named;        /* the error string names gpuring */
    double idle_cpu;  /* "idle": CPU seconds the process used in the second after */
    int wrong;        /* "copyout": elements of this rank's results not as computed here;
                         "bcast": of rank 0's data, where its call returned MPI_SUCCESS */
    int setup_rc;     /* of the call before it, which sets the communicator up */
    long kept;        /* "allgather" on device: bytes of device memory the calls on the
                         failed communicator after it kept (refused_calls_kept) */
} outcome_t;

static int err_class(int rc)
{
    int cls = rc;

    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    return cls;
}

/* the faults a rank's CUDA CPU runtime can be told to make: argument, variable, the
 * class that rank's call must fail with */
static const struct fault {
    const char *arg, *env;
    int cls;
    int device; /* the CUDA CPU runtime's: device buffers only */
    int valued; /* env is read as =1 by gpuring's threads at any time: it is set to 0
                   before any thread starts, then only overwritten (a setenv that adds
                   a variable may move the environment under a concurrent getenv) */
    int alone;  /* the failing rank's call alone fails: the others' succeed, and so does
                   the call after it everywhere */
    const char *value; /* env's value (NULL: "1") */
} faults[] = {
    {"nomem", "CUDACPU_FAIL_MALLOC_ASYNC", MPI_ERR_NO_MEM, 1, 0, 0, NULL},
    {"nolaunch", "CUDACPU_FAIL_LAUNCH", MPI_ERR_OTHER, 1, 0, 0, NULL},
    {"copyout", "CUDACPU_FAIL_COPY", MPI_ERR_OTHER, 1, 0, 1, NULL},
    {"copyrun", "CUDACPU_FAIL_COPY_RUN", MPI_ERR_OTHER, 1, 0, 1, NULL},
    {"copyin", "CUDACPU_FAIL_COPY_RUN", MPI_ERR_OTHER, 1, 0, 0, NULL},
    {"setdevice", "CUDACPU_FAIL_SET_DEVICE_OFF_MAIN", MPI_ERR_OTHER, 1, 1, 0, NULL},
    {"othergpu", NULL, MPI_ERR_ARG, 1, 0, 0, NULL},
    {"late", NULL, MPI_ERR_OTHER, 1, 0, 0, NULL},
    {"nothread", "GPURING_TEST_FAIL_THREAD", MPI_ERR_OTHER, 0, 0, 0, NULL},
    {"netfail", "GPURING_TEST_FAIL_NET", MPI_ERR_OTHER, 0, 1, 0, NULL},
    {"latekernel", "CUDACPU_LATE_LAUNCH_MS", MPI_ERR_OTHER, 1, 0, 0, "5000"},
    {"latekernel_grace", "CUDACPU_LATE_LAUNCH_MS", MPI_ERR_OTHER, 1, 0, 0, "2500"},
    {"latekernel_peer", "CUDACPU_LATE_LAUNCH_MS", MPI_ERR_OTHER, 1, 0, 0, "2500"},
};
#define LATE_KERNEL_SEC 5 /* latekernel's delay ("5000" above) */
static const struct fault *fault; /* the argument's; NULL: none */
static int nomem;                 /* fault is "nomem" */
static int late_kernel;           /* fault is "latekernel" (device buffers) */
static int late_grace;            /* ... "latekernel_grace" (or _peer) */
static int late_peer;             /* ... "latekernel_peer": rank 0 PEER_LATE_SEC late */
#define PEER_LATE_SEC 1
static int allgather;             /* the call is an MPI_Allgather into a strided type */
static int iallreduce;            /* the call is an MPI_Iallreduce, then MPI_Wait */
static int bcast;                 /* the call is an MPI_Bcast from rank 0 */
static int *later_hin, *later_hout; /* laterhost: the call after it on these host buffers */
static int idle;                  /* a second's sleep after the failed calls, CPU counted */
static int *later_out;            /* iallreduce: the output of the call after it */
static int *other_in, *other_out; /* othergpu, the last rank: buffers on another GPU */
static int *host_in, *host_out;   /* late: the setup call's host buffers */
#define LATE_SEC 5
static MPI_Datatype strided;      /* an int every 8 bytes */
static const char *label = "";    /* the call's, in the report */

/* The patterns the cases write into (ints_put) and compare with (ints_wrong) count ints
 * at out, host or device memory (cu loaded), element i being value(i, arg):
 *   sum_value (arg: the ranks) what every rank's input (rank + i at element i) adds up
 *             to -- the setup call leaves it in every rank's output;
 *   bcast_value  rank 0's data for the failing MPI_Bcast, a pattern no earlier call
 *             left: a rank whose call returned MPI_SUCCESS must hold it;
 *   poison_value what a receiver (bcast), or the late rank (latekernel), holds before
 *             the failing call, so that a call that wrote nothing shows;
 *   late_value   what the application writes into the failed call's receive buffer
 *             once the call has returned (latekernel), and checks is still there. */
typedef int (*pattern_fn)(int i, int arg);
static int sum_value(int i, int size) { return size * i + size * (size - 1) / 2; }
static int bcast_value(int i, int arg) { return 1000003 * (i + 1) + 17; }
static int poison_value(int i, int arg) { return -5; }
static int late_value(int i, int arg) { return -7 - i; }

static int ints_copy(void *dst, const void *src, int count, int dir)
{
    if (cu.lib == NULL) {
        memcpy(dst, src, sizeof(int) * (size_t)count);
        return 0;
    }
    return cu.memcpy_(dst, src, sizeof(int) * (size_t)count, dir);
}

/* 0, or -1 where the copy (or memory for it) failed */
static int ints_put(void *out, int count, pattern_fn value, int arg)
{
    int *h = malloc(sizeof(int) * (size_t)(count > 0 ? count : 1)), rc;

    if (h == NULL) return -1;
    for (int i = 0; i < count; i++) h[i] = value(i, arg);
    rc = ints_copy(out, h, count, TEST_CUDA_H2D) != 0 ? -1 : 0;
    free(h);
    return rc;
}

/* How many of the count ints are not the pattern's (all of them where the copy failed) */
static int ints_wrong(const void *out, int count, pattern_fn value, int arg)
{
    int *h = malloc(sizeof(int) * (size_t)(count > 0 ? count : 1)), wrong = 0;

    if (h == NULL || ints_copy(h, out, count, TEST_CUDA_D2H) != 0) {
        free(h);
        return count;
    }
    for (int i = 0; i < count; i++) wrong += h[i] != value(i, arg);
    free(h);
    return wrong;
}

/* "allgather" on device buffers, after the failed call: REFUSED_CALLS more of them on
 * the failed communicator, each refused at once -- their packed bytes (device memory)
 * must be freed: a failed call keeps them only where its kernel may still write them
 * (they were kept after any failure: a communicator that had failed leaked a buffer of
 * the call's size at every call).  The device memory gone meanwhile, in bytes (0 where
 * the runtime cannot say). */
#define REFUSED_CALLS 4
static long refused_calls_kept(MPI_Comm comm, int count, const int *in, int *out)
{
    size_t free0 = 0, free1 = 0, total = 0;

    if (cu.mem_get_info == NULL || cu.sync() != 0 || cu.mem_get_info(&free0, &total) != 0)
        return 0;
    for (int k = 0; k < REFUSED_CALLS; k++)
        (void)MPI_Allgather(in, count, MPI_INT, out, count, strided, comm);
    if (cu.sync() != 0 || cu.mem_get_info(&free1, &total) != 0) return 0;
    return free1 < free0 ? (long)(free0 - free1) : 0;
}

/* One case on a fresh communicator: this rank's outcome. */
static outcome_t run_case(int count, int extra, int by_type, int *in, int *out)
{
    outcome_t o = {0, 0, 0, 0.0, 0.0, 0, 0.0, 0, 0, 0};
    MPI_Comm comm;
    int rank, size, mine = count;
    MPI_Datatype type = MPI_INT;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    double t0;
    int *cin = in, *cout = out; /* the failing call's buffers */

    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank == size - 1 && fault == NULL) {
        if (by_type) {
            type = MPI_FLOAT;
        } else {
            mine = count + extra;
        }
    }
    if (host_in != NULL) { /* late: set up on host buffers, then the last rank is late */
        o.setup_rc = MPI_Allreduce(host_in, host_out, count, MPI_INT, MPI_SUM, comm);
        if (rank == size - 1) sleep(LATE_SEC);
    } else {
        o.setup_rc = MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, comm); /* setup */
    }
    if (fault != NULL && fault->valued) {
        /* gpuring's threads read it at any time: every data step of the calls before
         * (the communicator MPI_Comm_dup agreed over, the setup call) has arrived
         * before it is set, so that the first data step sent after it is the failing
         * call's, whose communicator fail_inject.c then fails alone (a credit still
         * owed on another goes through: it used to break that communicator, now and
         * then, when the progress thread sent it late -- the netfail case's rare
         * failure in MPI_Comm_dup) */
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (fault != NULL && fault->env != NULL && rank == size - 1)
        setenv(fault->env, fault->value != NULL ? fault->value : "1", 1);
    if (other_in != NULL) { /* othergpu: this rank's call on another GPU's buffers */
        cin = other_in;
        cout = other_out;
    }
    if (bcast) (void)ints_put(cout, mine, rank == 0 ? bcast_value : poison_value, 0);
    /* latekernel: the late rank's receive buffer poisoned (the setup call left the
     * sums there), so that a call that returns MPI_SUCCESS without writing it shows */
    if (late_kernel && rank == size - 1) (void)ints_put(cout, mine, poison_value, 0);
    /* latekernel_peer: rank 0 still waits in the call when the late kernel starts */
    if (late_peer && rank == 0) sleep(PEER_LATE_SEC);
    t0 = MPI_Wtime();
    if (bcast) {
        o.rc = MPI_Bcast(cout, mine, MPI_INT, 0, comm); /* (the input stays every rank's) */
    } else if (allgather) {
        o.rc = MPI_Allgather(cin, mine, MPI_INT, cout, mine, strided, comm);
    } else if (iallreduce) {
        MPI_Request req = MPI_REQUEST_NULL;

        /* the call after it, and the communicator freed, before the wait: the request
         * outlives the communicator's handle (MPI allows it) */
        o.rc = MPI_Iallreduce(cin, cout, mine, type, MPI_SUM, comm, &req);
        o.later_cls = err_class(MPI_Allreduce(in, later_out, count, MPI_INT, MPI_SUM, comm));
        MPI_Comm_free(&comm);
        if (o.rc == MPI_SUCCESS) o.rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else if (nomem && by_type) { /* float: the ordered gather's scratch memory */
        o.rc = MPI_Allreduce(cin, cout, mine, MPI_FLOAT, MPI_SUM, comm);
    } else if (nomem) {
        o.rc = MPI_Allreduce((char *)cin + 1, (char *)cout + 1, mine, type, MPI_SUM, comm);
    } else if (fault != NULL && strcmp(fault->arg, "copyin") == 0) { /* its input off */
        o.rc = MPI_Allreduce((char *)cin + (rank == size - 1), cout, mine, type, MPI_SUM, comm);
    } else if (fault != NULL && fault->alone) { /* copyout: the last rank's output off */
        o.rc = MPI_Allreduce(cin, (char *)cout + (rank == size - 1), mine, type, MPI_SUM, comm);
    } else {
        o.rc = MPI_Allreduce(cin, cout, mine, type, MPI_SUM, comm);
    }
    o.elapsed = MPI_Wtime() - t0;
    /* latekernel: a call that returned MPI_SUCCESS wrote its sums; then the application
     * has its receive buffer back (the communicator's free below waits for the late
     * kernel: it runs meanwhile) */
    if (late_kernel && o.rc == MPI_SUCCESS) o.wrong = ints_wrong(cout, count, sum_value, size);
    if (late_kernel && rank == size - 1) (void)ints_put(cout, count, late_value, 0);
    if (fault != NULL && fault->env != NULL) {
        if (fault->valued)
            setenv(fault->env, "0", 1);
        else
            unsetenv(fault->env);
    }
    o.cls = err_class(o.rc);
    if (o.rc != MPI_SUCCESS) {
        MPI_Error_string(o.rc, msg, &len);
        o.named = strstr(msg, "gpuring") != NULL;
        if (rank == 0) printf("rank 0: count %d%s: \"%s\"\n", count, label, msg);
    }
    if (fault != NULL && fault->alone && o.rc == MPI_SUCCESS)
        o.wrong = ints_wrong((char *)cout + (rank == size - 1), count, sum_value, size);
    if (bcast && o.rc == MPI_SUCCESS) o.wrong = ints_wrong(cout, mine, bcast_value, 0);
    if (!iallreduce) {
        t0 = MPI_Wtime();
        o.later_cls = err_class(MPI_Allreduce(later_hin != NULL ? later_hin : in,
                                              later_hout != NULL ? later_hout : out, count,
                                              MPI_INT, MPI_SUM, comm));
        o.later_elapsed = MPI_Wtime() - t0;
        if (fault != NULL && fault->alone && o.later_cls == MPI_SUCCESS)
            o.wrong += ints_wrong(out, count, sum_value, size);
        if (allgather && cu.lib != NULL && o.later_cls != MPI_SUCCESS)
            o.kept = refused_calls_kept(comm, count, in, out);
        if (idle) {
            o.idle_cpu = test_cpu_seconds();
            sleep(1);
            o.idle_cpu = test_cpu_seconds() - o.idle_cpu;
        }
        MPI_Comm_free(&comm);
    }
    return o;
}

int main(int argc, char **argv)
{
    int rank, size, passed = 0, failed = 0, by_type = 0, device = 0, maxcount = 0;
    int ncases = 0, counts[MAX_CASES], extras[MAX_CASES];
    double limit;
    char *list, *save = NULL;
    int *in, *out, *hin, *hout;
    size_t outbytes;

    for (int a = 3; a < argc; a++)
        for (size_t f = 0; f < sizeof(faults) / sizeof(faults[0]); f++)
            if (strcmp(argv[a], faults[f].arg) == 0) fault = &faults[f];
    if (fault != NULL && fault->valued) setenv(fault->env, "0", 1); /* before any thread */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: mismatch_check LIMIT COUNT:EXTRA[,...] [type]\n");
        MPI_Finalize();
        return 2;
    }
    limit = atof(argv[1]);
    for (int a = 3; a < argc; a++) {
        by_type |= strcmp(argv[a], "type") == 0;
        allgather |= strcmp(argv[a], "allgather") == 0;
        iallreduce |= strcmp(argv[a], "iallreduce") == 0;
        bcast |= strcmp(argv[a], "bcast") == 0;
        idle |= strcmp(argv[a], "idle") == 0;
        device |= strcmp(argv[a], "device") == 0;
    }
    nomem = fault == &faults[0];
    late_kernel = fault != NULL && strncmp(fault->arg, "latekernel", 10) == 0;
    late_peer = fault != NULL && strcmp(fault->arg, "latekernel_peer") == 0;
    late_grace = late_peer || (fault != NULL && strcmp(fault->arg, "latekernel_grace") == 0);
    if ((fault != NULL && fault->device && !device) || (allgather && by_type) ||
        (allgather && iallreduce) || (bcast && (fault == NULL || fault->alone || allgather ||
                                                iallreduce || by_type))) {
        if (rank == 0) {
            fprintf(stderr, "mismatch_check: %s\n",
                    bcast                ? "bcast: with a fault that fails the call, alone"
                    : allgather && by_type ? "allgather copies bytes: no type to mismatch"
                    : allgather          ? "allgather or iallreduce, not both"
                                         : "this fault needs device");
        }
        MPI_Finalize();
        return 2;
    }
    label = by_type      ? " type"
            : allgather  ? " allgather"
            : iallreduce ? " iallreduce"
            : bcast      ? " bcast"
                         : "";
    /* Open MPI 4.1 hands a failed non-blocking collective's error to MPI_COMM_WORLD's
     * handler, whatever its communicator (5.0 to the communicator's) */
    if (iallreduce) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Type_create_resized(MPI_INT, 0, 8, &strided);
    MPI_Type_commit(&strided);
    list = strdup(argv[2]);
    for (char *t = strtok_r(list, ",", &save); t != NULL && ncases < MAX_CASES;
         t = strtok_r(NULL, ",", &save), ncases++) {
        counts[ncases] = atoi(t);
        extras[ncases] = strchr(t, ':') ? atoi(strchr(t, ':') + 1) : 1;
        if (counts[ncases] + extras[ncases] > maxcount) maxcount = counts[ncases] + extras[ncases];
    }
    free(list);
    /* (the allgather's: every rank's ints, one every 8 bytes) */
    outbytes = allgather    ? (size_t)8 * (size_t)size * (size_t)maxcount
               : iallreduce ? 2 * sizeof(int) * (size_t)maxcount /* and the later call's */
                            : sizeof(int) * (size_t)maxcount;
    hin = malloc(sizeof(int) * (size_t)maxcount);
    hout = malloc(outbytes);
    for (int i = 0; i < maxcount; i++) hin[i] = rank + i;
    if (device) {
        char err[256];
        if (test_cuda_load(rank, err, sizeof err) != 0 ||
            /* (and room for the "nomem" call's byte off the grid) */
            cu.malloc_((void **)&in, sizeof(int) * (size_t)maxcount + 16) != 0 ||
            cu.malloc_((void **)&out, outbytes + 16) != 0 ||
            cu.memcpy_(in, hin, sizeof(int) * (size_t)maxcount, TEST_CUDA_H2D) != 0) {
            fprintf(stderr, "rank %d: device buffers: %s\n", rank, cu.lib ? "CUDA failed" : err);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    } else {
        in = hin;
        out = hout;
    }
    later_out = out + maxcount;
    for (int a = 3; a < argc; a++) {
        if (strcmp(argv[a], "laterhost") == 0) {
            later_hin = hin;
            later_hout = hout;
        }
    }
    if (fault != NULL && strcmp(fault->arg, "late") == 0) {
        host_in = hin;
        host_out = hout;
    }
    if (fault != NULL && strcmp(fault->arg, "othergpu") == 0 && rank == size - 1) {
        int ndev = 0;

        if (cu.get_device_count(&ndev) != 0 || ndev < 2 ||
            cu.set_device((cu.device + 1) % ndev) != 0 ||
            cu.malloc_((void **)&other_in, sizeof(int) * (size_t)maxcount) != 0 ||
            cu.malloc_((void **)&other_out, sizeof(int) * (size_t)maxcount) != 0 ||
            cu.memcpy_(other_in, hin, sizeof(int) * (size_t)maxcount, TEST_CUDA_H2D) != 0 ||
            cu.set_device(cu.device) != 0) {
            fprintf(stderr, "rank %d: othergpu: no second GPU (%d) or its buffers\n", rank,
                    ndev);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }

    for (int k = 0; k < ncases; k++) {
        const int count = counts[k], extra = extras[k];
        outcome_t o = run_case(count, extra, by_type, in, out);
        outcome_t *all = malloc(sizeof(outcome_t) * (size_t)size);
        int bad = 0, saw = 0;


        MPI_Gather(&o, (int)sizeof(o), MPI_BYTE, all, (int)sizeof(o), MPI_BYTE, 0,
                   MPI_COMM_WORLD);
        /* (below gpuring: the next case starts together, however late one rank was in
         * this one -- its setup's exchanges, on MPI_COMM_WORLD, time out too) */
        MPI_Barrier(MPI_COMM_WORLD);
        for (int r = 0; rank == 0 && r < size; r++) {
            const outcome_t *x = &all[r];
            const char *why = NULL;

            const int failing = fault != NULL && r == size - 1; /* its own error */

            if (x->setup_rc != MPI_SUCCESS) { /* (the failures below would be its) */
                why = "the call before it, which set the communicator up, failed";
            } else if (fault != NULL && fault->alone) { /* its failure alone */
                if (failing && x->rc == MPI_SUCCESS) {
                    why = "the rank made to fail returned MPI_SUCCESS";
                } else if (failing && x->cls != fault->cls) {
                    why = "the rank made to fail did not fail with its fault's class";
                } else if (!failing && x->rc != MPI_SUCCESS) {
                    why = "a rank not made to fail failed with it";
                } else if (x->elapsed > limit) {
                    why = "the call took longer than the limit";
                } else if (x->later_cls != MPI_SUCCESS) {
                    why = "the call after it failed (the failure was taken for the "
                          "communicator's)";
                } else if (x->wrong > 0) {
                    why = "wrong sums in a call that succeeded";
                }
            } else if (bcast && !failing && x->rc != MPI_SUCCESS && x->cls != MPI_ERR_OTHER) {
                why = "a rank not made to fail failed with another class than MPI_ERR_OTHER";
            } else if (bcast && failing && x->cls != fault->cls) {
                why = "the rank made to fail did not fail with its fault's class";
            } else if (bcast && (x->elapsed > limit || x->later_elapsed > limit)) {
                why = "the call, or the one after it, took longer than the limit (the "
                      "failed rank's peers waited for it)";
            } else if (bcast && x->later_cls != MPI_ERR_OTHER) {
                why = "the call after it did not fail with MPI_ERR_OTHER";
            } else if (bcast && x->rc == MPI_SUCCESS && x->wrong > 0) {
                why = "its MPI_Bcast returned MPI_SUCCESS without rank 0's data";
            } else if (bcast) {
                /* (its own verdicts, above) */
            } else if (late_grace && failing && x->rc == MPI_SUCCESS) {
                /* its kernel may yet have started before its host gave up (a loaded
                 * machine: the 0.5 s either side of the grace's start), and then ran
                 * the call -- right, if its sums are */
                if (x->wrong > 0)
                    why = "its call returned MPI_SUCCESS with its receive buffer unwritten "
                          "(the late kernel left in the abort's grace)";
            } else if (late_peer && !failing && x->rc == MPI_SUCCESS) {
                /* right only where the late rank's call succeeded too (its kernel started
                 * before its host gave up), with every sum right */
                if (all[size - 1].rc != MPI_SUCCESS)
                    why = "it completed the call with the late rank's units, which that "
                          "rank's kernel sent after its host had given the call up";
                else if (x->wrong > 0)
                    why = "wrong sums in a call that succeeded";
            } else if (x->rc == MPI_SUCCESS) {
                why = "the mismatched call returned MPI_SUCCESS";
            } else if (failing && x->cls != fault->cls) {
                why = "the rank made to fail did not fail with its fault's class";
            } else if (!failing && x->cls != MPI_ERR_OTHER &&
                       (fault != NULL || x->cls != MPI_ERR_COUNT)) {
                why = "the mismatched call failed with another class";
            } else if (!failing && !x->named) {
                why = "its error string does not name gpuring";
            } else if (x->elapsed > limit) {
                why = "the mismatched call took longer than the limit";
            } else if (x->later_cls != MPI_ERR_OTHER) {
                why = "the call after it did not fail with MPI_ERR_OTHER";
            } else if (x->kept > 0) {
                why = "calls refused on the failed communicator kept device memory (their "
                      "packed bytes)";
            } else if (x->idle_cpu > 0.5) {
                why = "the process used over 0.5 s of CPU in the second it slept after the "
                      "failed calls (something of gpuring's spins)";
            }
            saw |= x->cls == MPI_ERR_COUNT || (fault != NULL && fault->alone);
            if (why != NULL) {
                fprintf(stderr, "FAILED count %d extra %d%s rank %d: %s (rc %d class %d, "
                        "%.2f s; later class %d, %.2f s; idle CPU %.2f s; kept %ld B)\n",
                        count, extra, label, r, why, x->rc, x->cls, x->elapsed, x->later_cls,
                        x->later_elapsed, x->idle_cpu, x->kept);
                bad = 1;
            }
        }
        if (rank == 0 && !saw && fault == NULL) {
            fprintf(stderr, "FAILED count %d extra %d%s: no rank reported MPI_ERR_COUNT\n",
                    count, extra, label);
            bad = 1;
        }
        if (rank == 0) {
            printf("rank 0: count %d extra %d%s: %s (rank %d took %.2f s)\n", count, extra,
                   label, bad ? "FAILED" : "ok", size - 1,
                   all[size - 1].elapsed);
            if (bad) failed++; else passed++;
        }
        free(all);
    }

    /* a new communicator is not affected: one call, checked (latekernel: once the late
     * kernels have left) */
    if (late_kernel) {
        sleep(LATE_KERNEL_SEC);
        if (rank == size - 1 && cu.sync() != 0) {
            fprintf(stderr, "FAILED latekernel: cudaDeviceSynchronize\n");
            failed++;
        } else if (rank == size - 1) {
            int longest = 0; /* (each case wrote the pattern over its count) */

            for (int k = 0; k < ncases; k++) longest = counts[k] > longest ? counts[k] : longest;
            if (ints_wrong(out, longest, late_value, 0) != 0) {
                fprintf(stderr, "FAILED latekernel: the late kernel wrote the receive "
                        "buffer after the call had returned\n");
                failed++;
            }
        }
    }
    {
        MPI_Comm comm;
        int rc;
        long wrong = 0, any = 0;

        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        rc = MPI_Allreduce(in, out, maxcount, MPI_INT, MPI_SUM, comm);
        if (device && rc == MPI_SUCCESS &&
            cu.memcpy_(hout, out, sizeof(int) * (size_t)maxcount, TEST_CUDA_D2H) != 0)
            rc = MPI_ERR_OTHER;
        for (int i = 0; rc == MPI_SUCCESS && i < maxcount; i++)
            wrong |= hout[i] != size * i + size * (size - 1) / 2;
        wrong |= rc != MPI_SUCCESS;
        test_verdict_sum(&wrong, &any, 1, MPI_COMM_WORLD);
        if (rank == 0) {
            if (any) {
                fprintf(stderr, "FAILED a new communicator after the mismatches\n");
                failed++;
            } else {
                passed++;
            }
        } else {
            failed += (int)wrong; /* (this rank's exit status) */
        }
        MPI_Comm_free(&comm);
    }
    if (rank == 0) printf("%d passed, %d failed\n", passed, failed);
    MPI_Type_free(&strided);
    if (device) {
        cu.free_(in);
        cu.free_(out);
        if (other_in != NULL) cu.free_(other_in);
        if (other_out != NULL) cu.free_(other_out);
    }
    free(hin);
    free(hout);
    MPI_Finalize();
    return failed != 0;
}
