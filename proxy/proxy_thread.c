/*
 * proxy_thread.c -- the process's proxy: the UCX context and worker, the
 * endpoint cache, the failure record, and the progress thread that drives every
 * registered NET connection (the per-connection work is in conn_net_ucx.c).
 *
 * The thread holds proxy->lock for one progress pass (every connection, then
 * ucp_worker_progress) and releases it between passes, so the main thread can
 * create endpoints and connections while it runs.  It spins (sched_yield
 * between passes) while an operation is active or a connection has work
 * pending, and otherwise sleeps on a condition variable with a short timed
 * wait, so an idle process costs nothing on an oversubscribed node.  While
 * executors run the passes themselves (gpuring_proxy_progress), it sleeps
 * in steps of GPURING_PROXY_BACKSTOP_US and takes over as soon as a step
 * went by without one trying, or when an operation ends with work left
 * (gpuring_proxy_active_end): a host executor then moves its steps with no
 * thread hand-off, and the thread competes for no core (or for no lock).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <uct/api/uct.h>

#include "kernels/device.h"
#include "proxy/proxy_internal.h"

#define GPURING_PROXY_SLEEP_NS (50 * 1000 * 1000) /* idle timed wait */
#define GPURING_PROXY_DEFAULT_TIMEOUT 60.0

static pthread_mutex_t proxy_singleton_lock = PTHREAD_MUTEX_INITIALIZER;
static gpuring_proxy_t *proxy_singleton;

/* ---- the failure record --------------------------------------------------------- */

void gpuring_proxy_note_failure(gpuring_proxy_t *proxy, gpuring_status_t st, const char *msg)
{
    pthread_mutex_lock(&proxy->err_lock);
    if (proxy->err_status == GPURING_OK) {
        proxy->err_status = (st == GPURING_OK) ? GPURING_ERR_NET : st;
        snprintf(proxy->err_msg, sizeof(proxy->err_msg), "%s", msg);
        __atomic_store_n(&proxy->err_set, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&proxy->err_lock);
}

gpuring_status_t gpuring_proxy_error(gpuring_proxy_t *proxy, char *msg, size_t len)
{
    gpuring_status_t st;

    if (proxy == NULL || !__atomic_load_n(&proxy->err_set, __ATOMIC_ACQUIRE)) {
        if (msg != NULL && len > 0) msg[0] = '\0';
        return GPURING_OK;
    }
    pthread_mutex_lock(&proxy->err_lock);
    st = proxy->err_status;
    if (msg != NULL && len > 0) snprintf(msg, len, "%s", proxy->err_msg);
    pthread_mutex_unlock(&proxy->err_lock);
    return st;
}

/* ---- endpoint cache --------------------------------------------------------- */

static void proxy_ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    gpuring_proxy_ep_t *pe = arg;
    char msg[224];

    (void)ep;
    if (!pe->failed) { /* (the first status: readers may have it) */
        pe->fail_status = status;
        __atomic_store_n(&pe->failed, 1, __ATOMIC_RELEASE); /* its connections' calls fail */
    }
    /* (endpoints are the process's, shared by its communicators: the rank is the
     * peer's in the communicator that first connected to it) */
    snprintf(msg, sizeof(msg),
             "net endpoint to the process that was rank %d of the first communicator to "
             "connect to it (peer key %#llx) failed: %s",
             pe->peer_rank, (unsigned long long)pe->peer_key, ucs_status_string(status));
    if (__atomic_load_n(&pe->proxy->active, __ATOMIC_ACQUIRE) == 0) {
        /* no operation needs it now: most likely the peer finished and exited
         * (MPI_Finalize). A call that needs it later fails at once, naming it. */
        GPURING_DEBUG(GPURING_SUBSYS_NET, "%s (while idle)", msg);
        return;
    }
    gpuring_proxy_note_failure(pe->proxy, GPURING_ERR_NET, msg);
    if (!pe->reported) GPURING_ERROR(GPURING_SUBSYS_NET, "%s", msg);
    pe->reported = 1;
}

/* The transports of an endpoint's lanes, from ucp_ep_print_info: the
 * "transport/device" words of its lane lines, space separated. */
static void proxy_ep_lanes(ucp_ep_h ep, char *buf, size_t len)
{
    char *text = NULL, *line, *save = NULL;
    size_t text_len = 0, used = 0;
    FILE *f;

    if (len == 0) return;
    buf[0] = '\0';
    f = open_memstream(&text, &text_len);
    if (f == NULL) return;
    ucp_ep_print_info(ep, f);
    fclose(f);
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char word[128];
        const char *p = strstr(line, "lane[");

        /* "#   lane[0]:  1:posix/memory.0 md[1]  ..." */
        if (p == NULL || (p = strchr(p, ':')) == NULL) continue;
        p++;
        while (*p == ' ') p++;
        while (*p >= '0' && *p <= '9') p++;
        if (*p == ':') p++;
        if (sscanf(p, "%127s", word) != 1) continue;
        if (strstr(buf, word) != NULL) continue;
        used += (size_t)snprintf(buf + used, len - GPURING_MIN(used, len), "%s%s",
                                 used > 0 ? " " : "", word);
        if (used >= len) break;
    }
    free(text);
}

/*
 * A new endpoint's warm-up: one message each way, posted at creation.  UCX's
 * same-host transport (sysv in 1.13) maps the peer's receive descriptors on
 * its first send too large for a FIFO element, inside that send; left to the
 * data path, that shmat came inside a call, and once slept in the kernel for
 * a whole wait timeout (README, "Limitations and notes": the rare stall).
 * Sent here, on the thread that connects, it maps them at connection
 * set-up, with no data moving.
 * The peer posts the receive that takes it (any peer's: each endpoint posts
 * one and gets one); nothing waits for either, and a receive still in
 * flight at finalize is cancelled.
 */
static void proxy_ep_warm_up(gpuring_proxy_ep_t *pe)
{
    static const char payload[GPURING_NET_WARMUP_BYTES];
    const ucp_tag_t tag = gpuring_net_tag(GPURING_TAG_UID_WARMUP, GPURING_TAG_KIND_DATA, 0,
                                          GPURING_TAG_WARMUP_LOW);
    ucp_request_param_t param;
    ucs_status_ptr_t req;

    memset(&param, 0, sizeof(param));
    req = ucp_tag_recv_nbx(pe->proxy->worker, pe->warm_buf, sizeof(pe->warm_buf), tag,
                           ~(ucp_tag_t)0, &param);
    if (UCS_PTR_IS_ERR(req))
        GPURING_DEBUG(GPURING_SUBSYS_NET, "warm-up receive for rank %d: %s", pe->peer_rank,
                      ucs_status_string(UCS_PTR_STATUS(req)));
    else
        pe->warm_recv = req;
    /* a static payload: the request, if any, frees itself when done */
    req = ucp_tag_send_nbx(pe->ep, payload, sizeof(payload), tag, &param);
    if (UCS_PTR_IS_PTR(req))
        ucp_request_free(req);
    else if (UCS_PTR_IS_ERR(req))
        GPURING_DEBUG(GPURING_SUBSYS_NET, "warm-up send to rank %d: %s", pe->peer_rank,
                      ucs_status_string(UCS_PTR_STATUS(req)));
}

/* The warm-up receive, done or cancelled; bounded by the wait timeout. */
static void proxy_ep_warm_finish(gpuring_proxy_ep_t *pe)
{
    gpuring_proxy_t *proxy = pe->proxy;
    gpuring_spin_t spin;

    if (pe->warm_recv == NULL) return;
    if (ucp_request_check_status(pe->warm_recv) == UCS_INPROGRESS)
        ucp_request_cancel(proxy->worker, pe->warm_recv);
    gpuring_spin_init(&spin, gpuring_proxy_wait_timeout(proxy));
    while (ucp_request_check_status(pe->warm_recv) == UCS_INPROGRESS) {
        if (gpuring_proxy_poll_tick(proxy, &spin) != GPURING_OK) {
            GPURING_WARN(GPURING_SUBSYS_NET, "cancelling the warm-up receive for rank %d "
                         "timed out", pe->peer_rank);
            return; /* leaked with its endpoint: UCX may still write warm_buf */
        }
    }
    ucp_request_free(pe->warm_recv);
    pe->warm_recv = NULL;
}

gpuring_status_t gpuring_proxy_peer_describe(gpuring_proxy_t *proxy, uint64_t peer_key,
                                             int *detects_failure_p, char *lanes, size_t len)
{
    gpuring_proxy_ep_t *pe;
    gpuring_status_t st = GPURING_ERR_INVALID;

    if (!gpuring_proxy_lock_within(proxy, "describing an endpoint")) return GPURING_ERR_TIMEOUT;
    for (pe = proxy->eps; pe != NULL; pe = pe->next) {
        if (pe->peer_key != peer_key) continue;
        if (detects_failure_p != NULL) *detects_failure_p = pe->detects_failure;
        if (lanes != NULL) proxy_ep_lanes(pe->ep, lanes, len);
        st = GPURING_OK;
        break;
    }
    gpuring_proxy_unlock(proxy);
    return st;
}

gpuring_status_t gpuring_proxy_get_ep(gpuring_proxy_t *proxy, uint64_t peer_key,
                                      int same_host, const void *addr, size_t addr_len,
                                      int peer_rank, gpuring_proxy_ep_t **pe_p)
{
    gpuring_proxy_ep_t *pe;
    ucp_ep_params_t params;
    ucs_status_t us;
    /* UCX 1.13's shared-memory transports cannot detect a dead peer: asking
     * for it moves a same-host peer to tcp/lo.  There the wait timeout does */
    const int detect = proxy->peer_failure == GPURING_PROXY_PEER_FAILURE_ALL ||
                       (proxy->peer_failure == GPURING_PROXY_PEER_FAILURE_REMOTE && !same_host);

    for (pe = proxy->eps; pe != NULL; pe = pe->next) {
        if (pe->peer_key == peer_key) {
            *pe_p = pe;
            return GPURING_OK;
        }
    }
    if (addr == NULL || addr_len == 0) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "no worker address for rank %d", peer_rank);
        return GPURING_ERR_INVALID;
    }

    pe = calloc(1, sizeof(*pe));
    if (pe == NULL) return GPURING_ERR_NO_MEMORY;
    pe->proxy = proxy;
    pe->peer_key = peer_key;
    pe->peer_rank = peer_rank;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = addr;
    params.err_mode = detect ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = proxy_ep_error_cb;
    params.err_handler.arg = pe;
    if (!detect) params.field_mask &= ~(uint64_t)UCP_EP_PARAM_FIELD_ERR_HANDLER;
    us = ucp_ep_create(proxy->worker, &params, &pe->ep);
    pe->detects_failure = detect && us == UCS_OK;
    if (us != UCS_OK && detect) {
        /* e.g. UCX_TLS=shm,self: no transport detects peer failure in UCX 1.13 */
        GPURING_WARN(GPURING_SUBSYS_NET,
                     "ucp_ep_create to rank %d with peer failure handling failed (%s); "
                     "retrying without it",
                     peer_rank, ucs_status_string(us));
        params.field_mask &= ~(uint64_t)UCP_EP_PARAM_FIELD_ERR_HANDLER;
        params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
        us = ucp_ep_create(proxy->worker, &params, &pe->ep);
    }
    if (us != UCS_OK) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "ucp_ep_create to rank %d (peer key %#llx) failed: %s",
                      peer_rank, (unsigned long long)peer_key, ucs_status_string(us));
        free(pe);
        return GPURING_ERR_NET;
    }
    if (GPURING_LOG_ENABLED(GPURING_LOG_DEBUG, GPURING_SUBSYS_NET)) {
        char lanes[256];

        proxy_ep_lanes(pe->ep, lanes, sizeof(lanes));
        GPURING_DEBUG(GPURING_SUBSYS_NET,
                      "net endpoint to rank %d (peer key %#llx, %s host) created: peer failure "
                      "detection %s, lanes %s",
                      peer_rank, (unsigned long long)peer_key, same_host ? "same" : "another",
                      pe->detects_failure ? "on" : "off (the wait timeout catches a dead peer)",
                      lanes);
    }
    proxy_ep_warm_up(pe);
    pe->next = proxy->eps;
    proxy->eps = pe;
    *pe_p = pe;
    return GPURING_OK;
}

/*
 * Close every cached endpoint, bounded; 1 if a close did not end (its endpoint's
 * error callback may still come: its record is kept, and UCX must not be torn
 * down).  One with peer failure detection is force-closed (its peer may be
 * gone: a flushing close could wait for ever) after a flush of what it sent,
 * bounded by GPURING_PROXY_CLOSE_FLUSH_S for all of them together.  UCX refuses
 * to force-close one without (UCP_ERR_HANDLING_MODE_NONE: "Invalid parameter"), and a flushing close
 * would wait for a peer that may have gone unseen: such an endpoint is left
 * to ucp_worker_destroy, which destroys it as a forced close would (or, where
 * UCX is not torn down, to the process's exit).
 */
/* What went out over a live endpoint with failure detection before its forced close
 * (which drops what UCX holds: a last credit reported sent may still sit in a socket's
 * buffer, and the peer's teardown would wait its wait timeout for it), waited for until
 * `until` (gpuring_time_sec): one bound for all of the proxy's endpoints. */
static void proxy_ep_flush(gpuring_proxy_t *proxy, gpuring_proxy_ep_t *pe, double until)
{
    ucp_request_param_t param;
    ucs_status_ptr_t req;
    gpuring_spin_t spin;
    const double left = until - gpuring_time_sec();

    if (left <= 0 || __atomic_load_n(&pe->failed, __ATOMIC_ACQUIRE)) return;
    memset(&param, 0, sizeof(param));
    req = ucp_ep_flush_nbx(pe->ep, &param);
    if (!UCS_PTR_IS_PTR(req)) return; /* flushed already, or it failed: nothing to wait for */
    gpuring_spin_init(&spin, left);
    while (ucp_request_check_status(req) == UCS_INPROGRESS &&
           gpuring_proxy_poll_tick(proxy, &spin) == GPURING_OK)
        continue;
    ucp_request_free(req); /* (done or not: the forced close ends it) */
}

static int proxy_close_eps(gpuring_proxy_t *proxy)
{
    gpuring_proxy_ep_t *pe;
    ucp_request_param_t param;
    int open = 0;
    const double flush_until = gpuring_time_sec() + GPURING_PROXY_CLOSE_FLUSH_S;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;

    while ((pe = proxy->eps) != NULL) {
        ucs_status_ptr_t req = NULL;
        gpuring_spin_t spin;
        int closing = 0;

        proxy->eps = pe->next;
        proxy_ep_warm_finish(pe);
        if (pe->detects_failure) {
            proxy_ep_flush(proxy, pe, flush_until);
            req = ucp_ep_close_nbx(pe->ep, &param);
        }
        if (UCS_PTR_IS_PTR(req)) {
            gpuring_spin_init(&spin, gpuring_proxy_wait_timeout(proxy));
            while (ucp_request_check_status(req) == UCS_INPROGRESS) {
                if (gpuring_proxy_poll_tick(proxy, &spin) != GPURING_OK) {
                    GPURING_WARN(GPURING_SUBSYS_NET,
                                 "closing the endpoint to rank %d timed out", pe->peer_rank);
                    break;
                }
            }
            closing = ucp_request_check_status(req) == UCS_INPROGRESS;
            if (!closing) ucp_request_free(req);
        } else if (UCS_PTR_IS_ERR(req)) {
            GPURING_WARN(GPURING_SUBSYS_NET, "closing the endpoint to rank %d failed: %s",
                         pe->peer_rank, ucs_status_string(UCS_PTR_STATUS(req)));
        }
        open |= closing;
        /* else UCX may still land in its buffer, or call its error callback with it */
        if (pe->warm_recv == NULL && !closing) free(pe);
    }
    return open;
}

/* ---- connection list --------------------------------------------------------- */

void gpuring_proxy_register(gpuring_proxy_t *proxy, gpuring_net_conn_t *net)
{
    net->prev = NULL;
    net->next = proxy->conns;
    if (proxy->conns != NULL) proxy->conns->prev = net;
    proxy->conns = net;
    net->registered = 1;
    if (net->device >= 0) {
        net->device_counted = 1;
        proxy->device_conns++;
        __atomic_store_n(&proxy->device, net->device, __ATOMIC_RELAXED);
    }
}

void gpuring_proxy_device_conn_gone(gpuring_proxy_t *proxy, gpuring_net_conn_t *net)
{
    if (!net->device_counted) return;
    net->device_counted = 0;
    /* the last: callers drive the passes again (only the thread did: proxy_drive) */
    if (--proxy->device_conns == 0) __atomic_store_n(&proxy->device, -1, __ATOMIC_RELAXED);
}

void gpuring_proxy_deregister(gpuring_proxy_t *proxy, gpuring_net_conn_t *net)
{
    if (!net->registered) return;
    if (net->prev != NULL)
        net->prev->next = net->next;
    else
        proxy->conns = net->next;
    if (net->next != NULL) net->next->prev = net->prev;
    net->next = net->prev = NULL;
    net->registered = 0;
}

void gpuring_proxy_adopt_orphan(gpuring_proxy_t *proxy, gpuring_net_conn_t *net)
{
    net->prev = NULL;
    net->next = proxy->orphans;
    proxy->orphans = net;
}

void gpuring_proxy_wake(gpuring_proxy_t *proxy)
{
    if (!gpuring_proxy_lock_within(proxy, "waking the progress thread")) return;
    pthread_cond_signal(&proxy->cond);
    gpuring_proxy_unlock(proxy);
}

/* ---- the lock, and what its holder does ------------------------------------------- */

static __thread int proxy_tid; /* this thread's id, once asked */

static int proxy_thread_id(void)
{
    if (proxy_tid == 0) proxy_tid = (int)syscall(SYS_gettid);
    return proxy_tid;
}

void gpuring_proxy_doing(gpuring_proxy_t *proxy, const char *doing, const gpuring_net_conn_t *net)
{
    __atomic_store_n(&proxy->doing, doing, __ATOMIC_RELAXED);
    __atomic_store_n(&proxy->doing_peer, net != NULL ? net->peer : -1, __ATOMIC_RELAXED);
    if (net == NULL) return;
    __atomic_store_n(&proxy->doing_channel, net->channel, __ATOMIC_RELAXED);
    __atomic_store_n(&proxy->doing_dir, (int)net->dir, __ATOMIC_RELAXED);
}

static void proxy_held(gpuring_proxy_t *proxy, const char *doing)
{
    __atomic_store_n(&proxy->holder, proxy_thread_id(), __ATOMIC_RELAXED);
    gpuring_proxy_doing(proxy, doing, NULL);
    /* the lock was free: whatever held it past the wait timeout has ended */
    if (__atomic_load_n(&proxy->stuck, __ATOMIC_RELAXED)) {
        __atomic_store_n(&proxy->stuck, 0, __ATOMIC_RELEASE);
        GPURING_WARN(GPURING_SUBSYS_NET, "proxy: its lock is free again (the pass that held it "
                     "ended): its connections are progressed again");
    }
}

void gpuring_proxy_lock(gpuring_proxy_t *proxy, const char *doing)
{
    pthread_mutex_lock(&proxy->lock);
    proxy_held(proxy, doing);
}

int gpuring_proxy_trylock(gpuring_proxy_t *proxy, const char *doing)
{
    if (pthread_mutex_trylock(&proxy->lock) != 0) return 0;
    proxy_held(proxy, doing);
    return 1;
}

void gpuring_proxy_unlock(gpuring_proxy_t *proxy)
{
    __atomic_store_n(&proxy->holder, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&proxy->lock);
}

/* /proc/self/task/<tid>/<what>, as much as fits ("" if unreadable).  No
 * stdio: nothing here allocates (a stuck thread may hold the allocator's
 * or the address space's lock). */
static void proxy_task_read(int tid, const char *what, char *buf, size_t len)
{
    char path[64];
    ssize_t got = 0, r;
    int fd;

    buf[0] = '\0';
    snprintf(path, sizeof(path), "/proc/self/task/%d/%s", tid, what);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    while ((size_t)got + 1 < len && (r = read(fd, buf + got, len - 1 - (size_t)got)) > 0)
        got += r;
    close(fd);
    buf[got] = '\0';
}

/* The innermost frames of thread tid's kernel stack (readable by root only),
 * as ", kernel stack f1 < f2 < f3 < f4"; nothing if unreadable or empty. */
static void proxy_task_kernel_stack(int tid, char *buf, size_t len)
{
    char stack[1024], *line, *next;
    size_t n = 0;
    int frames = 0;

    buf[0] = '\0';
    proxy_task_read(tid, "stack", stack, sizeof(stack));
    /* lines "[<0>] name+0x1a/0x40" */
    for (line = stack; frames < 6 && n < len && *line != '\0'; line = next) {
        char *name = strchr(line, ']');

        next = line + strcspn(line, "\n");
        if (*next != '\0') *next++ = '\0';
        if (name == NULL) continue;
        name += strspn(name + 1, " ") + 1;
        name[strcspn(name, "+")] = '\0';
        n += (size_t)snprintf(buf + n, len - n, "%s%s", frames++ ? " < " : ", kernel stack ",
                              name);
    }
}

/* What thread tid does as the kernel sees it: its state, where it sleeps,
 * the system call it is in. */
static void proxy_task_describe(int tid, char *buf, size_t len)
{
    char stat[256], wchan[64], sys[128];
    const char *close_paren;
    char state = '?';
    size_t n;

    proxy_task_read(tid, "stat", stat, sizeof(stat));
    proxy_task_read(tid, "wchan", wchan, sizeof(wchan));
    proxy_task_read(tid, "syscall", sys, sizeof(sys));
    sys[strcspn(sys, "\n")] = '\0';
    close_paren = strrchr(stat, ')');
    if (close_paren != NULL && close_paren[1] == ' ') state = close_paren[2];
    n = (size_t)snprintf(buf, len, "state %c", state);
    if (n < len && wchan[0] != '\0' && strcmp(wchan, "0") != 0)
        n += (size_t)snprintf(buf + n, len - n, ", sleeping in %s", wchan);
    if (n < len && sys[0] != '\0') {
        /* "running", or "<nr> <6 args> <sp> <pc>": the number and the first argument */
        char *sp = strchr(sys, ' ');

        if (sp != NULL && (sp = strchr(sp + 1, ' ')) != NULL) *sp = '\0';
        n += (size_t)snprintf(buf + n, len - n, ", system call %s", sys);
    }
    if (n < len) proxy_task_kernel_stack(tid, buf + n, len - n);
}

/*
 * Every thread of this process as the kernel sees it, one warning line each:
 * whoever keeps the lock holder asleep in the kernel (a reader of the
 * address space's lock, say) may be one of them.  Once per process: every
 * stalled connection's report would list the same.  getdents, not
 * opendir: nothing here allocates.
 */
static void proxy_log_threads(int holder)
{
    static int listed;
    char dents[4096], name[32], task[384];
    long got;
    int fd;

    if (__atomic_exchange_n(&listed, 1, __ATOMIC_RELAXED)) return;
    fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    while ((got = syscall(SYS_getdents64, fd, dents, sizeof(dents))) > 0) {
        for (long off = 0; off < got;) {
            /* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
            unsigned short reclen;
            const char *dname = dents + off + 19;
            int tid;

            memcpy(&reclen, dents + off + 16, sizeof(reclen));
            off += reclen;
            tid = atoi(dname);
            if (tid <= 0) continue;
            proxy_task_read(tid, "comm", name, sizeof(name));
            name[strcspn(name, "\n")] = '\0';
            proxy_task_describe(tid, task, sizeof(task));
            GPURING_WARN(GPURING_SUBSYS_NET, "proxy lock held: thread %d (%s)%s: %s", tid, name,
                         tid == holder ? ", the holder" : "", task);
        }
    }
    close(fd);
}

/* Who holds the lock and what it does there, for a report: it has been held for
 * `held` ("a second"), and passes ended meanwhile or not (passes0: the count when
 * the wait began). */
static void proxy_describe_holder(gpuring_proxy_t *proxy, const char *held, uint64_t passes0,
                                  char *buf, size_t len)
{
    const int tid = __atomic_load_n(&proxy->holder, __ATOMIC_RELAXED);
    const char *what = __atomic_load_n(&proxy->doing, __ATOMIC_RELAXED);
    const int peer = __atomic_load_n(&proxy->doing_peer, __ATOMIC_RELAXED);
    const int send = __atomic_load_n(&proxy->doing_dir, __ATOMIC_RELAXED) == GPURING_CONN_SEND;
    const char *who = tid == __atomic_load_n(&proxy->thread_tid, __ATOMIC_RELAXED)
                          ? "the progress thread"
                      : tid == proxy_thread_id() ? "this thread"
                                                 : "thread";
    char where[96] = "", task[256] = "";

    if (peer >= 0)
        snprintf(where, sizeof(where), " (the %s connection %s rank %d channel %d)",
                 send ? "send" : "recv", send ? "to" : "from", peer,
                 __atomic_load_n(&proxy->doing_channel, __ATOMIC_RELAXED));
    if (tid > 0) proxy_task_describe(tid, task, sizeof(task));
    snprintf(buf, len, "proxy: its lock was held for %s (%s) by %s %d, in %s%s; that thread: %s",
             held,
             __atomic_load_n(&proxy->passes, __ATOMIC_RELAXED) == passes0
                 ? "no pass ended" : "passes ended, the lock never free",
             who, tid, what != NULL ? what : "?", where, task[0] != '\0' ? task : "unknown");
}

int gpuring_proxy_lock_for_report(gpuring_proxy_t *proxy, const char *doing, char *buf,
                                  size_t len)
{
    const uint64_t passes0 = __atomic_load_n(&proxy->passes, __ATOMIC_RELAXED);
    /* an earlier report gave up on this same holder, and no pass ended since: the lock
     * is still held as it was then -- a report over every connection of a timed-out
     * call must not wait a second for each */
    const int again = __atomic_load_n(&proxy->report_gave_up, __ATOMIC_RELAXED) == passes0 + 1 &&
                      __atomic_load_n(&proxy->report_holder, __ATOMIC_RELAXED) ==
                          __atomic_load_n(&proxy->holder, __ATOMIC_RELAXED);
    const double until = gpuring_time_sec() + (again ? 0.0 : 1.0);

    while (!gpuring_proxy_trylock(proxy, doing)) {
        if (gpuring_time_sec() <= until) {
            sched_yield();
            continue;
        }
        proxy_describe_holder(proxy, again ? "a second at an earlier report" : "a second",
                              passes0, buf, len);
        if (!again) proxy_log_threads(__atomic_load_n(&proxy->holder, __ATOMIC_RELAXED));
        __atomic_store_n(&proxy->report_holder, __atomic_load_n(&proxy->holder, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&proxy->report_gave_up, passes0 + 1, __ATOMIC_RELAXED);
        return 0;
    }
    return 1;
}

int gpuring_proxy_lock_within(gpuring_proxy_t *proxy, const char *doing)
{
    const double limit = gpuring_proxy_wait_timeout(proxy);
    uint64_t passes0 = __atomic_load_n(&proxy->passes, __ATOMIC_RELAXED);
    struct timespec deadline;
    char held[48], why[512];

    if (gpuring_proxy_trylock(proxy, doing)) return 1;
    if (__atomic_load_n(&proxy->stuck, __ATOMIC_ACQUIRE)) {
        GPURING_DEBUG(GPURING_SUBSYS_NET, "proxy stuck: %s is left undone", doing);
        return 0;
    }
    for (;;) {
        gpuring_deadline(limit, &deadline);
        if (gpuring_mutex_lock_until(&proxy->lock, &deadline) == 0) {
            proxy_held(proxy, doing);
            return 1;
        }
        /* passes ended meanwhile: the lock is alive, only never free when this
         * looked (the mutex is not fair) -- wait again */
        const uint64_t passes = __atomic_load_n(&proxy->passes, __ATOMIC_RELAXED);
        if (passes == passes0) break;
        passes0 = passes;
    }
    if (gpuring_proxy_trylock(proxy, doing)) return 1; /* it ended just now */
    snprintf(held, sizeof(held), "%g s, the wait timeout", limit);
    proxy_describe_holder(proxy, held, passes0, why, sizeof(why));
    /* (a lock freed between that look and this store: the next taker clears it) */
    if (__atomic_exchange_n(&proxy->stuck, 1, __ATOMIC_ACQ_REL)) {
        GPURING_DEBUG(GPURING_SUBSYS_NET, "%s: %s is left undone", why, doing);
        return 0;
    }
    GPURING_ERROR(GPURING_SUBSYS_NET, "%s.  Its net connections are stuck until that ends: %s "
                  "is left undone (what UCX may still touch is kept), and calls over them fail",
                  why, doing);
    proxy_log_threads(__atomic_load_n(&proxy->holder, __ATOMIC_RELAXED));
    return 0;
}

void gpuring_proxy_describe_thread(gpuring_proxy_t *proxy, char *buf, size_t len)
{
    const struct timespec look = {0, GPURING_PROXY_LOOK_NS};
    const uint64_t passes0 = __atomic_load_n(&proxy->passes, __ATOMIC_RELAXED);
    const uint64_t drives0 = __atomic_load_n(&proxy->drives, __ATOMIC_RELAXED);
    const int tid = __atomic_load_n(&proxy->thread_tid, __ATOMIC_RELAXED);
    uint64_t passes, drives;
    size_t n = strlen(buf);
    char task[256];

    nanosleep(&look, NULL);
    passes = __atomic_load_n(&proxy->passes, __ATOMIC_RELAXED);
    drives = __atomic_load_n(&proxy->drives, __ATOMIC_RELAXED);
    task[0] = '\0';
    if (tid > 0) proxy_task_describe(tid, task, sizeof(task));
    if (n + 1 >= len) return;
    snprintf(buf + n, len - n,
             "; the proxy ran %llu passes (%llu in the %d ms this report looked, %llu of "
             "them by executors), %d operations active, its thread %d %s: %s",
             (unsigned long long)passes0, (unsigned long long)(passes - passes0),
             GPURING_PROXY_LOOK_NS / 1000000, (unsigned long long)(drives - drives0),
             __atomic_load_n(&proxy->active, __ATOMIC_RELAXED), tid,
             __atomic_load_n(&proxy->napping, __ATOMIC_RELAXED) ? "napping" : "awake",
             task[0] != '\0' ? task : "unknown");
}

/* ---- the thread ----------------------------------------------------------------- */

/* Every connection's FIFO work handed to UCX -- steps posted, completions
 * retired, receives and credits posted -- without polling the worker;
 * returns GPURING_NET_* bits.  Lock held, on any thread. */
static int proxy_post_conns(gpuring_proxy_t *proxy)
{
    gpuring_net_conn_t *net;
    int flags = 0;

    for (net = proxy->conns; net != NULL; net = net->next)
        flags |= gpuring_net_conn_progress(net);
    return flags;
}

/* One pass over every connection and the worker; returns GPURING_NET_* bits.
 * Lock held, on any thread. */
static int proxy_pass_conns(gpuring_proxy_t *proxy)
{
    int flags, moved, i;

    flags = proxy_post_conns(proxy);
    /* up to a few progress calls per pass, each completion retired right after
     * (a second look); the pass ends at the first that moves a counter -- a
     * landed step, a send done, a credit -- so whoever waits for it goes on
     * at once: another poll would cost a system call per transport on some
     * (tcp: an epoll_wait per interface, 2 us each on the project's VMs) */
    gpuring_proxy_doing(proxy, "ucp_worker_progress", NULL);
    for (i = 0; i < 4; i++) {
        proxy->polls++;
        if (ucp_worker_progress(proxy->worker) == 0) break;
        gpuring_proxy_doing(proxy, "a pass, between its steps", NULL);
        moved = proxy_post_conns(proxy);
        flags = moved | GPURING_NET_MOVED; /* what this look leaves pending */
        if (moved & GPURING_NET_MOVED) break;
        gpuring_proxy_doing(proxy, "ucp_worker_progress", NULL);
    }
    gpuring_proxy_doing(proxy, "a pass, between its steps", NULL);
    __atomic_store_n(&proxy->passes, proxy->passes + 1, __ATOMIC_RELAXED);
    return flags;
}

/* The thread's pass. */
static int proxy_pass(gpuring_proxy_t *proxy)
{
    /* UCX moves device slots with the CUDA driver, on this thread: the slots'
     * context must be current here (a new thread has none) */
    const int device = __atomic_load_n(&proxy->device, __ATOMIC_RELAXED);

    /* (-1: no GPU-direct connection left; the thread keeps the context it has) */
    if (device >= 0 && device != proxy->thread_device && gpuring_device_use(device) == GPURING_OK)
        proxy->thread_device = device;
    return proxy_pass_conns(proxy);
}

/* An executor's pass (pass_fn: the whole pass, or a post). */
static int proxy_drive(gpuring_proxy_t *proxy, int (*pass_fn)(gpuring_proxy_t *))
{
    uint64_t passes;
    int flags;

    /* GPU-direct slots: looked at first without the lock (an executor polling
     * its kernel calls this at every poll), then again under it */
    if (__atomic_load_n(&proxy->device, __ATOMIC_RELAXED) >= 0) return 0;
    /* an executor is here to run passes (a plain increment: two racing may
     * count one, still a change, which is all the thread looks at) */
    __atomic_store_n(&proxy->tries, __atomic_load_n(&proxy->tries, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
    if (!gpuring_proxy_trylock(proxy, "a caller's pass")) return 0; /* a pass is running */
    if (proxy->device >= 0) { /* GPU-direct slots: the thread's context moves them */
        gpuring_proxy_unlock(proxy);
        return 0;
    }
    passes = proxy->passes;
    flags = pass_fn(proxy);
    passes = proxy->passes - passes; /* 0 for the connections' part alone */
    gpuring_proxy_unlock(proxy);
    __atomic_fetch_add(&proxy->drives, passes, __ATOMIC_RELAXED);
    return (flags & GPURING_NET_MOVED) != 0;
}

int gpuring_proxy_progress(gpuring_proxy_t *proxy)
{
    return proxy_drive(proxy, proxy_pass_conns);
}

/* An executor's post (gpuring_proxy_post): the connections' part, and the
 * whole pass where a send end may have a credit waiting in UCX. */
static int proxy_post_pass(gpuring_proxy_t *proxy)
{
    const int flags = proxy_post_conns(proxy);

    /* a sender that never waits (a broadcast's root runs calls ahead) would
     * otherwise see its credits only once its window is full */
    return (flags & GPURING_NET_POLL) ? proxy_pass_conns(proxy) : flags;
}

int gpuring_proxy_post(gpuring_proxy_t *proxy)
{
    return proxy_drive(proxy, proxy_post_pass);
}

/* ---- active operations -------------------------------------------------------- */

void gpuring_proxy_active_begin(gpuring_proxy_t *proxy, int driven)
{
    /* seq_cst against the thread's napping store and active load (proxy_main):
     * either it sees this operation and stays up, or this sees it napping.  An
     * operation whose caller runs the passes leaves it napping (GPU-direct
     * slots excepted: only the thread moves them) */
    if (__atomic_fetch_add(&proxy->active, 1, __ATOMIC_SEQ_CST) == 0 &&
        __atomic_load_n(&proxy->napping, __ATOMIC_SEQ_CST) &&
        (!driven || __atomic_load_n(&proxy->device, __ATOMIC_RELAXED) >= 0))
        gpuring_proxy_wake(proxy);
}

void gpuring_proxy_active_end(gpuring_proxy_t *proxy)
{
    uint64_t passes;
    int flags;

    __atomic_fetch_sub(&proxy->active, 1, __ATOMIC_ACQ_REL);
    if (__atomic_load_n(&proxy->device, __ATOMIC_RELAXED) >= 0) return; /* the thread's anyway */
    /* One more pass: what the operation left (its last sends in flight, steps
     * waiting for a credit, a credit owed -- perhaps released after its last
     * pass) goes to the thread at once, not at its next backstop look (a peer
     * may be waiting for it).  Under the lock: the thread decides to sleep
     * holding it, so the signal is never lost.  (Not had: the proxy is stuck,
     * and the operation's work waits for whatever holds it.) */
    if (!gpuring_proxy_lock_within(proxy, "an operation's last pass")) return;
    passes = proxy->passes;
    if (proxy->device >= 0) {
        /* GPU-direct slots came meanwhile (another communicator's setup): the
         * thread's, as in proxy_drive */
        flags = GPURING_NET_PENDING;
    } else {
        /* the worker only where something is left: a call whose sends UCX finished
         * at once (small ones, credits) ends without a poll of every transport */
        flags = proxy_post_conns(proxy);
        if (flags & (GPURING_NET_PENDING | GPURING_NET_POLL)) flags = proxy_pass_conns(proxy);
    }
    if (flags & GPURING_NET_PENDING) {
        proxy->handoff = 1;
        pthread_cond_signal(&proxy->cond);
    }
    passes = proxy->passes - passes;
    gpuring_proxy_unlock(proxy);
    __atomic_fetch_add(&proxy->drives, passes, __ATOMIC_RELAXED);
}

/* Sleep on the condition variable for at most ns (lock held; released meanwhile). */
static void proxy_timed_wait(gpuring_proxy_t *proxy, long ns)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += ns;
    while (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    __atomic_store_n(&proxy->holder, 0, __ATOMIC_RELAXED);
    pthread_cond_timedwait(&proxy->cond, &proxy->lock, &ts);
    proxy_held(proxy, "the progress thread's pass");
}

/* Busy passes in a row before the thread yields anyway (lets the main thread
 * take the lock, and other ranks the core). */
#define GPURING_PROXY_BUSY_PASSES 16

/* The credits owed go (gpuring_net_conns_settle) at least every backstop interval while
 * this process is busy with gpuring -- a peer's teardown waits for them, and a process
 * that keeps calling on other communicators is never idle -- and always where `now`
 * (before a nap). */
static void proxy_settle(gpuring_proxy_t *proxy, double *settled, int now)
{
    const double t = gpuring_time_sec();

    if (!now && t - *settled < GPURING_PROXY_BACKSTOP_US * 1e-6) return;
    gpuring_net_conns_settle(proxy);
    *settled = t;
}

static void *proxy_main(void *arg)
{
    gpuring_proxy_t *proxy = arg;
    uint64_t tries_seen = __atomic_load_n(&proxy->tries, __ATOMIC_RELAXED);
    int busy = 0;
    double settled = gpuring_time_sec();

    gpuring_wait_progress_thread_off();
    __atomic_store_n(&proxy->thread_tid, proxy_thread_id(), __ATOMIC_RELAXED);
    gpuring_proxy_lock(proxy, "the progress thread's pass");
    while (!__atomic_load_n(&proxy->stop, __ATOMIC_ACQUIRE)) {
        uint64_t tries = __atomic_load_n(&proxy->tries, __ATOMIC_RELAXED);
        int flags;

        if (tries != tries_seen && !proxy->handoff) {
            /* executors run the passes, or would but for this thread's: look
             * again after a backstop interval */
            tries_seen = tries;
            busy = 0;
            proxy_timed_wait(proxy, GPURING_PROXY_BACKSTOP_US * 1000L);
            proxy_settle(proxy, &settled, 0);
            continue;
        }
        proxy->handoff = 0;
        tries_seen = tries;
        flags = proxy_pass(proxy);
        if ((flags & GPURING_NET_MOVED) && ++busy < GPURING_PROXY_BUSY_PASSES) {
            /* data is moving: go again at once, but open the lock in between */
            gpuring_proxy_unlock(proxy);
            gpuring_proxy_lock(proxy, "the progress thread's pass");
        } else if ((flags & (GPURING_NET_PENDING | GPURING_NET_MOVED)) ||
                   __atomic_load_n(&proxy->active, __ATOMIC_ACQUIRE) > 0) {
            /* (a send end's window half uncredited alone -- GPURING_NET_POLL -- is no
             * work: a root whose receivers are not in the call yet has nothing to
             * send, and the credits are read at the next pass) */
            busy = 0;
            proxy_settle(proxy, &settled, 0);
            gpuring_proxy_unlock(proxy);
            sched_yield();
            gpuring_proxy_lock(proxy, "the progress thread's pass");
        } else {
            busy = 0;
            /* idle: the credits owed go before the nap (a peer's teardown waits for
             * them; the thread passes here only after a backstop interval without an
             * executor's pass, so a loop of calls never pays for it) */
            proxy_settle(proxy, &settled, 1);
            proxy->sleeps++;
            /* active_begin (an operation only this thread moves) signals this
             * sleep (napping) under the lock: no lost wakeup; active_end's
             * hand-off signals either sleep, under the lock too */
            __atomic_store_n(&proxy->napping, 1, __ATOMIC_SEQ_CST);
            if (!__atomic_load_n(&proxy->stop, __ATOMIC_ACQUIRE) &&
                __atomic_load_n(&proxy->active, __ATOMIC_SEQ_CST) == 0)
                proxy_timed_wait(proxy, GPURING_PROXY_SLEEP_NS);
            __atomic_store_n(&proxy->napping, 0, __ATOMIC_RELAXED);
        }
    }
    gpuring_proxy_unlock(proxy);
    return NULL;
}

/* ---- create / finalize ------------------------------------------------------------ */

/* The proxy's wait timeout (a negative one as 0: no bound), in ms: every wait reads
 * it unlocked (gpuring_proxy_wait_timeout) */
static void proxy_set_wait_timeout(gpuring_proxy_t *proxy, double seconds)
{
    /* (a bound under 1 ms stays a bound: 1 ms, not 0) */
    const uint64_t ms = seconds > 0 ? GPURING_MAX((uint64_t)(seconds * 1e3), (uint64_t)1) : 0;

    __atomic_store_n(&proxy->wait_timeout_ms, ms, __ATOMIC_RELAXED);
}

/* A thread of the proxy's (its progress thread, or a caller's pass) may run on
 * in this object's code after finalize: pin the object against dlclose. */
static void proxy_pin_code(void)
{
    Dl_info self;

    if (dladdr((void *)proxy_main, &self) != 0 && self.dli_fname != NULL)
        (void)dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

/* Stop the progress thread, waiting at most the wait timeout (its pass, which holds
 * the lock, may be stuck in UCX: in the kernel on a dead peer's shared memory, say).
 * 1 if it ended; 0 if not: it may still run UCX and take the lock, so nothing it uses
 * may go, nor the code it runs (proxy_pin_code). */
static int proxy_stop_thread(gpuring_proxy_t *proxy)
{
    const double limit = gpuring_proxy_wait_floor(proxy, 1.0);
    struct timespec deadline;
    char what[512] = "";
    int locked;

    if (!proxy->thread_started) return 1;
    gpuring_deadline(limit, &deadline);
    /* under the lock where it can be had: the signal then cannot fall between the
     * thread's look at stop and its sleep (without it, its sleep is timed anyway) */
    locked = gpuring_mutex_lock_until(&proxy->lock, &deadline) == 0;
    __atomic_store_n(&proxy->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&proxy->cond);
    if (locked) pthread_mutex_unlock(&proxy->lock);
    if (gpuring_join_until(proxy->thread, &deadline) == 0) {
        proxy->thread_started = 0;
        return 1;
    }
    gpuring_proxy_describe_thread(proxy, what, sizeof(what));
    GPURING_WARN(GPURING_SUBSYS_PROXY,
                 "the proxy's progress thread did not stop within %.0f s (a pass that does "
                 "not end: %s): UCX and the proxy are left to the process's exit", limit,
                 what[0] == ';' ? what + 2 : what);
    proxy_pin_code();
    return 0;
}

static void proxy_destroy(gpuring_proxy_t *proxy)
{
    gpuring_net_conn_t *net;
    int stuck = 0; /* a connection left with UCX operations unfinished */

    if (!proxy_stop_thread(proxy) || !gpuring_proxy_lock_within(proxy, "finalizing")) {
        /* the proxy's memory stays the stuck pass's (the thread's, or a caller's that
         * holds the lock); a connection still registered is left to it too: its
         * teardown touches no UCX and frees nothing */
        proxy_pin_code();
        for (net = proxy->conns; net != NULL; net = net->next) {
            net->stuck = 1;
            __atomic_store_n(&net->detached, 1, __ATOMIC_RELEASE);
        }
        return;
    }

    while ((net = proxy->conns) != NULL) {
        GPURING_WARN(GPURING_SUBSYS_NET,
                     "proxy finalized with the %s connection to rank %d channel %d still open",
                     net->dir == GPURING_CONN_SEND ? "send" : "recv", net->peer, net->channel);
        gpuring_proxy_deregister(proxy, net);
        stuck |= gpuring_net_conn_detach(net) > 0;
        net->pe = NULL; /* (as an orphan's, below) */
    }
    /* orphans whose last operations ended since go; the others' endpoints go next, so
     * a late callback of theirs finds none (net_fail) */
    if (proxy->worker != NULL) ucp_worker_progress(proxy->worker);
    gpuring_net_orphans_reap(proxy);
    for (net = proxy->orphans; net != NULL; net = net->next) net->pe = NULL;
    if (proxy->worker != NULL) {
        stuck |= proxy_close_eps(proxy);
        /* the forced closes end the operations left on their endpoints (cancelled) */
        ucp_worker_progress(proxy->worker);
        gpuring_net_orphans_reap(proxy);
    }
    gpuring_proxy_unlock(proxy);

    if (proxy->address != NULL) ucp_worker_release_address(proxy->worker, proxy->address);
    if (proxy->orphans != NULL || stuck || __atomic_load_n(&proxy->leaked, __ATOMIC_ACQUIRE)) {
        /* UCX operations to a peer that died unseen (no failure detection on
         * the endpoint) never finish -- nor may a forced close of its endpoint --
         * and UCX cannot be torn down under them
         * (UCX 1.18 aborts on their memory registrations): its worker and
         * context, and the orphans' memory they may still touch, are left to
         * the process's exit */
        GPURING_WARN(GPURING_SUBSYS_NET, "UCX operations to a dead peer never finished: "
                     "UCX is not torn down in this process (its memory goes at exit)");
    } else {
        if (proxy->worker != NULL) ucp_worker_destroy(proxy->worker);
        if (proxy->context != NULL) ucp_cleanup(proxy->context);
    }

    GPURING_DEBUG(GPURING_SUBSYS_PROXY, "proxy finalized: %llu passes (%llu run by waiting "
                  "executors), %llu polls of the UCX worker, %llu sleeps",
                  (unsigned long long)proxy->passes, (unsigned long long)proxy->drives,
                  (unsigned long long)proxy->polls, (unsigned long long)proxy->sleeps);
    pthread_cond_destroy(&proxy->cond);
    pthread_mutex_destroy(&proxy->lock);
    pthread_mutex_destroy(&proxy->err_lock);
    free(proxy);
}

/* The network transports of one memory domain: counts tcp's and the others'. */
static void proxy_md_net_tls(uct_component_h comp, const char *md_name, int *tcp, int *other)
{
    uct_md_config_t *md_config;
    uct_tl_resource_desc_t *tls;
    unsigned ntls;
    uct_md_h md;

    if (uct_md_config_read(comp, NULL, NULL, &md_config) != UCS_OK) return;
    if (uct_md_open(comp, md_name, md_config, &md) == UCS_OK) {
        if (uct_md_query_tl_resources(md, &tls, &ntls) == UCS_OK) {
            for (unsigned k = 0; k < ntls; k++) {
                if (tls[k].dev_type != UCT_DEVICE_TYPE_NET) continue;
                if (strcmp(tls[k].tl_name, "tcp") == 0)
                    (*tcp)++;
                else
                    (*other)++;
            }
            uct_release_tl_resource_list(tls);
        }
        uct_md_close(md);
    }
    uct_config_release(md_config);
}

int gpuring_proxy_net_tcp_only(void)
{
    static int answer = -1; /* the node's resources do not change; racing callers
                             * both look and store the same */
    uct_component_h *comps;
    unsigned ncomps;
    int tcp = 0, other = 0, known = __atomic_load_n(&answer, __ATOMIC_RELAXED);

    if (known >= 0) return known;
    if (uct_query_components(&comps, &ncomps) != UCS_OK) return 0;
    for (unsigned i = 0; i < ncomps; i++) {
        uct_component_attr_t attr;
        uct_md_resource_desc_t *mds;

        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        if (uct_component_query(comps[i], &attr) != UCS_OK || attr.md_resource_count == 0)
            continue;
        mds = calloc(attr.md_resource_count, sizeof(*mds));
        if (mds == NULL) continue;
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = mds;
        if (uct_component_query(comps[i], &attr) == UCS_OK) {
            for (unsigned j = 0; j < attr.md_resource_count; j++)
                proxy_md_net_tls(comps[i], mds[j].md_name, &tcp, &other);
        }
        free(mds);
    }
    uct_release_component_list(comps);
    known = tcp > 0 && other == 0;
    __atomic_store_n(&answer, known, __ATOMIC_RELAXED);
    GPURING_DEBUG(GPURING_SUBSYS_NET, "UCX's network transports here: %d tcp, %d other%s", tcp,
                  other, known ? " (tcp only)" : "");
    return known;
}

/* A CPU list ("0-3,8") into set; -1 for a malformed or empty one, or a CPU past
 * CPU_SETSIZE. */
static int cpus_parse(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    while (*s != '\0') {
        char *end;
        long first = strtol(s, &end, 10), last = first;

        if (end == s || first < 0) return -1;
        if (*end == '-') {
            s = end + 1;
            last = strtol(s, &end, 10);
            if (end == s || last < first) return -1;
        }
        if (last >= CPU_SETSIZE) return -1;
        for (long c = first; c <= last; c++) CPU_SET((int)c, set);
        if (*end == ',') end++;
        else if (*end != '\0') return -1;
        s = end;
    }
    return CPU_COUNT(set) > 0 ? 0 : -1;
}

/* set as a CPU list, "0-3,8" */
static void cpus_format(const cpu_set_t *set, char *buf, size_t len)
{
    size_t n = 0;

    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && n < len; c++) {
        int last = c;

        if (!CPU_ISSET(c, set)) continue;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set)) last++;
        if (last > c)
            n += (size_t)snprintf(buf + n, len - n, "%s%d-%d", n > 0 ? "," : "", c, last);
        else
            n += (size_t)snprintf(buf + n, len - n, "%s%d", n > 0 ? "," : "", c);
        c = last;
    }
}

static gpuring_status_t proxy_create(const gpuring_proxy_config_t *cfg, gpuring_proxy_t **proxy_p)
{
    gpuring_proxy_t *proxy;
    pthread_condattr_t cattr;
    ucp_config_t *config = NULL;
    ucp_params_t params;
    ucp_context_attr_t cattr_ctx;
    ucp_worker_params_t wparams;
    ucp_worker_attr_t wattr;
    ucs_status_t us;
    int rc;

    proxy = calloc(1, sizeof(*proxy));
    if (proxy == NULL) return GPURING_ERR_NO_MEMORY;
    proxy->device = proxy->thread_device = -1;
    proxy_set_wait_timeout(proxy, cfg != NULL ? cfg->wait_timeout : GPURING_PROXY_DEFAULT_TIMEOUT);
    if (cfg != NULL) proxy->peer_failure = cfg->peer_failure;
    pthread_mutex_init(&proxy->lock, NULL);
    pthread_mutex_init(&proxy->err_lock, NULL);
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&proxy->cond, &cattr);
    pthread_condattr_destroy(&cattr);

    us = ucp_config_read(NULL, NULL, &config);
    if (us != UCS_OK) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "ucp_config_read failed: %s", ucs_status_string(us));
        goto fail;
    }
    if (getenv("UCX_RNDV_THRESH") != NULL) {
        GPURING_INFO(GPURING_SUBSYS_NET, "gpuring's UCX context: rendezvous from "
                     "UCX_RNDV_THRESH=%s (the environment)", getenv("UCX_RNDV_THRESH"));
    } else if (cfg != NULL && cfg->rndv_thresh > 0) {
        const int never = cfg->rndv_thresh == GPURING_PROXY_RNDV_NEVER;
        char thresh[32];

        if (never)
            snprintf(thresh, sizeof(thresh), "inf");
        else
            snprintf(thresh, sizeof(thresh), "%zu", cfg->rndv_thresh);
        us = ucp_config_modify(config, "RNDV_THRESH", thresh);
        if (us != UCS_OK)
            GPURING_WARN(GPURING_SUBSYS_NET, "UCX refused RNDV_THRESH=%s (%s): its own "
                         "threshold stays", thresh, ucs_status_string(us));
        else
            GPURING_INFO(GPURING_SUBSYS_NET, "gpuring's UCX context: rendezvous from %s B%s",
                         thresh, never ? " (never: tcp is the only network transport here)"
                                       : "");
    } else {
        GPURING_INFO(GPURING_SUBSYS_NET, "gpuring's UCX context: UCX's own rendezvous "
                     "threshold");
    }
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_TAG;
    params.mt_workers_shared = 0;
    us = ucp_init(&params, config, &proxy->context);
    ucp_config_release(config);
    if (us != UCS_OK) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "ucp_init failed: %s", ucs_status_string(us));
        proxy->context = NULL;
        goto fail;
    }

    memset(&cattr_ctx, 0, sizeof(cattr_ctx));
    cattr_ctx.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (ucp_context_query(proxy->context, &cattr_ctx) == UCS_OK)
        proxy->cuda_memory = (cattr_ctx.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;

    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    us = ucp_worker_create(proxy->context, &wparams, &proxy->worker);
    if (us != UCS_OK) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "ucp_worker_create failed: %s", ucs_status_string(us));
        proxy->worker = NULL;
        goto fail;
    }

    memset(&wattr, 0, sizeof(wattr));
    wattr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_THREAD_MODE;
    us = ucp_worker_query(proxy->worker, &wattr);
    if (us != UCS_OK) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "ucp_worker_query failed: %s", ucs_status_string(us));
        goto fail;
    }
    proxy->address = wattr.address;
    proxy->address_len = wattr.address_length;
    if (wattr.thread_mode != UCS_THREAD_MODE_SERIALIZED &&
        wattr.thread_mode != UCS_THREAD_MODE_MULTI) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "UCX worker thread mode %d is not serialized",
                      (int)wattr.thread_mode);
        goto fail;
    }

    rc = pthread_create(&proxy->thread, NULL, proxy_main, proxy);
    if (rc != 0) {
        GPURING_ERROR(GPURING_SUBSYS_PROXY, "cannot start the proxy thread: %s", strerror(rc));
        goto fail;
    }
    proxy->thread_started = 1;
    GPURING_DEBUG(GPURING_SUBSYS_PROXY,
                  "proxy started: UCX %s (%s CUDA memory), worker address %zu bytes, wait "
                  "timeout %.1f s",
                  ucp_get_version_string(), proxy->cuda_memory ? "moves" : "does not move",
                  proxy->address_len, gpuring_proxy_wait_timeout(proxy));
    *proxy_p = proxy;
    return GPURING_OK;

fail:
    proxy_destroy(proxy);
    return GPURING_ERR_NET;
}

/*
 * proxy_create with its creator on cfg's CPUs, as NCCL binds the thread that sets a
 * communicator up: the progress thread inherits them, so do UCX's own threads (its
 * async thread), and what UCX allocates and first touches lands near them.  The
 * creator's binding is set back after; the progress thread's is read back and said at
 * debug level.  CPUs this thread cannot have: a warning, and the proxy starts on the
 * creator's binding.
 */
static gpuring_status_t proxy_create_near(const gpuring_proxy_config_t *cfg,
                                         gpuring_proxy_t **proxy_p)
{
    const char *why = cfg != NULL && cfg->cpus_why != NULL ? cfg->cpus_why : "not asked";
    char now[1024];
    cpu_set_t saved, set;
    int moved = 0, rc;
    gpuring_status_t st;

    if (cfg != NULL && cfg->cpus != NULL) {
        rc = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
        if (rc == 0)
            rc = cpus_parse(cfg->cpus, &set) != 0
                     ? EINVAL
                     : pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
        if (rc != 0) {
            GPURING_WARN(GPURING_SUBSYS_PROXY, "cannot bind the progress thread to CPUs %s "
                         "(%s): %s; it stays on the rank's binding", cfg->cpus, why,
                         strerror(rc));
        }
        moved = rc == 0;
    }
    st = proxy_create(cfg, proxy_p);
    if (moved && (rc = pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved)) != 0) {
        GPURING_WARN(GPURING_SUBSYS_PROXY, "cannot set this thread's binding back after "
                     "starting the progress thread on CPUs %s: %s", cfg->cpus, strerror(rc));
    }
    if (st != GPURING_OK) return st;
    if (!moved) {
        if (cfg == NULL || cfg->cpus == NULL)
            GPURING_DEBUG(GPURING_SUBSYS_PROXY, "progress thread on the rank's binding: %s",
                          why);
        return st;
    }
    if (pthread_getaffinity_np((*proxy_p)->thread, sizeof(set), &set) == 0)
        cpus_format(&set, now, sizeof(now));
    else
        snprintf(now, sizeof(now), "%s (not read back)", cfg->cpus);
    GPURING_DEBUG(GPURING_SUBSYS_PROXY, "progress thread on CPUs %s: %s", now, why);
    return st;
}

gpuring_status_t gpuring_proxy_get(const gpuring_proxy_config_t *cfg, gpuring_proxy_t **proxy_p)
{
    gpuring_status_t st = GPURING_OK;

    pthread_mutex_lock(&proxy_singleton_lock);
    if (proxy_singleton == NULL) {
        st = proxy_create_near(cfg, &proxy_singleton);
    } else if (cfg != NULL) {
        /* the latest setting wins (endpoints keep the mode they were made with) */
        if (!gpuring_proxy_lock_within(proxy_singleton, "taking new settings")) {
            GPURING_WARN(GPURING_SUBSYS_NET, "proxy stuck: the new communicator's settings "
                         "(wait timeout, peer failure detection) are not taken");
        } else {
            proxy_set_wait_timeout(proxy_singleton, cfg->wait_timeout);
            proxy_singleton->peer_failure = cfg->peer_failure;
            gpuring_proxy_unlock(proxy_singleton);
        }
    }
    if (st == GPURING_OK) *proxy_p = proxy_singleton;
    pthread_mutex_unlock(&proxy_singleton_lock);
    return st;
}

void gpuring_proxy_finalize(void)
{
    pthread_mutex_lock(&proxy_singleton_lock);
    if (proxy_singleton != NULL) {
        proxy_destroy(proxy_singleton);
        proxy_singleton = NULL;
    }
    pthread_mutex_unlock(&proxy_singleton_lock);
}

gpuring_status_t gpuring_proxy_address(gpuring_proxy_t *proxy, const void **addr_p, size_t *len_p)
{
    if (proxy == NULL || proxy->address == NULL) return GPURING_ERR_INVALID;
    *addr_p = proxy->address;
    *len_p = proxy->address_len;
    return GPURING_OK;
}

int gpuring_proxy_gpu_direct(gpuring_proxy_t *proxy, int device, const char **why_p)
{
    const char *why = NULL;

    if (!proxy->cuda_memory)
        why = "UCX has no CUDA memory support (no cuda transport loaded)";
    else if (gpuring_device_remote_writes(device) == GPURING_DEVICE_WRITES_UNORDERED)
        why = "the GPU can neither order nor flush GPUDirect RDMA writes";
    if (why_p != NULL) *why_p = why;
    return why == NULL;
}
