/*
 * test_fifo_ll.c -- the LL protocol of proxy/conn.h on a shared memory
 * connection.
 *
 * Between two processes (fork): 100000 steps of 0 B to a full LL step (odd
 * sizes included), in runs that switch between LL and simple steps as calls
 * of different sizes do, every byte checked, the sender never ahead of the
 * credits.  In one process: the flag is never 0 (what fresh memory holds),
 * a unit of an earlier step of the slot never counts as landed, the header
 * check tells a step of this call from one of another call, of another size
 * or abandoned (both protocols carry the abandon), a unit that lost its flag
 * is refused, and a step writes no unit past its payload; a stall report names the
 * step an LL slot's header is of; the senders clean their rows as flags come back
 * (check_clean).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proxy/conn.h"
#include "test/ll_rows.h"
#include "test/unit/unit_test.h"

#define SLOT 4096
#define NSTEPS_TEST 100000
#define CALL 0x1234

static size_t step_bytes(uint64_t s)
{
    return (size_t)((s * 2654435761u) % (GPURING_LL_STEP_BYTES + 1));
}
static unsigned char step_byte(uint64_t s, size_t i) { return (unsigned char)(s * 31 + i * 7 + 1); }
/* runs of 1-9 steps of one protocol, then the other (calls of different sizes) */
static int step_ll(uint64_t s) { return (int)((s / 9 + s % 9 / 5) % 2); }

/* Sender, in the child.  Exit 0 on success. */
static int run_sender(const gpuring_conn_handle_t *h)
{
    static unsigned char buf[GPURING_LL_STEP_BYTES];
    gpuring_conn_t conn;
    gpuring_spin_t spin;

    if (gpuring_conn_shm_send_connect(&conn, 0, 0, h) != GPURING_OK) return 2;
    for (uint64_t s = 0; s < NSTEPS_TEST; s++) {
        const size_t n = step_bytes(s);

        gpuring_spin_init(&spin, 20.0);
        while (GPURING_LOAD_ACQUIRE(&conn.ctrl->head) + GPURING_NSTEPS <= conn.step) {
            if (gpuring_spin_tick(&spin) != GPURING_OK) return 3;
        }
        if (step_ll(s)) {
            for (size_t i = 0; i < n; i++) buf[i] = step_byte(s, i);
            gpuring_conn_ll_post(&conn, buf, n, CALL);
        } else {
            char *slot = conn.slots + (conn.step % GPURING_NSTEPS) * conn.slot_bytes;
            size_t m = n < SLOT ? n : SLOT;
            for (size_t i = 0; i < m; i++) slot[i] = (char)step_byte(s, i);
            gpuring_conn_post(&conn, m, CALL);
        }
    }
    gpuring_conn_shm_destroy(&conn);
    return 0;
}

/* Receiver, this process: every step lands whole, checked, in order. */
static void run_receiver(gpuring_conn_t *recv)
{
    static unsigned char buf[GPURING_LL_STEP_BYTES];
    uint64_t bad = 0, overrun = 0, nll = 0;
    gpuring_spin_t spin;

    for (uint64_t s = 0; s < NSTEPS_TEST; s++) {
        const int ll = step_ll(s);
        const size_t n = ll ? step_bytes(s) : GPURING_MIN(step_bytes(s), SLOT);
        const unsigned char *data = buf;
        uint64_t got = 0;
        gpuring_status_t st;
        int landed;

        gpuring_spin_init(&spin, 20.0);
        while (!(landed = ll ? gpuring_conn_ll_landed(recv)
                             : GPURING_LOAD_ACQUIRE(&recv->ctrl->tail) > recv->step)) {
            if (gpuring_spin_tick(&spin) != GPURING_OK) break;
        }
        if (!landed) {
            EXPECT(0, "receiver timed out at step %llu", (unsigned long long)s);
            return;
        }
        st = ll ? gpuring_conn_ll_check(recv, n, CALL, &got)
                : gpuring_fifo_check(recv->ctrl, recv->step, n, CALL, &got);
        if (st == GPURING_OK && ll) st = gpuring_conn_ll_read(recv, buf, n);
        if (!ll) data = (const unsigned char *)recv->slots + (s % GPURING_NSTEPS) * SLOT;
        nll += ll;
        /* credits: the sender never more than NSTEPS steps past what we consumed
         * (tail moves only with simple steps: it is a floor of the sender's step) */
        if (GPURING_LOAD_ACQUIRE(&recv->ctrl->tail) > s + GPURING_NSTEPS) overrun++;
        if (st != GPURING_OK) {
            if (bad++ < 5) printf("step %llu (%s): check %d, %llu bytes\n", (unsigned long long)s,
                                  ll ? "ll" : "simple", st, (unsigned long long)got);
        } else {
            for (size_t i = 0; i < n; i++) {
                if (data[i] != step_byte(s, i)) {
                    if (bad++ < 5) printf("step %llu (%s) byte %zu of %zu: got %u want %u\n",
                                          (unsigned long long)s, ll ? "ll" : "simple", i, n,
                                          data[i], step_byte(s, i));
                    break;
                }
            }
        }
        GPURING_STORE_RELEASE(&recv->ctrl->head, ++recv->step);
        if (s == 0) gpuring_conn_shm_unlink(recv);
    }
    EXPECT(bad == 0, "%llu steps wrong", (unsigned long long)bad);
    EXPECT(overrun == 0, "sender ran ahead of the credits %llu times",
           (unsigned long long)overrun);
    EXPECT(nll > NSTEPS_TEST / 3 && nll < NSTEPS_TEST * 2 / 3, "%llu of the steps were LL",
           (unsigned long long)nll);
}

/* One process: a FIFO whose ends are both here. */
static void check_one_process(void)
{
    const size_t bytes = gpuring_conn_fifo_bytes(GPURING_CONN_SHM, SLOT);
    char *fifo = aligned_alloc(4096, GPURING_DIV_UP(bytes, 4096) * 4096);
    unsigned char src[GPURING_LL_STEP_BYTES], dst[GPURING_LL_STEP_BYTES];
    gpuring_conn_t s, r;
    uint64_t got = 0;
    uint64_t *row;

    memset(fifo, 0, bytes);
    gpuring_conn_attach(&s, GPURING_CONN_SHM, GPURING_CONN_SEND, 1, 0, SLOT, fifo);
    gpuring_conn_attach(&r, GPURING_CONN_SHM, GPURING_CONN_RECV, 0, 0, SLOT, fifo);
    EXPECT(s.ll == r.ll && s.ll != NULL && (uintptr_t)s.ll % 64 == 0, "LL slots, aligned");
    EXPECT(s.slots >= s.ll + GPURING_NSTEPS * GPURING_LL_SLOT_BYTES &&
               s.slots + GPURING_NSTEPS * SLOT <= fifo + bytes,
           "LL slots before the simple slots, inside the FIFO");
    {
        gpuring_conn_t n;
        char net_fifo[8192];
        gpuring_conn_attach(&n, GPURING_CONN_NET, GPURING_CONN_SEND, 1, 0, 64, net_fifo);
        EXPECT(n.ll == NULL, "NET connections have no LL slots");
        const size_t ll_bytes = bytes - gpuring_conn_fifo_bytes(GPURING_CONN_NET, SLOT);
        EXPECT(ll_bytes >= GPURING_NSTEPS * GPURING_LL_SLOT_BYTES && ll_bytes % 4096 == 0 &&
                   (uintptr_t)(s.slots - fifo) % 4096 == GPURING_SLOTS_SKEW,
               "NET FIFOs are the LL slots (whole pages) smaller; simple slots %d bytes into "
               "a page", GPURING_SLOTS_SKEW);
    }
    EXPECT((GPURING_LL_HDR_UNITS + GPURING_LL_STEP_BYTES / 4) * 8 <= GPURING_LL_SLOT_BYTES,
           "an LL slot holds a full step");

    /* the flag: never 0, different for the steps that share a slot */
    {
        const uint64_t at[] = {0, 1, 7, 8, 0xfffffffdull, 0xfffffffeull, 0xffffffffull,
                               0x100000000ull, 0x1fffffffeull, UINT64_MAX - 1, UINT64_MAX};
        int zero = 0, same = 0;
        for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
            zero += gpuring_ll_flag(at[i]) == 0;
            same += gpuring_ll_flag(at[i]) == gpuring_ll_flag(at[i] + GPURING_NSTEPS);
        }
        EXPECT(zero == 0 && same == 0, "flag 0 %d times, equal to the slot's next %d times",
               zero, same);
    }

    for (size_t i = 0; i < sizeof(src); i++) src[i] = (unsigned char)(i * 13 + 5);
    EXPECT(!gpuring_conn_ll_landed(&r), "nothing landed in a fresh FIFO");

    /* a step of 13 bytes: 4 units, nothing written past them */
    row = (uint64_t *)s.ll;
    row[GPURING_LL_HDR_UNITS + 4] = 0xdeadbeefcafef00dull;
    gpuring_conn_ll_post(&s, src, 13, CALL);
    EXPECT(row[GPURING_LL_HDR_UNITS + 4] == 0xdeadbeefcafef00dull, "no unit past the payload");
    EXPECT(s.step == 1 && s.ctrl->tail == 0, "an LL post counts the step, leaves tail");
    EXPECT(gpuring_conn_ll_landed(&r), "landed");
    EXPECT(gpuring_conn_ll_check(&r, 13, CALL, &got) == GPURING_OK && got == 13, "checks");
    EXPECT(gpuring_conn_ll_check(&r, 12, CALL, &got) == GPURING_ERR_MISMATCH,
           "a step of another size is a mismatch");
    EXPECT(gpuring_conn_ll_check(&r, 13, CALL + 1, &got) == GPURING_ERR_MISMATCH,
           "a step of another call is a mismatch");
    memset(dst, 0xff, sizeof(dst));
    EXPECT(gpuring_conn_ll_read(&r, dst, 13) == GPURING_OK && memcmp(dst, src, 13) == 0 &&
               dst[13] == 0xff && dst[14] == 0xff && dst[15] == 0xff,
           "13 bytes read, not one more");
    r.step++;

    /* the slot's next step (8 later) does not see this one */
    s.step = r.step = GPURING_NSTEPS;
    EXPECT(!gpuring_conn_ll_landed(&r), "a step 8 back in the slot has not landed");
    gpuring_conn_ll_post(&s, src, GPURING_LL_STEP_BYTES, CALL);
    EXPECT(gpuring_conn_ll_landed(&r) &&
               gpuring_conn_ll_check(&r, GPURING_LL_STEP_BYTES, CALL, &got) == GPURING_OK &&
               gpuring_conn_ll_read(&r, dst, GPURING_LL_STEP_BYTES) == GPURING_OK &&
               memcmp(dst, src, GPURING_LL_STEP_BYTES) == 0, "a full step");
    /* a unit that lost its flag (another step's) is refused */
    row = (uint64_t *)(s.ll + (r.step % GPURING_NSTEPS) * GPURING_LL_SLOT_BYTES);
    row[GPURING_LL_HDR_UNITS + 1000] ^= 1ull << 40;
    EXPECT(gpuring_conn_ll_read(&r, dst, GPURING_LL_STEP_BYTES) == GPURING_ERR_MISMATCH,
           "a unit of another step is refused");
    EXPECT(gpuring_conn_ll_read(&r, dst, 4000) == GPURING_OK, "the units before it are fine");
    r.step++;

    /* the abandon step: in both protocols, while a slot is free */
    s.ctrl->head = r.step;
    EXPECT(gpuring_conn_post_abort(&s) == 1, "abort posted");
    EXPECT(gpuring_conn_ll_landed(&r) &&
               gpuring_conn_ll_check(&r, 64, CALL, &got) == GPURING_ERR_REMOTE,
           "LL receiver sees the abandon");
    EXPECT(GPURING_LOAD_ACQUIRE(&s.ctrl->tail) > r.step &&
               gpuring_fifo_check(r.ctrl, r.step, 64, CALL, &got) == GPURING_ERR_REMOTE,
           "simple receiver sees the abandon");
    s.step = r.step + GPURING_NSTEPS; /* every slot full */
    EXPECT(gpuring_conn_post_abort(&s) == 0, "no abort without a free slot");
    free(fifo);
}

/*
 * LL flags come back (proxy/conn.h): a FIFO whose steps start at 2^32 - 4, as
 * if that many had gone before, every unit of its LL rows (headers included)
 * holding the flag of the row's step 256 on -- what units left alone for
 * 8 (2^32 - 1) steps would hold -- then 16 steps through the clean window at
 * 2^32, simple and LL in turn (a small LL step writes the first units only):
 * every row's every unit cleaned, each step still right.
 */
static void check_clean(void)
{
    const uint64_t step0 = (1ull << 32) - 4, ahead = 256;
    const size_t bytes = gpuring_conn_fifo_bytes(GPURING_CONN_SHM, SLOT);
    char *fifo = aligned_alloc(4096, GPURING_DIV_UP(bytes, 4096) * 4096);
    unsigned char src[64], dst[64];
    gpuring_conn_t s, r;
    uint64_t got = 0;
    size_t left = 0, wrong = 0;

    memset(fifo, 0, bytes);
    gpuring_conn_attach(&s, GPURING_CONN_SHM, GPURING_CONN_SEND, 1, 0, SLOT, fifo);
    gpuring_conn_attach(&r, GPURING_CONN_SHM, GPURING_CONN_RECV, 0, 0, SLOT, fifo);
    s.step = r.step = s.head_seen = step0;
    s.ctrl->head = s.ctrl->tail = step0;
    for (uint64_t k = 0; k < GPURING_NSTEPS; k++) {
        uint64_t *row = (uint64_t *)(s.ll + k * GPURING_LL_SLOT_BYTES);
        const uint64_t at = test_ll_row_step(step0 + ahead, k);
        for (size_t u = 0; u < GPURING_LL_SLOT_BYTES / 8; u++)
            row[u] = gpuring_ll_unit(0xdeadbeefu, gpuring_ll_flag(at));
    }
    for (uint64_t i = 0; i < 2 * GPURING_NSTEPS; i++) {
        const int ll = (int)(i % 2);

        for (size_t b = 0; b < sizeof(src); b++) src[b] = (unsigned char)(i * 7 + b);
        if (ll) {
            gpuring_conn_ll_post(&s, src, 13, CALL);
            wrong += !gpuring_conn_ll_landed(&r) ||
                     gpuring_conn_ll_check(&r, 13, CALL, &got) != GPURING_OK ||
                     gpuring_conn_ll_read(&r, dst, 13) != GPURING_OK || memcmp(dst, src, 13) != 0;
        } else {
            memcpy(gpuring_conn_slot(&s, s.step), src, 13);
            gpuring_conn_post(&s, 13, CALL);
            wrong += s.ctrl->tail != r.step + 1 || gpuring_conn_ll_landed(&r) ||
                     gpuring_fifo_check(r.ctrl, r.step, 13, CALL, &got) != GPURING_OK ||
                     memcmp(gpuring_conn_slot(&r, r.step), src, 13) != 0;
        }
        r.step++;
        s.ctrl->head = r.step;
    }
    for (uint64_t k = 0; k < GPURING_NSTEPS; k++) {
        const uint64_t *row = (const uint64_t *)(s.ll + k * GPURING_LL_SLOT_BYTES);
        const uint64_t at = test_ll_row_step(step0 + ahead, k);
        for (size_t u = 0; u < GPURING_LL_SLOT_BYTES / 8; u++)
            left += (uint32_t)(row[u] >> 32) == gpuring_ll_flag(at);
    }
    EXPECT(wrong == 0, "steps %llu-%llu through the clean window: %zu wrong",
           (unsigned long long)step0, (unsigned long long)(step0 + 2 * GPURING_NSTEPS - 1), wrong);
    EXPECT(left == 0, "after the clean window: %zu units still carry a flag to come", left);
    free(fifo);
}

/* The stall report's words for an LL slot's header: the step it is of. */
static void check_describe_header(void)
{
    char buf[96];

    gpuring_ll_describe_header(0, 0, buf, sizeof(buf));
    EXPECT(strstr(buf, "never written") != NULL, "fresh slot: '%s'", buf);
    gpuring_ll_describe_header(gpuring_ll_flag(905), gpuring_ll_flag(905), buf, sizeof(buf));
    EXPECT(strstr(buf, "step 905's header") != NULL, "whole header: '%s'", buf);
    gpuring_ll_describe_header(gpuring_ll_flag(913), gpuring_ll_flag(905), buf, sizeof(buf));
    EXPECT(strstr(buf, "steps 913 and 905") != NULL, "torn header: '%s'", buf);
}

int main(void)
{
    gpuring_conn_t recv;
    gpuring_conn_handle_t h;
    pid_t pid;
    int status = 0;

    check_one_process();
    check_clean();
    check_describe_header();

    EXPECT(gpuring_conn_shm_recv_create(&recv, 1, 0, SLOT, 43, &h) == GPURING_OK,
           "recv_create");
    EXPECT(recv.ll != NULL, "shm connections have LL slots");
    pid = fork();
    if (pid == 0) _exit(run_sender(&h));
    run_receiver(&recv);
    waitpid(pid, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sender exit status %d", status);
    gpuring_conn_shm_destroy(&recv);
    return unit_report();
}
