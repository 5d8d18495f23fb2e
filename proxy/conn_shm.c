/*
 * conn_shm.c -- intra-node connections over POSIX shared memory.
 *
 * The receiver creates one segment holding the FIFO (ctrl page, then NSTEPS
 * slots) and publishes its name; the sender maps it.  Both executors then
 * read and write the same counters and slots: no thread in between.  The
 * name is unlinked as soon as every sender has mapped it, so nothing is left
 * in /dev/shm even if the job dies later.  Its pages are allocated when it is
 * made: a full /dev/shm fails the connection (every rank falls back), not a
 * later step's first write to a slot (SIGBUS).  A process killed before then
 * (an MPI_Abort while a communicator connects) leaves its segments: the name
 * says whose (pid namespace, pid), and the next process of gpuring's on the
 * node to create one removes them (gpuring_conn_shm_sweep), before it creates
 * its first: those carrying its own pid too (a dead process's, whose pid it
 * was given: its own names would collide with them).
 */
#include "proxy/conn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static gpuring_status_t conn_shm_map(const char *name, int create, size_t len, void **base_p)
{
    const char *what = "";

    if (gpuring_shm_map(name, create ? O_CREAT | O_EXCL : 0, len, base_p, &what) == 0)
        return GPURING_OK;
    if (strcmp(what, "its pages") == 0) {
        GPURING_ERROR(GPURING_SUBSYS_PROXY, "cannot reserve %zu bytes of shared memory for "
                      "%s: %s (is /dev/shm full? a container's is 64 MiB unless --shm-size "
                      "says otherwise)", len, name, strerror(errno));
    } else {
        GPURING_ERROR(GPURING_SUBSYS_PROXY, "%s(%s, %zu) failed: %s", what, name, len,
                      strerror(errno));
    }
    /* (one this rank made is its own to remove; an O_EXCL that failed made none) */
    if (create && strcmp(what, "shm_open") != 0) shm_unlink(name);
    return GPURING_ERR_SYSTEM;
}

int gpuring_conn_shm_sweep(void)
{
    const unsigned long long ns = gpuring_pid_ns();
    char prefix[48], name[sizeof(((struct dirent *)0)->d_name) + 1];
    struct dirent *e;
    int removed = 0;
    size_t n;
    DIR *d;

    if (ns == 0) return 0; /* whose a pid is cannot be told */
    d = opendir("/dev/shm");
    if (d == NULL) return 0;
    n = (size_t)snprintf(prefix, sizeof(prefix), "gpuring-%llu-", ns);
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid;

        if (strncmp(e->d_name, prefix, n) != 0) continue;
        pid = strtol(e->d_name + n, &end, 10);
        if (end == e->d_name + n || *end != '-' || pid <= 0) continue;
        /* alive (or not ours to ask); this process's pid: a dead one's (no segment of its
         * own made yet) -- but for arrival boards, which this process may have opened
         * already, on another thread, as its host's lowest rank (gpuring_arrivals_open:
         * named with the owner's pid) */
        if ((pid_t)pid != getpid() && (kill((pid_t)pid, 0) == 0 || errno != ESRCH)) continue;
        if ((pid_t)pid == getpid() && strncmp(end, "-arrivals-", 10) == 0) continue;
        snprintf(name, sizeof(name), "/%s", e->d_name);
        if (shm_unlink(name) == 0) removed++;
    }
    closedir(d);
    if (removed > 0)
        GPURING_INFO(GPURING_SUBSYS_PROXY, "removed %d shared-memory segments from /dev/shm "
                     "left by processes of gpuring's that were killed while connecting",
                     removed);
    return removed;
}

static void conn_shm_sweep_once(void)
{
    (void)gpuring_conn_shm_sweep();
}

gpuring_status_t gpuring_conn_shm_recv_create(gpuring_conn_t *conn, int peer, int channel,
                                              size_t slot_bytes, uint64_t comm_uid,
                                              gpuring_conn_handle_t *handle_p)
{
    static unsigned seq; /* segments this process created: names stay unique */
    static pthread_once_t swept = PTHREAD_ONCE_INIT; /* before the first is made, by any thread */
    size_t len = gpuring_conn_fifo_bytes(GPURING_CONN_SHM, slot_bytes);
    char name[GPURING_SHM_NAME_MAX];
    void *base;

    (void)pthread_once(&swept, conn_shm_sweep_once);
    snprintf(name, sizeof(name), "/gpuring-%llu-%d-%llu-%u", gpuring_pid_ns(), (int)getpid(),
             (unsigned long long)comm_uid, __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
    GPURING_CHECK(conn_shm_map(name, 1, len, &base));
    /* a fresh segment reads as zeros: tail = head = 0 */
    gpuring_conn_attach(conn, GPURING_CONN_SHM, GPURING_CONN_RECV, peer, channel, slot_bytes,
                        base);
    conn->shm_base = base;
    conn->shm_len = len;
    conn->shm_owner = 1;
    memcpy(conn->shm_name, name, sizeof(conn->shm_name));

    gpuring_conn_handle_init(conn, handle_p);
    memcpy(handle_p->where.shm_name, conn->shm_name, sizeof(handle_p->where.shm_name));
    GPURING_DEBUG(GPURING_SUBSYS_PROXY, "shm recv conn from rank %d channel %d: %s, %zu B slots",
                  peer, channel, conn->shm_name, slot_bytes);
    return GPURING_OK;
}

gpuring_status_t gpuring_conn_shm_send_connect(gpuring_conn_t *conn, int peer, int channel,
                                               const gpuring_conn_handle_t *remote)
{
    size_t len = gpuring_conn_fifo_bytes(GPURING_CONN_SHM, remote->slot_bytes);
    void *base;

    GPURING_CHECK(conn_shm_map(remote->where.shm_name, 0, len, &base));
    gpuring_conn_attach(conn, GPURING_CONN_SHM, GPURING_CONN_SEND, peer, channel,
                        remote->slot_bytes, base);
    conn->shm_base = base;
    conn->shm_len = len;
    memcpy(conn->shm_name, remote->where.shm_name, sizeof(conn->shm_name));
    GPURING_DEBUG(GPURING_SUBSYS_PROXY, "shm send conn to rank %d channel %d: %s", peer,
                  channel, conn->shm_name);
    return GPURING_OK;
}

void gpuring_conn_shm_unlink(gpuring_conn_t *conn)
{
    if (conn->shm_owner && conn->shm_name[0] != '\0') {
        shm_unlink(conn->shm_name);
        conn->shm_name[0] = '\0';
    }
}

void gpuring_conn_shm_destroy(gpuring_conn_t *conn)
{
    gpuring_conn_shm_unlink(conn);
    if (conn->shm_base != NULL) {
        munmap(conn->shm_base, conn->shm_len);
        conn->shm_base = NULL;
    }
}
