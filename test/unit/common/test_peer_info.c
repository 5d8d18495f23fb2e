/*
 * test_peer_info.c -- what a rank tells the others about where it runs
 * (gpuring_bootstrap_peer_info_local), and which ranks share a GPU
 * (gpuring_comm_same_gpu): the same PCI address on the same machine, which
 * containers of one machine with host names of their own are (their host hashes
 * differ, their kernel's boot id does not).  A child in a UTS namespace of its own
 * (unshare: root here; skipped where refused) plays such a container; one in a mount
 * namespace with a /dev/shm of its own (a tmpfs) and the same host name plays a pod
 * on the host's network -- another host for gpuring, whose shared-memory segments it
 * cannot open.
 *
 * Prints `N passed, N failed`.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ompi_coll_gpuring/gpuring_comm_internal.h"
#include "test/unit/unit_test.h"

/* The child's namespace: renamed in a UTS namespace of its own, or (own_shm) a tmpfs
 * on /dev/shm in a mount namespace of its own; 0, or -1 where refused. */
static int child_apart(int own_shm)
{
    if (!own_shm) return unshare(CLONE_NEWUTS) != 0 || sethostname("gpuring-pod-b", 13) != 0
                             ? -1
                             : 0;
    return unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
                   mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0
               ? -1
               : 0;
}

/* A child apart (child_apart) sends back its peer info (0: sent; 1: refused). */
static int child_info(int own_shm, gpuring_peer_info_t *out)
{
    int fd[2], status = 0;
    pid_t pid;

    if (pipe(fd) != 0) return -1;
    pid = fork();
    if (pid == 0) {
        gpuring_peer_info_t info;
        char refused = 1;

        close(fd[0]);
        if (child_apart(own_shm) != 0) {
            (void)!write(fd[1], &refused, 1);
            _exit(0);
        }
        gpuring_bootstrap_peer_info_local(&info, 0);
        (void)!write(fd[1], &info, sizeof(info));
        _exit(0);
    }
    close(fd[1]);
    ssize_t got = pid > 0 ? read(fd[0], out, sizeof(*out)) : -1;
    close(fd[0]);
    if (pid > 0) waitpid(pid, &status, 0);
    return got == (ssize_t)sizeof(*out) ? 0 : got == 1 ? 1 : -1;
}

int main(void)
{
    gpuring_peer_info_t peers[3], again;
    gpuring_comm_t c;
    int rc;

    /* run_mpi_tests' setup_leave_216 fails the allocation of 3 ranks' peer info by its
     * size: a layout of another size moves the case to another allocation */
    EXPECT(sizeof(gpuring_peer_info_t) == 72,
           "the peer info is %zu bytes, where run_mpi_tests' setup_leave_216 counts 72",
           sizeof(gpuring_peer_info_t));
    gpuring_bootstrap_peer_info_local(&peers[0], 0);
    gpuring_bootstrap_peer_info_local(&again, 0);
    EXPECT(peers[0].host_hash != 0 && peers[0].machine_hash != 0 &&
               peers[0].host_hash == again.host_hash &&
               peers[0].machine_hash == again.machine_hash,
           "the hashes are set, the same at each look");
    if (access("/proc/sys/kernel/random/boot_id", R_OK) == 0)
        EXPECT(peers[0].machine_hash != peers[0].host_hash,
               "the machine's hash is the boot id's alone (the host's has the name too)");

    for (int own_shm = 0; own_shm < 2; own_shm++) {
        static const char *const apart[2][2] = {
            {"another host name", "no UTS namespace of its own here (unshare refused)"},
            {"a /dev/shm of its own, one host name",
             "no mount namespace or tmpfs of its own here (refused)"}};

        rc = child_info(own_shm, &peers[1]);
        EXPECT(rc >= 0, "the child with %s answered", apart[own_shm][0]);
        if (rc == 1) {
            /* (refused to root too: CI's Open MPI 5 job runs in a chroot, where a
             * mount namespace of its own is) */
            printf("SKIP: %s\n", apart[own_shm][1]);
        } else if (rc == 0) {
            EXPECT(peers[1].host_hash != peers[0].host_hash &&
                       peers[1].machine_hash == peers[0].machine_hash,
                   "%s on this machine: another host, the same machine", apart[own_shm][0]);
        }
    }

    /* ranks 0 and 1: two containers of one machine; rank 2: another machine */
    memset(&c, 0, sizeof(c));
    peers[1] = peers[0];
    peers[1].host_hash ^= 0x5a5a;
    peers[2] = peers[0];
    peers[2].host_hash ^= 0x1111;
    peers[2].machine_hash ^= 0x1111;
    c.peers = peers;
    EXPECT(gpuring_comm_same_gpu(&c, 0, 0x4100, 1, 0x4100),
           "one PCI address, two containers of one machine: one GPU");
    EXPECT(!gpuring_comm_same_gpu(&c, 0, 0x4100, 1, 0x8100),
           "two PCI addresses on one machine: two GPUs");
    EXPECT(!gpuring_comm_same_gpu(&c, 0, 0x4100, 2, 0x4100),
           "one PCI address on two machines: two GPUs");
    return unit_report();
}
