/* HCCL's waiting policy in one place: how long a rank spins before it
 * sleeps, how it sleeps, how often a wait looks at its peers and its
 * deadline, and how the socket and shared-memory set-up retry. wait.c,
 * comm.c, p2p.c, socket.c, shm.c, net.c, bootstrap.c and error.c apply
 * these; the reason for each is here, and where a value was measured, the
 * measurement (CPU class and command) is in docs/PERFORMANCE.md.
 *
 * HCCL's own header rather than the C core's runtime/schedule_policy.h:
 * the core's rules are about threads of one process sharing a card's
 * queue, these are about processes waiting for each other, and neither
 * library's code applies the other's values. Both spin in bursts of
 * hpu_cpu_relax (hpu/clock.h) and read the same clock.
 *
 * Values not measured say so: they bound how soon a wait notices a dead
 * peer, an abort or its deadline, and any value far below the default
 * timeout (HCCL_TIMEOUT, 30 minutes) would do. */
#ifndef HCCL_WAIT_POLICY_H
#define HCCL_WAIT_POLICY_H

/* ---- hccl_wait: spin, then sleep (wait.c, comm.c) ---- */

/* How long a wait spins when every local rank can own a core (HCCL_SPIN_US
 * overrides it and the next two). Ranks in lock-step (a benchmark loop, a
 * bandwidth-bound chunk pipeline) meet within it; a longer spin burns the
 * core the late peer needs, or our own host thread recording the next
 * graph while the card's queue runs the collective, and a sleeping rank
 * frees its core so the scheduler can pull the late peer onto it. Measured on the Zen 5
 * class: a 100 ms poll took 40% of the card queue threads' time in DDP on
 * 2 ranks x 2 cores (docs/PERFORMANCE.md, "HCCL waits spin 50 us"). */
#define HCCL_SPIN_NS 50000

/* With more local ranks than cores: a spinning rank holds the core its
 * peer needs to arrive at all, so spin barely. Chosen with the next one
 * when a fixed 200k-iteration spin made an 8 B all-reduce of 2+2 ranks
 * ("hosts" sharing one machine) take 14 ms; with these spins it took
 * 60 us (CPU class not recorded). */
#define HCCL_SPIN_NS_OVERSUBSCRIBED 2000

/* With ranks on more than one host, local waits mostly cover network
 * time: spin little (the same 2+2-rank measurement). */
#define HCCL_SPIN_NS_MULTIHOST 5000

/* A spin reads the clock (and checks the abort words) once every this
 * many polls of its condition: a clock read costs more than a poll. Not
 * measured. */
#define HCCL_SPIN_BURST 64

/* Past this much spinning, a spin yields between bursts: a waiter that
 * stays runnable keeps answering within microseconds, yet hands its core
 * to a runnable thread (the late peer, our own host thread) on an
 * oversubscribed machine. Not measured. */
#define HCCL_SPIN_YIELD_AFTER_NS 5000

/* A spinning wait checks its peers' processes and its deadline this often,
 * so that a long HCCL_SPIN_US still fails fast. Not measured. */
#define HCCL_ALIVE_CHECK_NS 10000000

/* Once the spin is over, a wait yields this many times before it sleeps:
 * with more ranks than cores the peer often only needs our core for a
 * moment, and a yield is cheaper than a futex round trip. Not measured. */
#define HCCL_SLEEP_YIELDS 4

/* A sleeping wait wakes at least this often to check for a dead peer, an
 * abort and its deadline (a peer's death wakes nobody). Not measured. */
#define HCCL_FUTEX_SLICE_NS (20 * 1000000)

/* ---- send/recv with peers on other hosts (p2p.c) ---- */

/* With both mailboxes and sockets pending, p2p rounds poll the mailboxes
 * this many times without sleeping before each poll of the sockets: a
 * local peer answers in microseconds. Not measured. */
#define HCCL_P2P_MBOX_SPINS 1000

/* How long one poll of the sockets sleeps: briefly when mailboxes are also
 * pending (they do not wake poll), longer when only sockets are. Not
 * measured. */
#define HCCL_P2P_POLL_MS_WITH_MBOX 1
#define HCCL_P2P_POLL_MS 20

/* ---- sockets and set-up (socket.c, shm.c, net.c, bootstrap.c) ---- */

/* A blocking socket step sleeps in poll for at most this long at a time,
 * so that it sees an abort. Not measured. */
#define HCCL_SOCK_POLL_MAX_MS 100

/* A refused connect (the peer does not listen yet) is retried after this
 * long, doubling while below the cap, until the deadline. Not measured. */
#define HCCL_CONNECT_RETRY_FIRST_US 1000
#define HCCL_CONNECT_RETRY_CAP_US 50000

/* While the local leader creates the shared segment, the other local
 * ranks look for it after this long, and while the ranks map it, each
 * looks for the others after this long; both delays double while below
 * the cap. Set-up happens once per communicator. Not measured. */
#define HCCL_SHM_OPEN_RETRY_FIRST_US 200
#define HCCL_SHM_ATTACH_RETRY_FIRST_US 100
#define HCCL_SHM_RETRY_CAP_US 5000

/* A connecting peer gets this long to say who it is (the bootstrap root's
 * and the cross-host mesh's hello), so that a stray connection cannot hold
 * up the set-up; never longer than the communicator's deadline. */
#define HCCL_HELLO_TIMEOUT_NS 5000000000ll

/* The bootstrap root gives a refused or timed-out rank this long to take
 * its error reply before it closes the connection. */
#define HCCL_REPLY_TIMEOUT_NS 1000000000ll

/* HCCL_TIMEOUT's default, in seconds: PyTorch's default process-group
 * timeout (30 minutes). */
#define HCCL_DEFAULT_TIMEOUT_S 1800

#endif
