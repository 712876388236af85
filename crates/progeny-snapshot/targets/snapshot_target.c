/*
 * Snapshot targets: one program, one mode per scenario the tests and benchmarks need.
 *
 *   checksum THREADS ROUNDS  each thread folds a deterministic integer+floating-point chain,
 *                            sleeping briefly between rounds, then waits (alive) for EOF on
 *                            stdin; the program prints the checksum, the SIGCHLDs it saw and
 *                            whether it has any child left (a snapshot must leave neither behind)
 *   read                     blocks in read(0) and reports what it returned
 *   nanosleep MS             sleeps MS milliseconds in one nanosleep and reports result and time
 *   poll MS                  polls stdin with a timeout of MS milliseconds and reports
 *   futex MS                 waits on a futex nobody wakes, with a timeout of MS milliseconds
 *   counter                  increments a global counter forever; prints its address; exits on EOF
 *   seccomp-kill-clone       installs a filter that kills the process on clone, then waits for EOF
 *   seccomp-allow            installs a filter that allows everything, then waits for EOF
 *   bench THREADS MIB [huge] touches MIB MiB (in transparent huge pages with "huge"), starts
 *                            THREADS-1 sleeping threads; the main thread
 *                            measures the longest gap in its 100 µs heartbeat ("gap" prints it)
 *   parked                   8 threads, each parked in its own named function, for gdb
 *
 * Every mode prints one line starting with "ready" once it is in the state under test.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t sigchld_seen;

static void on_sigchld(int sig) {
    (void)sig;
    sigchld_seen++;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void ready(void) {
    printf("ready pid=%d\n", getpid());
    fflush(stdout);
}

static void wait_for_eof(void) {
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
}

/* ---- checksum ---- */

struct chain {
    uint64_t seed;
    long rounds;
    uint64_t result;
};

static void *run_chain(void *arg) {
    struct chain *c = arg;
    uint64_t h = c->seed * 0x9e3779b97f4a7c15ull + 1;
    double f = 1.0 + (double)(c->seed % 7);
    for (long round = 0; round < c->rounds; round++) {
        for (int i = 0; i < 20000; i++) {
            h ^= h >> 29;
            h *= 0xbf58476d1ce4e5b9ull;
            h ^= h >> 32;
            /* Keep a value live in an SSE register across the loop: a snapshot that lost
             * floating-point state would change the result. */
            f = f * 1.0000001 + (double)(h & 0xff) * 1e-9;
        }
        h += (uint64_t)(f * 1e6);
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
    c->result = h;
    return NULL;
}

/* Threads stay alive, blocked, until the main thread has seen EOF: every snapshot taken before
 * then sees every thread, however fast or slow the machine is. */
static pthread_mutex_t release_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t release_cond = PTHREAD_COND_INITIALIZER;
static int released;

static void *run_chain_then_wait(void *arg) {
    run_chain(arg);
    pthread_mutex_lock(&release_lock);
    while (!released)
        pthread_cond_wait(&release_cond, &release_lock);
    pthread_mutex_unlock(&release_lock);
    return NULL;
}

static int mode_checksum(int threads, long rounds) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigchld;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);

    struct chain *chains = calloc((size_t)threads, sizeof *chains);
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    for (int t = 0; t < threads; t++) {
        chains[t].seed = (uint64_t)t + 1;
        chains[t].rounds = rounds;
        if (t > 0)
            pthread_create(&ids[t], NULL, run_chain_then_wait, &chains[t]);
    }
    ready();
    run_chain(&chains[0]);
    wait_for_eof();
    pthread_mutex_lock(&release_lock);
    released = 1;
    pthread_cond_broadcast(&release_cond);
    pthread_mutex_unlock(&release_lock);
    uint64_t total = 0;
    for (int t = 0; t < threads; t++) {
        if (t > 0)
            pthread_join(ids[t], NULL);
        total = total * 31 + chains[t].result;
    }
    /* A plain wait must see nothing; a __WALL probe that does not reap tells whether any child
     * (even a clone child with no exit signal) is left. */
    pid_t plain = waitpid(-1, NULL, WNOHANG);
    int plain_errno = errno;
    siginfo_t info;
    memset(&info, 0, sizeof info);
    int any = waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT | __WALL);
    int any_errno = errno;
    printf("checksum=%016llx sigchld=%d plain_wait=%d/%d children=%s\n", (unsigned long long)total,
           (int)sigchld_seen, (int)plain, plain == -1 ? plain_errno : 0,
           (any == -1 && any_errno == ECHILD) ? "none" : "present");
    return 0;
}

/* ---- blocked calls ---- */

static int mode_read(void) {
    char buf[64];
    ready();
    ssize_t n = read(0, buf, sizeof buf);
    printf("read=%zd errno=%d\n", n, n < 0 ? errno : 0);
    return 0;
}

static int mode_nanosleep(long ms) {
    struct timespec req = {ms / 1000, (ms % 1000) * 1000000};
    ready();
    int64_t start = now_ms();
    int ret = nanosleep(&req, NULL);
    int err = ret < 0 ? errno : 0;
    printf("ret=%d errno=%d elapsed_ms=%lld\n", ret, err, (long long)(now_ms() - start));
    return 0;
}

static int mode_poll(long ms) {
    struct pollfd fd = {.fd = 0, .events = POLLIN};
    ready();
    int64_t start = now_ms();
    int ret = poll(&fd, 1, (int)ms);
    int err = ret < 0 ? errno : 0;
    printf("ret=%d errno=%d revents=%d elapsed_ms=%lld\n", ret, err, fd.revents,
           (long long)(now_ms() - start));
    return 0;
}

static int mode_futex(long ms) {
    static uint32_t word;
    struct timespec timeout = {ms / 1000, (ms % 1000) * 1000000};
    ready();
    int64_t start = now_ms();
    long ret = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &timeout, NULL, 0);
    int err = ret < 0 ? errno : 0;
    printf("ret=%ld errno=%d elapsed_ms=%lld\n", ret, err, (long long)(now_ms() - start));
    return 0;
}

/* ---- counter ---- */

volatile uint64_t progeny_counter;

static void *exit_on_eof(void *arg) {
    (void)arg;
    wait_for_eof();
    printf("counter=%llu\n", (unsigned long long)progeny_counter);
    fflush(stdout);
    _exit(0);
}

static int mode_counter(void) {
    pthread_t id;
    pthread_create(&id, NULL, exit_on_eof, NULL);
    printf("ready pid=%d addr=%p\n", getpid(), (void *)&progeny_counter);
    fflush(stdout);
    for (;;)
        progeny_counter++;
    return 0;
}

/* ---- seccomp ---- */

static int install_filter(int kill_clone) {
    struct sock_filter kill_on_clone[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_filter allow_all[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog;
    if (kill_clone) {
        prog.len = sizeof kill_on_clone / sizeof kill_on_clone[0];
        prog.filter = kill_on_clone;
    } else {
        prog.len = sizeof allow_all / sizeof allow_all[0];
        prog.filter = allow_all;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int mode_seccomp(int kill_clone) {
    if (install_filter(kill_clone) != 0) {
        perror("seccomp");
        return 1;
    }
    ready();
    wait_for_eof();
    printf("alive\n");
    return 0;
}

/* ---- bench ---- */

static void *sleep_forever(void *arg) {
    (void)arg;
    for (;;) {
        struct timespec pause = {0, 20 * 1000000};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* The main thread is the heartbeat: it wakes every 100 µs and keeps the longest gap between
 * two wakeups, so the time something outside kept the process stopped (a snapshot, gdb) is
 * measured from inside. Each "gap" line on stdin prints the longest gap since the last one. */
static int mode_bench(int threads, long mib, int huge) {
    size_t len = (size_t)mib << 20;
    if (len > 0) {
        char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        /* Transparent huge pages, when asked: one page-table entry per 2 MiB instead of 512. */
        if (huge && madvise(mem, len, MADV_HUGEPAGE) != 0)
            perror("madvise(MADV_HUGEPAGE)");
        for (size_t off = 0; off < len; off += 4096)
            mem[off] = (char)off;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (int t = 1; t < threads; t++) {
        pthread_t id;
        if (pthread_create(&id, &attr, sleep_forever, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    ready();
    struct timespec last;
    clock_gettime(CLOCK_MONOTONIC, &last);
    int64_t longest_ns = 0;
    char line[64];
    size_t have = 0;
    for (;;) {
        struct pollfd fd = {.fd = 0, .events = POLLIN};
        struct timespec tick = {0, 100000};
        nanosleep(&tick, NULL);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t gap = (int64_t)(now.tv_sec - last.tv_sec) * 1000000000 + (now.tv_nsec - last.tv_nsec);
        if (gap > longest_ns)
            longest_ns = gap;
        last = now;
        if (poll(&fd, 1, 0) > 0) {
            ssize_t n = read(0, line + have, sizeof line - 1 - have);
            if (n <= 0)
                return 0;
            have += (size_t)n;
            line[have] = 0;
            if (strchr(line, '\n')) {
                /* Reset before answering: the answer wakes the measurer, which may stop us at
                 * once, and that stop must count in the next gap, not be erased by a reset
                 * that runs after it. */
                long long report_us = (long long)(longest_ns / 1000);
                longest_ns = 0;
                have = 0;
                clock_gettime(CLOCK_MONOTONIC, &last);
                printf("gap_us=%lld\n", report_us);
                fflush(stdout);
            }
        }
    }
}

/* ---- parked threads for gdb ---- */

int progeny_marker = 0;
static int park_pipe[2];

#define PARK_FUNCTION(name)                                                                        \
    __attribute__((noinline)) void name(void) {                                                     \
        char c;                                                                                    \
        while (read(park_pipe[0], &c, 1) < 0 && errno == EINTR) {                                  \
        }                                                                                          \
        __asm__ volatile("" ::: "memory");                                                         \
    }

PARK_FUNCTION(park_alpha)
PARK_FUNCTION(park_bravo)
PARK_FUNCTION(park_charlie)
PARK_FUNCTION(park_delta)
PARK_FUNCTION(park_echo)
PARK_FUNCTION(park_foxtrot)
PARK_FUNCTION(park_golf)

static void (*const parkers[])(void) = {park_alpha, park_bravo,   park_charlie, park_delta,
                                         park_echo,  park_foxtrot, park_golf};

static void *park_thread(void *arg) {
    parkers[(intptr_t)arg]();
    return NULL;
}

/* How many threads of this process other than the caller are in state S. */
static int sleeping_threads(void) {
    int count = 0;
    pid_t self = (pid_t)syscall(SYS_gettid);
    DIR *dir = opendir("/proc/self/task");
    if (!dir)
        return 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        int tid = atoi(entry->d_name);
        if (tid <= 0 || tid == self)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *close = strrchr(buf, ')');
        if (close && close[1] == ' ' && close[2] == 'S')
            count++;
    }
    closedir(dir);
    return count;
}

__attribute__((noinline)) void park_main_hotel(void) {
    wait_for_eof();
    __asm__ volatile("" ::: "memory");
}

static int mode_parked(void) {
    if (pipe(park_pipe) != 0)
        return 1;
    for (intptr_t t = 0; t < 7; t++) {
        pthread_t id;
        pthread_create(&id, NULL, park_thread, (void *)t);
    }
    progeny_marker = 0x5eed1234;
    /* Wait until the seven other threads sleep (in their read), so that every observer sees
     * them parked, not starting. */
    for (int tries = 0; tries < 5000 && sleeping_threads() < 7; tries++) {
        struct timespec settle = {0, 1000000};
        nanosleep(&settle, NULL);
    }
    ready();
    park_main_hotel();
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODE [ARGS]\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    long a = argc > 2 ? atol(argv[2]) : 0;
    long b = argc > 3 ? atol(argv[3]) : 0;
    if (strcmp(mode, "checksum") == 0)
        return mode_checksum((int)a, b);
    if (strcmp(mode, "read") == 0)
        return mode_read();
    if (strcmp(mode, "nanosleep") == 0)
        return mode_nanosleep(a);
    if (strcmp(mode, "poll") == 0)
        return mode_poll(a);
    if (strcmp(mode, "futex") == 0)
        return mode_futex(a);
    if (strcmp(mode, "counter") == 0)
        return mode_counter();
    if (strcmp(mode, "seccomp-kill-clone") == 0)
        return mode_seccomp(1);
    if (strcmp(mode, "seccomp-allow") == 0)
        return mode_seccomp(0);
    if (strcmp(mode, "bench") == 0)
        return mode_bench((int)a, b, argc > 4 && strcmp(argv[4], "huge") == 0);
    if (strcmp(mode, "parked") == 0)
        return mode_parked();
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
