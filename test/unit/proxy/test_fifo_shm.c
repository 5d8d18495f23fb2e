/*
 * test_fifo_shm.c -- the connection contract of DESIGN.md on a shared
 * memory connection, between two processes (fork): ordering, wrap-around of
 * the NSTEPS slots, credits (the sender never overruns the receiver), step
 * sizes from 0 B to a full slot, the name unlinked after connect, and a
 * wait that times out instead of hanging.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proxy/conn.h"
#include "test/unit/unit_test.h"



#define SLOT 4096
#define NSTEPS_TEST 100000

static size_t step_bytes(uint64_t s) { return (size_t)((s * 2654435761u) % (SLOT + 1)); }
static unsigned char step_byte(uint64_t s, size_t i) { return (unsigned char)(s * 31 + i * 7); }

/* Sender, in the child: fills each step per the contract.  Exit 0 on success. */
static int run_sender(const gpuring_conn_handle_t *h)
{
    gpuring_conn_t conn;
    gpuring_spin_t spin;

    if (gpuring_conn_shm_send_connect(&conn, 0, 0, h) != GPURING_OK) return 2;
    for (uint64_t s = 0; s < NSTEPS_TEST; s++) {
        char *slot = conn.slots + (s % GPURING_NSTEPS) * conn.slot_bytes;
        size_t n = step_bytes(s);

        gpuring_spin_init(&spin, 20.0);
        while (GPURING_LOAD_ACQUIRE(&conn.ctrl->head) + GPURING_NSTEPS <= s) {
            if (gpuring_spin_tick(&spin) != GPURING_OK) return 3;
        }
        for (size_t i = 0; i < n; i++) slot[i] = (char)step_byte(s, i);
        GPURING_STORE_RELEASE(&conn.ctrl->tail, s + 1);
    }
    gpuring_conn_shm_destroy(&conn);
    return 0;
}

int main(void)
{
    gpuring_conn_t recv;
    gpuring_conn_handle_t h;
    gpuring_spin_t spin;
    uint64_t bad = 0, overrun = 0;
    pid_t pid;
    int status = 0;
    char path[128];
    double t0;

    EXPECT(gpuring_conn_shm_recv_create(&recv, 1, 0, SLOT, 42, &h) == GPURING_OK,
           "recv_create");
    EXPECT(recv.ctrl->head == 0 && recv.ctrl->tail == 0, "fresh counters are zero");
    EXPECT(h.type == GPURING_CONN_SHM && h.dir == GPURING_CONN_RECV && h.slot_bytes == SLOT,
           "handle fields");
    EXPECT((uintptr_t)recv.slots % 4096 == GPURING_SLOTS_SKEW, "slots %d bytes into a page",
           GPURING_SLOTS_SKEW);

    pid = fork();
    if (pid == 0) _exit(run_sender(&h));

    for (uint64_t s = 0; s < NSTEPS_TEST; s++) {
        const unsigned char *slot =
            (const unsigned char *)recv.slots + (s % GPURING_NSTEPS) * recv.slot_bytes;
        uint64_t tail;

        gpuring_spin_init(&spin, 20.0);
        while ((tail = GPURING_LOAD_ACQUIRE(&recv.ctrl->tail)) <= s) {
            if (gpuring_spin_tick(&spin) != GPURING_OK) break;
        }
        if (tail <= s) {
            EXPECT(0, "receiver timed out at step %llu", (unsigned long long)s);
            break;
        }
        /* credits: the sender may be at most NSTEPS ahead of what we consumed */
        if (tail > s + GPURING_NSTEPS) overrun++;
        for (size_t i = 0; i < step_bytes(s); i++) {
            if (slot[i] != step_byte(s, i)) {
                if (bad++ < 5) printf("step %llu byte %zu: got %u want %u\n",
                                      (unsigned long long)s, i, slot[i], step_byte(s, i));
                break;
            }
        }
        GPURING_STORE_RELEASE(&recv.ctrl->head, s + 1);
        /* once the child has mapped the segment, the name can go */
        if (s == 0) gpuring_conn_shm_unlink(&recv);
    }
    EXPECT(bad == 0, "%llu steps had corrupted data", (unsigned long long)bad);
    EXPECT(overrun == 0, "sender ran ahead of the credits %llu times",
           (unsigned long long)overrun);
    waitpid(pid, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sender exit status %d", status);
    snprintf(path, sizeof(path), "/dev/shm%s", h.where.shm_name);
    EXPECT(access(path, F_OK) != 0, "%s still exists after unlink", path);

    /* nobody sends: a timed wait reports instead of hanging */
    gpuring_spin_init(&spin, 0.5);
    t0 = gpuring_time_sec();
    {
        gpuring_status_t st = GPURING_OK;
        while (GPURING_LOAD_ACQUIRE(&recv.ctrl->tail) <= NSTEPS_TEST && st == GPURING_OK) {
            st = gpuring_spin_tick(&spin);
        }
        EXPECT(st == GPURING_ERR_TIMEOUT, "idle wait returned %d", st);
    }
    EXPECT(gpuring_time_sec() - t0 < 5.0, "timeout of 0.5 s took %.1f s", gpuring_time_sec() - t0);
    gpuring_conn_shm_destroy(&recv);

    /* a sender cannot connect to a name that does not exist */
    {
        gpuring_conn_t c2;
        gpuring_conn_handle_t missing = h;
        strcpy(missing.where.shm_name, "/gpuring-test-missing");
        gpuring_log_config.level = 0; /* the error line is expected */
        EXPECT(gpuring_conn_shm_send_connect(&c2, 0, 0, &missing) == GPURING_ERR_SYSTEM,
               "connect to a missing segment fails");
        gpuring_log_config.level = GPURING_LOG_WARN;
    }

    return unit_report();
}
